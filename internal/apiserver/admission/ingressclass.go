package admission

import (
	"context"
	"sort"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

var ingressClassesGVR = networkingv1.SchemeGroupVersion.WithResource("ingressclasses")

// DefaultIngressClass gives a new Ingress that names no class (neither
// spec.ingressClassName nor the kubernetes.io/ingress.class annotation)
// the default IngressClass (annotated
// ingressclass.kubernetes.io/is-default-class; the newest when several
// are), as upstream's plugin of that name does.
type DefaultIngressClass struct{ r registry.Reader }

var _ Mutator = DefaultIngressClass{}

// NewDefaultIngressClass reads IngressClasses through r.
func NewDefaultIngressClass(r registry.Reader) DefaultIngressClass { return DefaultIngressClass{r: r} }

// Name is the upstream name.
func (DefaultIngressClass) Name() string { return "DefaultIngressClass" }

// Handles creates.
func (DefaultIngressClass) Handles(op Operation) bool { return op == Create }

// Admit sets spec.ingressClassName.
func (d DefaultIngressClass) Admit(ctx context.Context, a *Attributes) error {
	ing, ok := a.Object.(*networkingv1.Ingress)
	if !ok || a.Subresource != "" || ing.Spec.IngressClassName != nil {
		return nil
	}
	if _, ok := ing.Annotations["kubernetes.io/ingress.class"]; ok {
		return nil
	}
	list := &networkingv1.IngressClassList{}
	if err := d.r.List(ctx, ingressClassesGVR, "", false, list); err != nil {
		return forbidden(a, err)
	}
	var defaults []*networkingv1.IngressClass
	for i := range list.Items {
		if list.Items[i].Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true" {
			defaults = append(defaults, &list.Items[i])
		}
	}
	if len(defaults) == 0 {
		return nil
	}
	sort.Slice(defaults, func(i, j int) bool {
		ti, tj := defaults[i].CreationTimestamp, defaults[j].CreationTimestamp
		if ti.Equal(&tj) {
			return defaults[i].Name < defaults[j].Name
		}
		return ti.After(tj.Time)
	})
	name := defaults[0].Name
	ing.Spec.IngressClassName = &name
	return nil
}
