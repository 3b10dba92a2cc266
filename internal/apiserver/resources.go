package apiserver

import (
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/allocator"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/namespace"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/node"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/pod"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/service"
	"github.com/skiff-sh/skiff/internal/storage"
)

// builtinResources is every resource the server serves, built in one
// place.
func builtinResources(alloc *allocator.Services) []registry.Resource {
	return []registry.Resource{
		pod.Resource(),
		node.Resource(),
		namespace.Resource(),
		service.Resource(alloc),
		generic(corev1.SchemeGroupVersion, "endpoints", "Endpoints", "endpoints", true, "services/endpoints", []string{"ep"}, nil,
			func() runtime.Object { return &corev1.Endpoints{} }, func() runtime.Object { return &corev1.EndpointsList{} }),
		generic(corev1.SchemeGroupVersion, "configmaps", "ConfigMap", "configmap", true, "configmaps", []string{"cm"}, nil,
			func() runtime.Object { return &corev1.ConfigMap{} }, func() runtime.Object { return &corev1.ConfigMapList{} }),
		generic(corev1.SchemeGroupVersion, "secrets", "Secret", "secret", true, "secrets", nil, nil,
			func() runtime.Object { return &corev1.Secret{} }, func() runtime.Object { return &corev1.SecretList{} }),
		generic(corev1.SchemeGroupVersion, "serviceaccounts", "ServiceAccount", "serviceaccount", true, "serviceaccounts", []string{"sa"}, nil,
			func() runtime.Object { return &corev1.ServiceAccount{} }, func() runtime.Object { return &corev1.ServiceAccountList{} }),
		generic(corev1.SchemeGroupVersion, "events", "Event", "event", true, "events", []string{"ev"}, nil,
			func() runtime.Object { return &corev1.Event{} }, func() runtime.Object { return &corev1.EventList{} }),
		withSub(generic(appsv1.SchemeGroupVersion, "deployments", "Deployment", "deployment", true, "deployments", []string{"deploy"}, []string{"all"},
			func() runtime.Object { return &appsv1.Deployment{} }, func() runtime.Object { return &appsv1.DeploymentList{} }), "status"),
		withSub(generic(appsv1.SchemeGroupVersion, "replicasets", "ReplicaSet", "replicaset", true, "replicasets", []string{"rs"}, []string{"all"},
			func() runtime.Object { return &appsv1.ReplicaSet{} }, func() runtime.Object { return &appsv1.ReplicaSetList{} }), "status"),
		generic(coordinationv1.SchemeGroupVersion, "leases", "Lease", "lease", true, "leases", nil, nil,
			func() runtime.Object { return &coordinationv1.Lease{} }, func() runtime.Object { return &coordinationv1.LeaseList{} }),
		generic(discoveryv1.SchemeGroupVersion, "endpointslices", "EndpointSlice", "endpointslice", true, "endpointslices", nil, nil,
			func() runtime.Object { return &discoveryv1.EndpointSlice{} }, func() runtime.Object { return &discoveryv1.EndpointSliceList{} }),
	}
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
	return storage.ProtobufCodec{GVK: gvk}
}
