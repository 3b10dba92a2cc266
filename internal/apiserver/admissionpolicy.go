package apiserver

import (
	"context"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/apiserver/admission"
	"github.com/skiff-sh/skiff/internal/apiserver/admission/policy"
)

// admissionPolicies are the ValidatingAdmissionPolicy and
// MutatingAdmissionPolicy plugins (admission/policy), fed by this server:
// its caches, scheme, authorizer, the resources it serves (param kinds,
// built-in and custom) and its server-side apply types (ApplyConfiguration
// mutations of built-in kinds).
func (r reader) admissionPolicies() []admission.Plugin {
	s := r.srv
	types := &builtinTypes{srv: s}
	d := policy.Deps{
		Reader:        r,
		Scheme:        s.codecs.scheme,
		Mapper:        policy.MapperFunc(s.resourceForKind),
		Authorizer:    s.authz,
		TypeConverter: types.converter,
	}
	return []admission.Plugin{policy.NewMutating(d), policy.NewValidating(d)}
}

// resourceForKind finds the resource serving a kind, built-in or custom.
func (s *Server) resourceForKind(gvk schema.GroupVersionKind) (policy.Mapping, bool) {
	find := func(hs map[schema.GroupVersionResource]*resourceHandler) (policy.Mapping, bool) {
		for gvr, h := range hs {
			if h.gvk == gvk && h.store != nil {
				return policy.Mapping{Resource: gvr, Namespaced: h.res.Namespaced, NewList: h.res.NewList}, true
			}
		}
		return policy.Mapping{}, false
	}
	if m, ok := find(s.handlers); ok {
		return m, true
	}
	if s.custom != nil {
		return find(*s.custom.handlers.Load())
	}
	return policy.Mapping{}, false
}

// builtinTypes are the type converters of server-side apply: the built-in
// one, built on first use (the server's OpenAPI exists only after New),
// and one per custom resource version.
type builtinTypes struct {
	srv  *Server
	once sync.Once
	tc   managedfields.TypeConverter

	mu     sync.Mutex
	custom map[string]managedfields.TypeConverter // by "<gvr>@<CRD resourceVersion>"
}

func (b *builtinTypes) init() {
	b.once.Do(func() {
		defs, err := b.srv.openapi.Definitions()
		if err == nil {
			b.tc, err = managedfields.NewTypeConverter(defs, false)
		}
		if err != nil {
			klog.Background().Error(err, "admission policies: no type converter for ApplyConfiguration mutations")
		}
	})
}

// converter is the type converter of a built-in or custom kind (nil for
// a kind not served).
func (b *builtinTypes) converter(gvk schema.GroupVersionKind) managedfields.TypeConverter {
	b.init()
	for _, h := range b.srv.handlers {
		if h.gvk == gvk {
			return b.tc
		}
	}
	if b.srv.custom == nil {
		return nil
	}
	for gvr, h := range *b.srv.custom.handlers.Load() {
		if h.gvk == gvk {
			return b.customConverter(gvr)
		}
	}
	return nil
}

// customConverter builds the type converter of a custom resource version
// from its CRD's schema (as its field manager does), kept while the CRD's
// resourceVersion stays.
func (b *builtinTypes) customConverter(gvr schema.GroupVersionResource) managedfields.TypeConverter {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := (reader{srv: b.srv}).Get(context.Background(), crdGVR, "", gvr.Resource+"."+gvr.Group, false, crd); err != nil {
		return nil
	}
	key := gvr.String() + "@" + crd.ResourceVersion
	b.mu.Lock()
	defer b.mu.Unlock()
	if tc, ok := b.custom[key]; ok {
		return tc
	}
	doc, err := builder.BuildOpenAPIV3(crd, gvr.Version, builder.Options{V2: false, StripValueValidation: true, StripNullable: true})
	if err != nil {
		return nil
	}
	models := map[string]*spec.Schema{}
	if doc.Components != nil {
		for k, v := range doc.Components.Schemas {
			models[k] = v
		}
	}
	tc, err := managedfields.NewTypeConverter(models, crd.Spec.PreserveUnknownFields)
	if err != nil {
		klog.Background().Error(err, "admission policies: no type converter", "resource", gvr)
		return nil
	}
	if b.custom == nil {
		b.custom = map[string]managedfields.TypeConverter{}
	}
	for k := range b.custom { // one entry per resource version
		if strings.HasPrefix(k, gvr.String()+"@") {
			delete(b.custom, k)
		}
	}
	b.custom[key] = tc
	return tc
}
