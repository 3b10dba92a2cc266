// Package builtin assembles every resource the API server serves, listed
// by API group. Each group's package has one Resources(deps); adding a
// resource to a group needs no change here, adding a group is one line.
package builtin

import (
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/admissionregistration"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/apiextensions"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/apiregistration"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/apps"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/authentication"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/authorization"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/autoscaling"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/batch"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/binding"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/certificates"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/clustertrustbundle"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/coordination"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/dra"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/endpointslice"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/events"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/flowcontrol"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/metrics"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/networking"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/podcertificaterequest"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/policy"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/rbac"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/runtimeclass"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/scheduling"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/servicecidr"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/storagek8s"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/storagemigration"
)

// Group is one API group's list of resources.
type Group func(deps registry.Deps) []registry.Resource

// Groups are the built-in API groups.
func Groups() []Group {
	return []Group{
		core.Resources,                  // "" (core/v1)
		binding.Resources,               // "" (core/v1 bindings)
		admissionregistration.Resources, // admissionregistration.k8s.io
		apiextensions.Resources,         // apiextensions.k8s.io
		apiregistration.Resources,       // apiregistration.k8s.io (APIServices)
		apps.Resources,                  // apps
		authentication.Resources,        // authentication.k8s.io
		authorization.Resources,         // authorization.k8s.io
		autoscaling.Resources,           // autoscaling (v2, and v1 stored as v2)
		batch.Resources,                 // batch
		certificates.Resources,          // certificates.k8s.io
		clustertrustbundle.Resources,    // certificates.k8s.io
		podcertificaterequest.Resources, // certificates.k8s.io
		coordination.Resources,          // coordination.k8s.io
		endpointslice.Resources,         // discovery.k8s.io
		events.Resources,                // events.k8s.io (stored as core/v1 Events)
		flowcontrol.Resources,           // flowcontrol.apiserver.k8s.io (API Priority and Fairness)
		networking.Resources,            // networking.k8s.io
		servicecidr.Resources,           // networking.k8s.io (ServiceCIDR, IPAddress)
		runtimeclass.Resources,          // node.k8s.io
		policy.Resources,                // policy
		dra.Resources,                   // resource.k8s.io (Dynamic Resource Allocation)
		rbac.Resources,                  // rbac.authorization.k8s.io
		scheduling.Resources,            // scheduling.k8s.io
		storagek8s.Resources,            // storage.k8s.io
		storagemigration.Resources,      // storagemigration.k8s.io
		metrics.Resources,               // metrics.k8s.io (served from the resource metrics pipeline)
		// admissionregistration.k8s.io: MutatingAdmissionPolicy and its bindings
		admissionregistration.MutatingPolicyResources,
	}
}

// Resources returns every built-in resource, group by group.
func Resources(deps registry.Deps) []registry.Resource {
	var rs []registry.Resource
	for _, g := range Groups() {
		rs = append(rs, g(deps)...)
	}
	return rs
}
