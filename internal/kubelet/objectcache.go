package kubelet

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// objectCache keeps the ConfigMaps or the Secrets the node's pods
// reference, as upstream kubelet's default Watch change-detection strategy
// does: each referenced object has a watch of its own (a list and watch in
// its namespace with the field selector metadata.name=<name>, which the
// Node authorizer allows for objects a pod of the node references), started
// when the first pod references it and stopped when none does. A pod's
// volume and env then read the object from memory at every sync instead of
// asking the API server (the kube-root-ca.crt ConfigMap of every projected
// service-account volume was one GET a pod sync). Updates reach the cache
// by the watch, and the pod's volume at its next sync, as before.
type objectCache struct {
	resource schema.GroupResource
	// list and watch read one namespace (the caller sets the selector);
	// get reads one object, for objects no pod registered.
	list  func(ctx context.Context, namespace string, opts metav1.ListOptions) (runtime.Object, error)
	watch func(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
	get   func(ctx context.Context, namespace, name string) (runtime.Object, error)
	obj   runtime.Object // an empty object of the type

	mu    sync.Mutex
	items map[objectKey]*cachedObject
	refs  map[types.UID][]objectKey // each pod's references, as last registered
}

type objectKey struct{ namespace, name string }

// cachedObject is one referenced object's watch.
type cachedObject struct {
	pods   map[types.UID]struct{}
	store  cache.Store
	synced <-chan struct{} // closed once the watch has listed
	stop   context.CancelFunc
}

// syncWait bounds how long a read waits for a new watch's first list before
// it asks the API server directly.
const syncWait = 5 * time.Second

func newConfigMapCache(client kubernetes.Interface) *objectCache {
	return &objectCache{
		resource: corev1.Resource("configmaps"),
		obj:      &corev1.ConfigMap{},
		list: func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().ConfigMaps(ns).List(ctx, o)
		},
		watch: func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
			return client.CoreV1().ConfigMaps(ns).Watch(ctx, o)
		},
		get: func(ctx context.Context, ns, name string) (runtime.Object, error) {
			return client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		},
		items: map[objectKey]*cachedObject{},
		refs:  map[types.UID][]objectKey{},
	}
}

func newSecretCache(client kubernetes.Interface) *objectCache {
	return &objectCache{
		resource: corev1.Resource("secrets"),
		obj:      &corev1.Secret{},
		list: func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Secrets(ns).List(ctx, o)
		},
		watch: func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
			return client.CoreV1().Secrets(ns).Watch(ctx, o)
		},
		get: func(ctx context.Context, ns, name string) (runtime.Object, error) {
			return client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		},
		items: map[objectKey]*cachedObject{},
		refs:  map[types.UID][]objectKey{},
	}
}

// register records the objects pod references (names in its namespace):
// watches start for new ones, and those no pod references any more stop.
func (c *objectCache) register(ctx context.Context, pod types.UID, namespace string, names []string) {
	keys := make([]objectKey, 0, len(names))
	for _, n := range names {
		keys = append(keys, objectKey{namespace, n})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, key := range keys {
		item := c.items[key]
		if item == nil {
			item = c.startLocked(ctx, key)
			c.items[key] = item
		}
		item.pods[pod] = struct{}{}
	}
	c.dropLocked(pod, keys)
	if len(keys) == 0 {
		delete(c.refs, pod)
	} else {
		c.refs[pod] = keys
	}
}

// unregister forgets a pod's references.
func (c *objectCache) unregister(pod types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(pod, nil)
	delete(c.refs, pod)
}

// dropLocked removes pod from the objects it referenced and no longer
// does (not in keep), stopping watches nobody needs.
func (c *objectCache) dropLocked(pod types.UID, keep []objectKey) {
	for _, key := range c.refs[pod] {
		if containsKey(keep, key) {
			continue
		}
		item := c.items[key]
		if item == nil {
			continue
		}
		delete(item.pods, pod)
		if len(item.pods) == 0 {
			item.stop()
			delete(c.items, key)
		}
	}
}

func containsKey(keys []objectKey, k objectKey) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

func (c *objectCache) startLocked(ctx context.Context, key objectKey) *cachedObject {
	ctx, cancel := context.WithCancel(ctx)
	selector := fields.OneTermEqualSelector("metadata.name", key.name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return c.list(ctx, key.namespace, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return c.watch(ctx, key.namespace, o)
		},
	}
	store, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: cache.ToListWatcherWithWatchListSemantics(lw, listThenWatch{}),
		ObjectType:    c.obj,
		Handler:       cache.ResourceEventHandlerFuncs{},
	})
	go ctrl.RunWithContext(ctx)
	return &cachedObject{pods: map[types.UID]struct{}{}, store: store, synced: ctrl.HasSyncedChecker().Done(), stop: cancel}
}

