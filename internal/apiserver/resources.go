package apiserver

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/allocator"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core"
	coreevent "github.com/skiff-sh/skiff/internal/apiserver/registry/core/event"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/service"
	eventsk8s "github.com/skiff-sh/skiff/internal/apiserver/registry/events/event"
	"github.com/skiff-sh/skiff/internal/storage"
)

// builtinResources is every resource the server serves, built in one
// place.
func builtinResources(alloc *allocator.Services) []registry.Resource {
	rs := core.CoreResourcesPart1()
	rs = append(rs,
		service.Resource(alloc),
		generic(corev1.SchemeGroupVersion, "endpoints", "Endpoints", "endpoints", true, "services/endpoints", []string{"ep"}, nil,
			func() runtime.Object { return &corev1.Endpoints{} }, func() runtime.Object { return &corev1.EndpointsList{} }),
		withSub(generic(appsv1.SchemeGroupVersion, "deployments", "Deployment", "deployment", true, "deployments", []string{"deploy"}, []string{"all"},
			func() runtime.Object { return &appsv1.Deployment{} }, func() runtime.Object { return &appsv1.DeploymentList{} }), "status"),
		withSub(generic(appsv1.SchemeGroupVersion, "replicasets", "ReplicaSet", "replicaset", true, "replicasets", []string{"rs"}, []string{"all"},
			func() runtime.Object { return &appsv1.ReplicaSet{} }, func() runtime.Object { return &appsv1.ReplicaSetList{} }), "status"),
		generic(coordinationv1.SchemeGroupVersion, "leases", "Lease", "lease", true, "leases", nil, nil,
			func() runtime.Object { return &coordinationv1.Lease{} }, func() runtime.Object { return &coordinationv1.LeaseList{} }),
		generic(discoveryv1.SchemeGroupVersion, "endpointslices", "EndpointSlice", "endpointslice", true, "endpointslices", nil, nil,
			func() runtime.Object { return &discoveryv1.EndpointSlice{} }, func() runtime.Object { return &discoveryv1.EndpointSliceList{} }),
	)
	return rs
}

func generic(gv schema.GroupVersion, plural, kind, singular string, namespaced bool, prefix string, short, cats []string, newFn, newList func() runtime.Object) registry.Resource {
	return registry.Resource{
		GroupVersion: gv, Resource: plural, Kind: kind, ListKind: kind + "List", SingularName: singular,
		ShortNames: short, Categories: cats, Namespaced: namespaced, StoragePrefix: prefix,
		New: newFn, NewList: newList, Strategy: registry.DefaultStrategy{},
	}
}

func withSub(r registry.Resource, subs ...string) registry.Resource {
	if r.Subresources == nil {
		r.Subresources = map[string]bool{}
	}
	for _, s := range subs {
		r.Subresources[s] = true
	}
	return r
}

// storageCodec is how a resource's objects are kept in etcd.
func storageCodec(res registry.Resource, gvk schema.GroupVersionKind) storage.Codec {
	if gvk == eventsv1.SchemeGroupVersion.WithKind("Event") {
		return storage.ConvertingCodec{
			Storage:   storage.ProtobufCodec{GVK: corev1.SchemeGroupVersion.WithKind("Event")},
			NewStored: func() runtime.Object { return &corev1.Event{} },
			ToStored: func(o runtime.Object) (runtime.Object, error) {
				ev, ok := o.(*eventsv1.Event)
				if !ok {
					return nil, fmt.Errorf("expected events.k8s.io/v1 Event, got %T", o)
				}
				return eventsk8s.ToCore(ev), nil
			},
			FromStored: func(stored, into runtime.Object) error {
				*into.(*eventsv1.Event) = *eventsk8s.FromCore(stored.(*corev1.Event))
				return nil
			},
			GVK: gvk,
		}
	}
	return storage.ProtobufCodec{GVK: gvk}
}

// storageTTL is how long a resource's objects live (events: one hour, as
// upstream's --event-ttl).
func storageTTL(res registry.Resource) int64 {
	if res.Resource == "events" {
		return int64(coreevent.TTLSeconds)
	}
	return 0
}
