package aggregator

import "k8s.io/apimachinery/pkg/runtime/schema"

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
