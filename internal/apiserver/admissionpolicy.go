package apiserver

import (
	"sync"

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

// builtinTypes is the type converter of server-side apply, built on first
// use (the server's OpenAPI exists only after New).
type builtinTypes struct {
	srv  *Server
	once sync.Once
	tc   managedfields.TypeConverter
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

// converter is the type converter of a built-in kind (nil for others).
func (b *builtinTypes) converter(gvk schema.GroupVersionKind) managedfields.TypeConverter {
	b.init()
	for _, h := range b.srv.handlers {
		if h.gvk == gvk {
			return b.tc
		}
	}
	return nil
}
