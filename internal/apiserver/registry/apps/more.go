package apps

import "github.com/skiff-sh/skiff/internal/apiserver/registry"

// MoreResources lists the apps/v1 resources beyond deployments and
// replicasets: daemonsets, statefulsets (with scale) and
// controllerrevisions.
func MoreResources() []registry.Resource {
	return []registry.Resource{DaemonSetResource(), StatefulSetResource(), ControllerRevisionResource()}
}
