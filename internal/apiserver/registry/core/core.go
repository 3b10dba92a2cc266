// Package core lists the core/v1 resources served by the API server. The
// rules of each resource live in its own subpackage (pod, node, namespace,
// service, ...); this package only lists them.
package core

import (
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/componentstatus"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/configmap"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/endpoints"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/event"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/limitrange"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/namespace"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/node"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/persistentvolume"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/persistentvolumeclaim"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/pod"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/podtemplate"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/replicationcontroller"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/resourcequota"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/secret"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/service"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/serviceaccount"
)

// Resources lists the core/v1 resources. deps.Services hands out the
// ClusterIPs and NodePorts of services (the server rebuilds it from the
// stored services before serving writes); deps.CheckEtcd is the health
// that componentstatuses report.
func Resources(deps registry.Deps) []registry.Resource {
	return []registry.Resource{
		pod.Resource(),
		node.Resource(),
		namespace.Resource(),
		configmap.Resource(),
		secret.Resource(),
		serviceaccount.Resource(),
		event.Resource(),
		service.Resource(deps.Services),
		endpoints.Resource(),
		persistentvolume.Resource(),
		persistentvolumeclaim.Resource(),
		limitrange.Resource(),
		resourcequota.Resource(),
		podtemplate.Resource(),
		replicationcontroller.Resource(),
		componentstatus.Resource(deps.CheckEtcd, deps.CheckComponent),
	}
}
