package manager

import (
	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/deployment"
	"github.com/skiff-sh/skiff/internal/controller/replicaset"
)

// Controllers is the registry of every controller the manager knows, by the
// name used in --controllers (upstream's names). This is the one place a
// new controller is added: one line each.
func Controllers() map[string]controllercontext.InitFunc {
	return map[string]controllercontext.InitFunc{
		"deployment":            deployment.New,
		"replicaset":            replicaset.New,
		"replicationcontroller": replicaset.NewForReplicationControllers,
		// Not yet added (their packages internal/controller/<name> did not
		// exist or did not build when the manager landed). Each exports
		// New(ctx, controllercontext.Context) (controllercontext.Controller, error)
		// and needs one line here:
		//   "nodelifecycle", "endpointslice", "endpoints", "namespace",
		//   "garbagecollector", "serviceaccount", "root-ca-cert-publisher",
		//   "podgc"
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
	case "endpoints":
		return "endpoint-controller"
	case "endpointslice":
		return "endpoint-slice-controller"
	case "garbagecollector":
		return "garbage-collector-controller"
	case "root-ca-cert-publisher":
		return "root-ca-cert-publisher"
	case "podgc":
		return "pod-garbage-collector"
	}
	return name + "-controller"
}
