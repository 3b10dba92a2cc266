package apiserver

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/apiserver/admission"
	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// newAdmission builds the admission chain: the built-in plugins, in
// upstream's order. Webhooks and the other plugins are appended here.
func newAdmission(r registry.Reader, c clock.PassiveClock) (*admission.Chain, error) {
	chain, err := admission.NewChain(
		admission.NewNamespaceLifecycle(r, c),
		admission.NewServiceAccount(),
		admission.NewNodeRestriction(),
		admission.NewPriority(r),
	)
	if err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	return chain, nil
}

// admit runs both admission phases for one write of this resource: obj is
// the object to write (nil on delete), old the stored one (nil on
// create).
func (h *resourceHandler) admit(ctx context.Context, op admission.Operation, obj, old runtime.Object, info RequestInfo, dry bool) error {
	a := &admission.Attributes{
		Operation:   op,
		Resource:    h.res.GroupVersion.WithResource(h.res.Resource),
		Subresource: info.Subresource,
		Kind:        h.gvk,
		Namespace:   info.Namespace,
		Name:        info.Name,
		Object:      obj,
		OldObject:   old,
		DryRun:      dry,
	}
	for _, o := range []runtime.Object{obj, old} {
		if m, err := meta.Accessor(o); o != nil && err == nil {
			a.Namespace, a.Name = m.GetNamespace(), m.GetName()
			break
		}
	}
	if u, ok := authn.UserFrom(ctx); ok {
		a.User = u
	}
	return h.srv.admission.Run(ctx, a)
}