// listThenWatch makes a watch start with a list (resourceVersion 0, served
// from the API server's watch cache at once) rather than a watch-list
// stream, whose end the first read of a new pod would wait for.
type listThenWatch struct{}

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// read returns the object from its watch once that has listed, NotFound
// when the watch has no such object. An object no pod registered, or a
// watch that has not listed within syncWait, is read from the API server.
func (c *objectCache) read(ctx context.Context, namespace, name string) (runtime.Object, error) {
	c.mu.Lock()
	item := c.items[objectKey{namespace, name}]
	c.mu.Unlock()
	if item == nil {
		return c.get(ctx, namespace, name)
	}
	select {
	case <-item.synced:
	default:
		t := time.NewTimer(syncWait)
		select {
		case <-item.synced:
			t.Stop()
		case <-t.C:
			return c.get(ctx, namespace, name)
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	obj, exists, err := item.store.GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, apierrors.NewNotFound(c.resource, name)
	}
	return obj.(runtime.Object), nil
}

// watches counts the running watches (tests).
func (c *objectCache) watches() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

// podConfigMapNames are the ConfigMaps a pod reads: configMap volumes and
// projected sources, env and envFrom of every container (init and
// ephemeral ones too), as upstream's VisitPodConfigmapNames.
func podConfigMapNames(pod *corev1.Pod) []string {
	var names []string
	add := func(n string) {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil {
			add(v.ConfigMap.Name)
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					add(s.ConfigMap.Name)
				}
			}
		}
	}
	visitEnv(pod, func(e corev1.EnvVar) {
		if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
			add(e.ValueFrom.ConfigMapKeyRef.Name)
		}
	}, func(e corev1.EnvFromSource) {
		if e.ConfigMapRef != nil {
			add(e.ConfigMapRef.Name)
		}
	})
	return names
}

// podSecretNames are the Secrets a pod reads: imagePullSecrets, secret
// volumes and projected sources, env and envFrom, as upstream's
// VisitPodSecretNames for the volume types Skiff has.
func podSecretNames(pod *corev1.Pod) []string {
	var names []string
	add := func(n string) {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, s := range pod.Spec.ImagePullSecrets {
		add(s.Name)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil {
			add(v.Secret.SecretName)
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					add(s.Secret.Name)
				}
			}
		}
	}
	visitEnv(pod, func(e corev1.EnvVar) {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			add(e.ValueFrom.SecretKeyRef.Name)
		}
	}, func(e corev1.EnvFromSource) {
		if e.SecretRef != nil {
			add(e.SecretRef.Name)
		}
	})
	return names
}

func visitEnv(pod *corev1.Pod, env func(corev1.EnvVar), envFrom func(corev1.EnvFromSource)) {
	visit := func(vars []corev1.EnvVar, from []corev1.EnvFromSource) {
		for _, e := range vars {
			env(e)
		}
		for _, e := range from {
			envFrom(e)
		}
	}
	for _, c := range pod.Spec.InitContainers {
		visit(c.Env, c.EnvFrom)
	}
	for _, c := range pod.Spec.Containers {
		visit(c.Env, c.EnvFrom)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		visit(c.Env, c.EnvFrom)
	}
}

// registerObjects records the ConfigMaps and Secrets a pod references
// (when it is first seen and when its spec changes), as upstream's pod
// manager registers a pod with its configMap and secret managers.
func (k *Kubelet) registerObjects(ctx context.Context, pod *corev1.Pod) {
	k.configMaps.register(ctx, pod.UID, pod.Namespace, podConfigMapNames(pod))
	k.secrets.register(ctx, pod.UID, pod.Namespace, podSecretNames(pod))
}

// unregisterObjects forgets a pod's references once the pod is gone.
func (k *Kubelet) unregisterObjects(uid types.UID) {
	k.configMaps.unregister(uid)
	k.secrets.unregister(uid)
}
