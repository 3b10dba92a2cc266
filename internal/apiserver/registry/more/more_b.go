package more

import (
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/admissionregistration"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/authorization"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/certificates"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/networking"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/node"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/rbac"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/scheduling"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/storage"
)

// IssueThreeResourcesB lists the resources of issue #3, part B:
// storage.k8s.io, networking.k8s.io (networkpolicies, ingresses,
// ingressclasses), scheduling.k8s.io, node.k8s.io, certificates.k8s.io,
// rbac.authorization.k8s.io, admissionregistration.k8s.io and the
// authorization.k8s.io self reviews.
//
// Wiring notes:
//   - priorityclasses is built without a lister, so a second globalDefault
//     is not refused; build it with scheduling.Resource(lister) to enable
//     the check, and create scheduling.SystemPriorityClasses() at start.
//   - the two authorization.k8s.io reviews are virtual (create only, no
//     NewList, no StoragePrefix): authorization.IsVirtual tells them apart;
//     serve their create with authorization.ReviewSelfAccess and
//     authorization.ReviewSelfRules, and build no store for them.
//   - certificatesigningrequests serves "approval" beside "status": use
//     certificates.PrepareForApprovalUpdate and ValidateApprovalUpdate for it.
func IssueThreeResourcesB() []registry.Resource {
	var rs []registry.Resource
	rs = append(rs, storage.Resources()...)
	rs = append(rs, networking.Resources()...)
	rs = append(rs, scheduling.Resource(nil), node.Resource(), certificates.Resource())
	rs = append(rs, rbac.Resources()...)
	rs = append(rs, admissionregistration.Resources()...)
	rs = append(rs, authorization.Resources()...)
	return rs
}
