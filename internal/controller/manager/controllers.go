package manager

import (
	"github.com/skiff-sh/skiff/internal/controller/admissionpolicystatus"
	"github.com/skiff-sh/skiff/internal/controller/clusterroleaggregation"
	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/cronjob"
	"github.com/skiff-sh/skiff/internal/controller/csrapproving"
	"github.com/skiff-sh/skiff/internal/controller/csrsigning"
	"github.com/skiff-sh/skiff/internal/controller/daemonset"
	"github.com/skiff-sh/skiff/internal/controller/deployment"
	"github.com/skiff-sh/skiff/internal/controller/disruption"
	"github.com/skiff-sh/skiff/internal/controller/endpoints"
	"github.com/skiff-sh/skiff/internal/controller/endpointslice"
	"github.com/skiff-sh/skiff/internal/controller/endpointslicemirroring"
	"github.com/skiff-sh/skiff/internal/controller/garbagecollector"
	"github.com/skiff-sh/skiff/internal/controller/job"
	"github.com/skiff-sh/skiff/internal/controller/namespace"
	"github.com/skiff-sh/skiff/internal/controller/nodeipam"
	"github.com/skiff-sh/skiff/internal/controller/nodelifecycle"
	"github.com/skiff-sh/skiff/internal/controller/podautoscaler"
	"github.com/skiff-sh/skiff/internal/controller/podgc"
	"github.com/skiff-sh/skiff/internal/controller/pvcprotection"
	"github.com/skiff-sh/skiff/internal/controller/pvprotection"
	"github.com/skiff-sh/skiff/internal/controller/replicaset"
	"github.com/skiff-sh/skiff/internal/controller/resourceclaim"
	"github.com/skiff-sh/skiff/internal/controller/resourcequota"
	"github.com/skiff-sh/skiff/internal/controller/rootcacert"
	"github.com/skiff-sh/skiff/internal/controller/serviceaccount"
	"github.com/skiff-sh/skiff/internal/controller/servicecidr"
	"github.com/skiff-sh/skiff/internal/controller/statefulset"
	"github.com/skiff-sh/skiff/internal/controller/storageversionmigrator"
	"github.com/skiff-sh/skiff/internal/controller/ttlafterfinished"
	"github.com/skiff-sh/skiff/internal/controller/volume/ephemeral"
	"github.com/skiff-sh/skiff/internal/controller/volume/expand"
	"github.com/skiff-sh/skiff/internal/controller/volume/persistentvolume"
)

// Controllers is the registry of every controller the manager knows, by the
// name used in --controllers (upstream's names). This is the one place a
// new controller is added: one line each.
func Controllers() map[string]controllercontext.InitFunc {
	return map[string]controllercontext.InitFunc{
		"clusterrole-aggregation":   clusterroleaggregation.New,
		"cronjob":                   cronjob.New,
		"csrapproving":              csrapproving.New,
		"csrsigning":                csrsigning.New,
		"daemonset":                 daemonset.New,
		"deployment":                deployment.New,
		"disruption":                disruption.New,
		"endpoints":                 endpoints.New,
		"endpointslice":             endpointslice.New,
		endpointslicemirroring.Name: endpointslicemirroring.New,
		ephemeral.Name:              ephemeral.New,
		"garbagecollector":          garbagecollector.New,
		podautoscaler.Name:          podautoscaler.New,
		"job":                       job.New,
		"namespace":                 namespace.New,
		"node-ipam-controller":      nodeipam.New,
		"nodelifecycle":             nodelifecycle.New,
		persistentvolume.Name:       persistentvolume.New,
		expand.Name:                 expand.New,
		"podgc":                     podgc.New,
		pvcprotection.Name:          pvcprotection.New,
		pvprotection.Name:           pvprotection.New,
		"replicaset":                replicaset.New,
		"replicationcontroller":     replicaset.NewForReplicationControllers,
		resourceclaim.Name:          resourceclaim.New,
		resourcequota.Name:          resourcequota.New,
		"root-ca-cert-publisher":    rootcacert.New,
		"serviceaccount":            serviceaccount.New,
		serviceaccount.TokensName:   serviceaccount.NewTokens,
		servicecidr.Name:            servicecidr.New,
		"statefulset":               statefulset.New,
		storageversionmigrator.Name: storageversionmigrator.New,
		"ttl-after-finished":        ttlafterfinished.New,
		admissionpolicystatus.Name:  admissionpolicystatus.New,
	}
}

// ComponentName is the event source component of controller name: the
// names upstream's controllers use, else "<name>-controller".
func ComponentName(name string) string {
	switch name {
	case "replicationcontroller":
		return "replication-controller"
	case "nodelifecycle":
		return "node-controller"
	case "node-ipam-controller":
		return "cidrAllocator"
	case "endpoints":
		return "endpoint-controller"
	case "endpointslice":
		return "endpoint-slice-controller"
	case endpointslicemirroring.Name:
		return endpointslicemirroring.ComponentName
	case "garbagecollector":
		return "garbage-collector-controller"
	case "root-ca-cert-publisher":
		return "root-ca-cert-publisher"
	case "podgc":
		return "pod-garbage-collector"
	case "disruption":
		return "controllermanager"
	case persistentvolume.Name:
		return persistentvolume.ComponentName
	case ephemeral.Name:
		return ephemeral.ComponentName
	case expand.Name:
		return expand.ComponentName
	case podautoscaler.Name:
		return "horizontal-pod-autoscaler"
	case resourceclaim.Name:
		return "resource_claim"
	case servicecidr.Name:
		return servicecidr.Name
	}
	return name + "-controller"
}
