// Package more gathers the resources added for issue #3: each one's rules
// live in its own registry package; this package only lists them for the
// server's wiring.
package more

import (
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/apps"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/autoscaling"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/batch"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/componentstatus"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/limitrange"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/persistentvolume"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/persistentvolumeclaim"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/podtemplate"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/replicationcontroller"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/resourcequota"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/policy"
)

// IssueThreeResourcesA lists part A of issue #3: apps/v1 daemonsets,
// statefulsets and controllerrevisions; batch/v1 jobs and cronjobs;
// autoscaling/v2 and autoscaling/v1 (stored as v2) HPAs; policy/v1 PDBs;
// and core/v1 persistentvolumes, persistentvolumeclaims, limitranges,
// resourcequotas, podtemplates, replicationcontrollers and the read-only
// componentstatuses (whose Strategy lists only get and list; the handler
// serves componentstatus.ComponentStatuses instead of the store).
func IssueThreeResourcesA() []registry.Resource {
	var rs []registry.Resource
	rs = append(rs, apps.MoreResources()...)
	rs = append(rs, batch.Resources()...)
	rs = append(rs, autoscaling.Resources()...)
	rs = append(rs, policy.Resource())
	rs = append(rs,
		persistentvolume.Resource(),
		persistentvolumeclaim.Resource(),
		limitrange.Resource(),
		resourcequota.Resource(),
		podtemplate.Resource(),
		replicationcontroller.Resource(),
		componentstatus.Resource(),
	)
	return rs
}
