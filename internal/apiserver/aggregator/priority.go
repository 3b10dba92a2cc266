package aggregator

import (
	"maps"

	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

type priority struct{ group, version int32 }

// builtinPriority are kube-apiserver's priorities for the group versions
// Skiff serves (cmd/kube-apiserver/app/aggregator.go and
// pkg/controlplane/apiserver/aggregator.go); metrics.k8s.io has
// metrics-server's.
var builtinPriority = map[schema.GroupVersion]priority{
	{Group: "", Version: "v1"}:                             {18000, 1},
	{Group: "events.k8s.io", Version: "v1"}:                {17750, 15},
	{Group: "authentication.k8s.io", Version: "v1"}:        {17700, 15},
	{Group: "authorization.k8s.io", Version: "v1"}:         {17600, 15},
	{Group: "certificates.k8s.io", Version: "v1"}:          {17300, 15},
	{Group: "rbac.authorization.k8s.io", Version: "v1"}:    {17000, 15},
	{Group: "apiextensions.k8s.io", Version: "v1"}:         {16700, 15},
	{Group: "admissionregistration.k8s.io", Version: "v1"}: {16700, 15},
	{Group: "coordination.k8s.io", Version: "v1"}:          {16500, 15},
	{Group: "discovery.k8s.io", Version: "v1"}:             {16200, 15},
	{Group: "flowcontrol.apiserver.k8s.io", Version: "v1"}: {16100, 21},
	{Group: "storagemigration.k8s.io", Version: "v1"}:      {15800, 15},
	{Group: "apps", Version: "v1"}:                         {17800, 15},
	{Group: "autoscaling", Version: "v1"}:                  {17500, 15},
	{Group: "autoscaling", Version: "v2"}:                  {17500, 30},
	{Group: "batch", Version: "v1"}:                        {17400, 15},
	{Group: "networking.k8s.io", Version: "v1"}:            {17200, 15},
	{Group: "policy", Version: "v1"}:                       {17100, 15},
	{Group: "storage.k8s.io", Version: "v1"}:               {16800, 15},
	{Group: "scheduling.k8s.io", Version: "v1"}:            {16600, 15},
	{Group: "node.k8s.io", Version: "v1"}:                  {16300, 15},
	{Group: "resource.k8s.io", Version: "v1"}:              {16200, 21},
	{Group: "apiregistration.k8s.io", Version: "v1"}:       {18000, 15},
	{Group: "metrics.k8s.io", Version: "v1beta1"}:          {100, 100},
}

// groupPriority and versionPriority: upstream's for built-in group
// versions, 1000/100 for others (upstream's crdregistration controller).
func groupPriority(gv schema.GroupVersion) int32 {
	if p, ok := builtinPriority[gv]; ok {
		return p.group
	}
	return 1000
}

func versionPriority(gv schema.GroupVersion) int32 {
	if p, ok := builtinPriority[gv]; ok {
		return p.version
	}
	return 100
}

// DefaultPriority is a group version's priorities without an APIService
// saying otherwise: upstream's for the built-in ones, 1000/100 for others.
func DefaultPriority(gv schema.GroupVersion) (group, version int32) {
	return groupPriority(gv), versionPriority(gv)
}

// Priority is gv's groupPriorityMinimum and versionPriority as its
// APIService says (at the last sync), else DefaultPriority. Discovery
// orders groups and versions by it.
func (a *Aggregator) Priority(gv schema.GroupVersion) (group, version int32) {
	a.mu.Lock()
	p, ok := a.priorities[gv]
	a.mu.Unlock()
	if ok {
		return p.group, p.version
	}
	return DefaultPriority(gv)
}

// setPriorities records the APIServices' priorities; it reports whether
// any changed.
func (a *Aggregator) setPriorities(list []*apiregv1.APIService) bool {
	m := map[schema.GroupVersion]priority{}
	for _, svc := range list {
		if svc.DeletionTimestamp == nil {
			m[schema.GroupVersion{Group: svc.Spec.Group, Version: svc.Spec.Version}] = priority{svc.Spec.GroupPriorityMinimum, svc.Spec.VersionPriority}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if maps.Equal(m, a.priorities) {
		return false
	}
	a.priorities = m
	return true
}
