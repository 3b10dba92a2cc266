package sharedinformers

import (
	"context"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Cache serves one resource's lists and watches in process, from the API
// server's watch cache (apiserver.InProcessCache): what a watch delivers
// are the cache's own objects, shared with the API server and every
// informer that reads them. Never mutate them.
type Cache interface {
	List(ctx context.Context, namespace string, opts metav1.ListOptions) (runtime.Object, error)
	Watch(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
}

// Caches finds the in-process cache of a resource; false: its informers
// list and watch through the client.
type Caches func(schema.GroupVersionResource) (Cache, bool)

// The resources whose informers read the API server's cache in process
// when it serves them: the bulk of a large cluster's objects.
var (
	podsResource  = corev1.SchemeGroupVersion.WithResource("pods")
	nodesResource = corev1.SchemeGroupVersion.WithResource("nodes")
)

// inProcessClient is a client whose lists and watches of pods and nodes
// go to the API server's cache in process; everything else goes through
// the client it wraps.
type inProcessClient struct {
	kubernetes.Interface
	pods, nodes Cache
}

// inProcess wraps client so that the resources caches serves are listed
// and watched in process. served tells the object types whose informers
// hold shared objects (the transform must leave those alone).
func inProcess(client kubernetes.Interface, caches Caches) (kubernetes.Interface, map[reflect.Type]bool) {
	served := map[reflect.Type]bool{}
	if caches == nil {
		return client, served
	}
	c := &inProcessClient{Interface: client}
	if cache, ok := caches(podsResource); ok {
		c.pods = cache
		served[reflect.TypeFor[*corev1.Pod]()] = true
	}
	if cache, ok := caches(nodesResource); ok {
		c.nodes = cache
		served[reflect.TypeFor[*corev1.Node]()] = true
	}
	return c, served
}

func (c *inProcessClient) CoreV1() corev1client.CoreV1Interface {
	return coreV1{CoreV1Interface: c.Interface.CoreV1(), c: c}
}

type coreV1 struct {
	corev1client.CoreV1Interface
	c *inProcessClient
}

func (v coreV1) Pods(namespace string) corev1client.PodInterface {
	pods := v.CoreV1Interface.Pods(namespace)
	if v.c.pods == nil {
		return pods
	}
	return podClient{PodInterface: pods, lw: listWatch[*corev1.PodList]{v.c.pods, namespace}}
}

func (v coreV1) Nodes() corev1client.NodeInterface {
	nodes := v.CoreV1Interface.Nodes()
	if v.c.nodes == nil {
		return nodes
	}
	return nodeClient{NodeInterface: nodes, lw: listWatch[*corev1.NodeList]{v.c.nodes, ""}}
}

type podClient struct {
	corev1client.PodInterface
	lw listWatch[*corev1.PodList]
}

func (p podClient) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	return p.lw.list(ctx, opts)
}

func (p podClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return p.lw.watch(ctx, opts)
}

type nodeClient struct {
	corev1client.NodeInterface
	lw listWatch[*corev1.NodeList]
}

func (n nodeClient) List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	return n.lw.list(ctx, opts)
}

func (n nodeClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return n.lw.watch(ctx, opts)
}

// listWatch is a resource's in-process list and watch in one namespace
// ("" for all, and for cluster-scoped resources).
type listWatch[L runtime.Object] struct {
	cache     Cache
	namespace string
}

func (lw listWatch[L]) list(ctx context.Context, opts metav1.ListOptions) (L, error) {
	var zero L
	obj, err := lw.cache.List(ctx, lw.namespace, opts)
	if err != nil {
		return zero, err
	}
	l, ok := obj.(L)
	if !ok {
		return zero, fmt.Errorf("in-process list: got %T, want %T", obj, zero)
	}
	return l, nil
}

func (lw listWatch[L]) watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return lw.cache.Watch(ctx, lw.namespace, opts)
}
