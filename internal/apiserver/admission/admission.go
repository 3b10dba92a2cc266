// Package admission holds the API server's admission plugins and the chain
// that runs them. A plugin is a Mutator (it may change the object), a
// Validator (it may only refuse), or both. The chain runs every Mutator in
// upstream's plugin order, then every Validator in the same order
// (k8s.io/kubernetes pkg/kubeapiserver/options/plugins.go AllOrderedPlugins);
// the generic REST handler runs the mutating phase after the strategy's
// defaults and the validating phase after the strategy's validation, as
// upstream does, and both before the object is written.
//
// Plugins built in: NamespaceLifecycle, LimitRanger, ServiceAccount,
// NodeRestriction, Priority, PodSecurity, DefaultStorageClass,
// StorageObjectInUseProtection, RuntimeClass, CertificateApproval,
// CertificateSigning, CertificateSubjectRestriction, DefaultIngressClass,
// ResourceQuota. Adding one (a webhook ...) is: implement Mutator and/or
// Validator, add its name to Order if upstream orders it, and pass it to
// NewChain in internal/apiserver's wiring (admission.go).
package admission

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
)

// Operation is what a request does to an object.
type Operation string

// The operations admission sees, as upstream names them.
const (
	Create  Operation = "CREATE"
	Update  Operation = "UPDATE"
	Delete  Operation = "DELETE"
	Connect Operation = "CONNECT"
)

// Attributes describe one request being admitted.
type Attributes struct {
	Operation   Operation
	Resource    schema.GroupVersionResource
	Subresource string
	Kind        schema.GroupVersionKind
	// Namespace of the object; "" for a cluster-scoped one.
	Namespace string
	Name      string
	// Object is the object to be written (create, update); a Mutator may
	// change it in place. Nil on delete.
	Object runtime.Object
	// OldObject is the stored object (update, delete).
	OldObject runtime.Object
	DryRun    bool
	// User made the request (nil when unknown, e.g. in unit tests).
	User *authn.User

	// warnings for the client (Warning headers), added by Warn.
	warnings []string
}

// Warn adds a warning the client sees in a Warning header, whether the
// request is admitted or not (upstream's warning.AddWarning).
func (a *Attributes) Warn(msg string) { a.warnings = append(a.warnings, msg) }

// TakeWarnings returns the warnings added so far and forgets them.
func (a *Attributes) TakeWarnings() []string {
	w := a.warnings
	a.warnings = nil
	return w
}

// forbidden is upstream's admission.NewForbidden: a 403 on the request's
// resource and object name, unless err is a 403 already.
func forbidden(a *Attributes, err error) error {
	if apierrors.IsForbidden(err) {
		return err
	}
	return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, err)
}

// Plugin is one admission plugin. It implements Mutator, Validator or
// both; New functions have no side effects.
type Plugin interface {
	// Name is the plugin's upstream name, e.g. "NamespaceLifecycle".
	Name() string
	// Handles says whether the plugin acts on op at all.
	Handles(op Operation) bool
}

// Mutator is a plugin of the mutating phase: it may change a.Object, or
// refuse the request with an API error.
type Mutator interface {
	Plugin
	Admit(ctx context.Context, a *Attributes) error
}

// Validator is a plugin of the validating phase: it may only refuse.
type Validator interface {
	Plugin
	Validate(ctx context.Context, a *Attributes) error
}

// Order is upstream's plugin order (AllOrderedPlugins, v1.37), cut to the
// plugins Skiff has or expects. Webhooks, ResourceQuota and AlwaysDeny go
// last, as upstream requires.
func Order() []string {
	return []string{
		"AlwaysAdmit",
		"NamespaceLifecycle",
		"LimitRanger",
		"ServiceAccount",
		"NodeRestriction",
		"TaintNodesByCondition",
		"AlwaysPullImages",
		"PodSecurity",
		"Priority",
		"DefaultTolerationSeconds",
		"EventRateLimit",
		"DefaultStorageClass",
		"StorageObjectInUseProtection",
		"PersistentVolumeClaimResize",
		"RuntimeClass",
		"CertificateApproval",
		"CertificateSigning",
		"CertificateSubjectRestriction",
		"DefaultIngressClass",
		"PodResizeValidator",
		"MutatingAdmissionPolicy",
		"MutatingAdmissionWebhook",
		"ValidatingAdmissionPolicy",
		"ValidatingAdmissionWebhook",
		"ResourceQuota",
		"AlwaysDeny",
	}
}

// Chain runs plugins in upstream's order.
type Chain struct {
	mutators   []Mutator
	validators []Validator
}

// NewChain orders plugins as upstream does (Order). A plugin whose name is
// not in Order, or that is neither a Mutator nor a Validator, or that is
// given twice, is an error: its place in the chain must be decided.
func NewChain(plugins ...Plugin) (*Chain, error) {
	rank := map[string]int{}
	for i, n := range Order() {
		rank[n] = i
	}
	seen := map[string]bool{}
	for _, p := range plugins {
		if _, ok := rank[p.Name()]; !ok {
			return nil, fmt.Errorf("admission plugin %q has no place in the order; add it to admission.Order", p.Name())
		}
		if seen[p.Name()] {
			return nil, fmt.Errorf("admission plugin %q given twice", p.Name())
		}
		seen[p.Name()] = true
		_, m := p.(Mutator)
		_, v := p.(Validator)
		if !m && !v {
			return nil, fmt.Errorf("admission plugin %q neither mutates nor validates", p.Name())
		}
	}
	sorted := append([]Plugin(nil), plugins...)
	sort.SliceStable(sorted, func(i, j int) bool { return rank[sorted[i].Name()] < rank[sorted[j].Name()] })
	c := &Chain{}
	for _, p := range sorted {
		if m, ok := p.(Mutator); ok {
			c.mutators = append(c.mutators, m)
		}
		if v, ok := p.(Validator); ok {
			c.validators = append(c.validators, v)
		}
	}
	return c, nil
}

// Names lists the plugins of each phase in the order they run.
func (c *Chain) Names() (mutating, validating []string) {
	for _, m := range c.mutators {
		mutating = append(mutating, m.Name())
	}
	for _, v := range c.validators {
		validating = append(validating, v.Name())
	}
	return mutating, validating
}

// Admit runs the mutating phase: each Mutator that handles the operation,
// in order; the first error stops the chain.
func (c *Chain) Admit(ctx context.Context, a *Attributes) error {
	if c == nil {
		return nil
	}
	for _, m := range c.mutators {
		if !m.Handles(a.Operation) {
			continue
		}
		if err := m.Admit(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// Validate runs the validating phase, after Admit.
func (c *Chain) Validate(ctx context.Context, a *Attributes) error {
	if c == nil {
		return nil
	}
	for _, v := range c.validators {
		if !v.Handles(a.Operation) {
			continue
		}
		if err := v.Validate(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// Run runs both phases, mutating then validating.
func (c *Chain) Run(ctx context.Context, a *Attributes) error {
	if err := c.Admit(ctx, a); err != nil {
		return err
	}
	return c.Validate(ctx, a)
}
