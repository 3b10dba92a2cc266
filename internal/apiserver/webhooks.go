package apiserver

import (
	"context"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/apiserver/admission"
	"github.com/skiff-sh/skiff/internal/apiserver/admission/webhook"
	"github.com/skiff-sh/skiff/internal/apiserver/servicerouting"
	"github.com/skiff-sh/skiff/internal/storage"
)

// webhookAdmission builds the MutatingAdmissionWebhook and
// ValidatingAdmissionWebhook plugins (admission/webhook) over the
// server: webhook configurations and namespaces from the watch caches,
// service references resolved through EndpointSlices, the scheme and the
// served versions for matchPolicy Equivalent.
func (s *Server) webhookAdmission() ([]admission.Plugin, error) {
	// Each plugin's WebhookAdmissionConfiguration from
	// --admission-control-config-file (admissionconfig.go).
	mcfg, err := admissionPluginConfig(reader{srv: s}, "MutatingAdmissionWebhook")
	if err != nil {
		return nil, err
	}
	vcfg, err := admissionPluginConfig(reader{srv: s}, "ValidatingAdmissionWebhook")
	if err != nil {
		return nil, err
	}
	m, v, err := webhook.New(webhook.Options{
		MutatingConfig:   mcfg,
		ValidatingConfig: vcfg,
		ListWatch:        s.cacheListWatch,
		GetNamespace: func(ctx context.Context, name string) (*corev1.Namespace, error) {
			ns := &corev1.Namespace{}
			return ns, reader{srv: s}.Get(ctx, webhook.NamespacesGVR, "", name, true, ns)
		},
		Objects:         webhook.Objects{Scheme: s.codecs.scheme, Convert: s.convertVersion, Mapper: equivalentResources{s}},
		ServiceResolver: servicerouting.New(reader{srv: s}),
		Authorizer:      s.authz,
		Stop:            s.stopping,
	})
	if err != nil {
		return nil, err
	}
	// apiserver_admission_webhook_* on /metrics (a fresh registry each
	// server: registered once).
	if err := s.cfg.Registry.Register(webhook.Metrics()); err != nil {
		return nil, fmt.Errorf("webhook metrics: %w", err)
	}
	return []admission.Plugin{m, v}, nil
}

// cacheListWatch lists and watches a built-in resource from its watch
// cache, for an informer inside the server.
func (s *Server) cacheListWatch(gvr schema.GroupVersionResource) cache.ListerWatcher {
	handler := func() (*resourceHandler, error) {
		h := s.handlers[gvr]
		if h == nil || h.store == nil {
			return nil, fmt.Errorf("%v is not served", gvr)
		}
		return h, nil
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			h, err := handler()
			if err != nil {
				return nil, err
			}
			list := h.res.NewList()
			if err := h.store.List(ctx, h.prefix(), storage.ListOptions{ResourceVersion: "0"}, list); err != nil {
				return nil, h.apiErr(err, "")
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			h, err := handler()
			if err != nil {
				return nil, err
			}
			w, err := h.store.Watch(ctx, h.prefix(), storage.ListOptions{ResourceVersion: opts.ResourceVersion, Recursive: true, AllowWatchBookmarks: opts.AllowWatchBookmarks})
			if err != nil {
				return nil, h.apiErr(err, "")
			}
			return w, nil
		},
	}
}

// servedHandlers are the handlers of every served resource version,
// built-in and custom.
func (s *Server) servedHandlers() []*resourceHandler {
	out := make([]*resourceHandler, 0, len(s.handlers))
	for _, h := range s.handlers {
		out = append(out, h)
	}
	if s.custom != nil {
		for _, h := range *s.custom.handlers.Load() {
			out = append(out, h)
		}
	}
	return out
}

// handlerForKind finds the handler serving a kind (its main resource).
func (s *Server) handlerForKind(gvk schema.GroupVersionKind) *resourceHandler {
	for _, h := range s.servedHandlers() {
		if h.gvk == gvk {
			return h
		}
	}
	return nil
}

// convertVersion converts an object to another served version of its
// resource: a custom resource through its CRD's conversion, a built-in
// through the version both are stored as (registry.StoredVersion).
func (s *Server) convertVersion(obj runtime.Object, to schema.GroupVersionKind) (runtime.Object, error) {
	var from schema.GroupVersionKind
	if u, ok := obj.(*unstructured.Unstructured); ok {
		from = u.GroupVersionKind()
	} else if kinds, _, err := s.codecs.scheme.ObjectKinds(obj); err == nil {
		from = kinds[0]
	}
	hf, ht := s.handlerForKind(from), s.handlerForKind(to)
	if hf == nil || ht == nil {
		return nil, fmt.Errorf("no conversion from %v to %v: not served", from, to)
	}
	if ht.res.Custom != nil {
		if ht.res.Custom.Convert == nil {
			u := obj.(*unstructured.Unstructured).DeepCopy()
			u.SetAPIVersion(to.GroupVersion().String())
			return u, nil
		}
		return ht.res.Custom.Convert(obj, to.GroupVersion())
	}
	stored := obj
	if st := hf.res.Stored; st != nil {
		var err error
		if stored, err = st.ToStored(obj); err != nil {
			return nil, err
		}
	}
	if st := ht.res.Stored; st != nil {
		if stored == obj { // FromStored may take over its memory
			stored = obj.DeepCopyObject()
		}
		out := ht.res.New()
		if err := st.FromStored(stored, out); err != nil {
			return nil, err
		}
		return out, nil
	}
	if reflect.TypeOf(ht.res.New()) == reflect.TypeOf(stored) {
		return stored, nil
	}
	return nil, fmt.Errorf("no conversion from %v to %v", from, to)
}

// equivalentResources answers matchPolicy Equivalent: the served
// versions of the same group and resource (Skiff serves no resource
// under two names, as upstream's extensions/apps pairs).
type equivalentResources struct{ s *Server }

func (e equivalentResources) EquivalentResourcesFor(gvr schema.GroupVersionResource, sub string) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	for _, h := range e.s.servedHandlers() {
		g := h.res.GroupVersion.WithResource(h.res.Resource)
		if g.GroupResource() != gvr.GroupResource() {
			continue
		}
		if _, ok := h.res.Subresources[sub]; sub != "" && !ok {
			continue
		}
		out = append(out, g)
	}
	return out
}

func (e equivalentResources) KindFor(gvr schema.GroupVersionResource, sub string) schema.GroupVersionKind {
	h := e.s.handlerFor(gvr)
	if h == nil {
		return schema.GroupVersionKind{}
	}
	if sr, ok := h.res.Subresources[sub]; ok && sub != "" && !sr.Kind.Empty() {
		k := sr.Kind
		if k.Version == "" {
			k.Group, k.Version = h.res.GroupVersion.Group, h.res.GroupVersion.Version
		}
		return k
	}
	return h.gvk
}
