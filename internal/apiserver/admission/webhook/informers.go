package webhook

import (
	"context"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// newInformerFactory is a SharedInformerFactory whose informers of
// webhook configurations and namespaces (all the library asks of it) are
// fed by the server's own caches through lw, not by a client.
func newInformerFactory(lw func(gvr schema.GroupVersionResource) cache.ListerWatcher, get func(ctx context.Context, name string) (*corev1.Namespace, error)) informers.SharedInformerFactory {
	f := informers.NewSharedInformerFactory(namespaceClient{get: get}, 0)
	for _, t := range []struct {
		gvr schema.GroupVersionResource
		obj runtime.Object
	}{
		{MutatingGVR, &admissionregistrationv1.MutatingWebhookConfiguration{}},
		{ValidatingGVR, &admissionregistrationv1.ValidatingWebhookConfiguration{}},
		{NamespacesGVR, &corev1.Namespace{}},
	} {
		f.InformerFor(t.obj, func(kubernetes.Interface, time.Duration) cache.SharedIndexInformer {
			return cache.NewSharedIndexInformer(noWatchList{lw(t.gvr)}, t.obj, 0,
				cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		})
	}
	return f
}

// noWatchList tells client-go's reflector to list, then watch: the
// server's store does not stream a watch's initial events with the
// bookmark WatchList expects.
type noWatchList struct{ cache.ListerWatcher }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }
