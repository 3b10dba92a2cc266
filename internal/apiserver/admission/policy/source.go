package policy

import (
	"context"
	"fmt"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/client-go/informers"
)

// object is what policies and bindings are: API objects with metadata.
type object interface {
	runtime.Object
	GetName() string
	GetResourceVersion() string
}

// source lists the active policy-binding pairs of one policy kind on each
// request, from the server's cache: a change of a policy, binding or param
// applies to the next request (upstream refreshes every second). Compiled
// policies are kept while their resourceVersion stays.
type source[P, B object, E any] struct {
	deps Deps
	// compile compiles a policy's expressions (errors are kept in E).
	compile func(P) E
	// paramKind and policyName read the fields the source needs.
	paramKind  func(P) *admissionregistrationv1.ParamKind
	policyName func(B) string
	// list reads every policy and every binding.
	list func(ctx context.Context) ([]P, []B, error)

	mu       sync.Mutex
	compiled map[string]compiledPolicy[E]
}

type compiledPolicy[E any] struct {
	resourceVersion string
	evaluator       E
}

// hooks returns the policies that have at least one binding, compiled,
// with their bindings and their param lister.
func (s *source[P, B, E]) hooks(ctx context.Context) ([]generic.PolicyHook[P, B, E], error) {
	policies, bindings, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	if len(policies) == 0 || len(bindings) == 0 {
		return nil, nil
	}
	byPolicy := map[string][]B{}
	for _, b := range bindings {
		byPolicy[s.policyName(b)] = append(byPolicy[s.policyName(b)], b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.compiled == nil {
		s.compiled = map[string]compiledPolicy[E]{}
	}
	seen := map[string]bool{}
	var out []generic.PolicyHook[P, B, E]
	for _, p := range policies {
		seen[p.GetName()] = true
		bs := byPolicy[p.GetName()]
		if len(bs) == 0 {
			continue
		}
		c, ok := s.compiled[p.GetName()]
		if !ok || c.resourceVersion != p.GetResourceVersion() {
			c = compiledPolicy[E]{resourceVersion: p.GetResourceVersion(), evaluator: s.compile(p)}
			s.compiled[p.GetName()] = c
		}
		hook := generic.PolicyHook[P, B, E]{Policy: p, Bindings: bs, Evaluator: c.evaluator}
		if pk := s.paramKind(p); pk != nil {
			hook.ParamInformer, hook.ParamScope, hook.ConfigurationError = s.params(pk)
		}
		out = append(out, hook)
	}
	for name := range s.compiled {
		if !seen[name] {
			delete(s.compiled, name)
		}
	}
	return out, nil
}

// params finds where a policy's params are served.
func (s *source[P, B, E]) params(pk *admissionregistrationv1.ParamKind) (informers.GenericInformer, meta.RESTScope, error) {
	gv, err := schema.ParseGroupVersion(pk.APIVersion)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to parse paramKind APIVersion: %w", err)
	}
	gvk := gv.WithKind(pk.Kind)
	m, ok := s.deps.Mapper.ResourceFor(gvk)
	if !ok {
		return nil, nil, fmt.Errorf("failed to find resource referenced by paramKind: '%v'", gvk)
	}
	scope := meta.RESTScopeRoot
	if m.Namespaced {
		scope = meta.RESTScopeNamespace
	}
	return params{r: s.deps.Reader, mapping: m}, scope, nil
}
