package rbac

import (
	"context"
	"errors"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
)

// Source reads the RBAC objects; Get of a missing object is an error
// (apierrors NotFound).
type Source interface {
	GetRole(ctx context.Context, namespace, name string) (*rbacv1.Role, error)
	ListRoleBindings(ctx context.Context, namespace string) ([]*rbacv1.RoleBinding, error)
	GetClusterRole(ctx context.Context, name string) (*rbacv1.ClusterRole, error)
	ListClusterRoleBindings(ctx context.Context) ([]*rbacv1.ClusterRoleBinding, error)
}

// Authorizer is the RBAC authorization mode.
type Authorizer struct {
	src Source
}

// New returns the RBAC authorizer reading policy from src.
func New(src Source) *Authorizer { return &Authorizer{src: src} }

var (
	_ authz.Authorizer   = (*Authorizer)(nil)
	_ authz.RuleResolver = (*Authorizer)(nil)
)

// Visitor is called with each rule that applies to a user, with a
// description of the binding it comes from, or with an error met on the
// way (rule nil). Returning false stops the walk.
type Visitor func(source string, rule *rbacv1.PolicyRule, err error) bool

// VisitRules walks the rules that apply to user in namespace: those of the
// ClusterRoleBindings, then (namespace != "") those of the namespace's
// RoleBindings, in upstream's order.
func (a *Authorizer) VisitRules(ctx context.Context, user *authn.User, namespace string, visit Visitor) {
	crbs, err := a.src.ListClusterRoleBindings(ctx)
	if err != nil {
		if !visit("", nil, err) {
			return
		}
	}
	for _, b := range crbs {
		subject, ok := appliesToAny(user, b.Subjects, "")
		if !ok {
			continue
		}
		rules, err := a.RoleRefRules(ctx, b.RoleRef, "")
		if err != nil {
			if !visit("", nil, err) {
				return
			}
			continue
		}
		source := fmt.Sprintf("ClusterRoleBinding %q of %s %q to %s", b.Name, b.RoleRef.Kind, b.RoleRef.Name, describeSubject(subject, ""))
		for i := range rules {
			if !visit(source, &rules[i], nil) {
				return
			}
		}
	}
	if namespace == "" {
		return
	}
	rbs, err := a.src.ListRoleBindings(ctx, namespace)
	if err != nil {
		visit("", nil, err)
		return
	}
	for _, b := range rbs {
		subject, ok := appliesToAny(user, b.Subjects, namespace)
		if !ok {
			continue
		}
		rules, err := a.RoleRefRules(ctx, b.RoleRef, namespace)
		if err != nil {
			if !visit("", nil, err) {
				return
			}
			continue
		}
		source := fmt.Sprintf("RoleBinding %q of %s %q to %s", b.Name+"/"+b.Namespace, b.RoleRef.Kind, b.RoleRef.Name, describeSubject(subject, namespace))
		for i := range rules {
			if !visit(source, &rules[i], nil) {
				return
			}
		}
	}
}

// RoleRefRules returns the rules of the role a binding in namespace refers
// to ("" for a ClusterRoleBinding).
func (a *Authorizer) RoleRefRules(ctx context.Context, ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "Role":
		r, err := a.src.GetRole(ctx, namespace, ref.Name)
		if err != nil {
			return nil, listerError(err, "role", ref.Name)
		}
		return r.Rules, nil
	case "ClusterRole":
		r, err := a.src.GetClusterRole(ctx, ref.Name)
		if err != nil {
			return nil, listerError(err, "clusterrole", ref.Name)
		}
		return r.Rules, nil
	}
	return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
}

// listerError words a missing role as upstream's listers do
// (clusterrole.rbac.authorization.k8s.io "x" not found).
func listerError(err error, resource, name string) error {
	if apierrors.IsNotFound(err) {
		return apierrors.NewNotFound(schema.GroupResource{Group: rbacv1.GroupName, Resource: resource}, name)
	}
	return err
}

func describeSubject(s rbacv1.Subject, bindingNamespace string) string {
	if s.Kind == rbacv1.ServiceAccountKind {
		ns := s.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		return fmt.Sprintf("%s %q", s.Kind, s.Name+"/"+ns)
	}
	return fmt.Sprintf("%s %q", s.Kind, s.Name)
}

// Authorize allows a request some rule bound to the user permits, and has
// no opinion otherwise; the reason names the binding that allowed, or the
// errors met (e.g. a binding to a role that does not exist).
func (a *Authorizer) Authorize(ctx context.Context, attrs authz.Attributes) (authz.Decision, string, error) {
	var (
		allowed string
		errs    []error
	)
	a.VisitRules(ctx, attrs.User, attrs.Namespace, func(source string, rule *rbacv1.PolicyRule, err error) bool {
		if rule != nil && RuleAllows(attrs, rule) {
			allowed = "RBAC: allowed by " + source
			return false
		}
		if err != nil {
			errs = append(errs, err)
		}
		return true
	})
	if allowed != "" {
		return authz.Allow, allowed, nil
	}
	if len(errs) > 0 {
		return authz.NoOpinion, "RBAC: " + aggregate(errs), nil
	}
	return authz.NoOpinion, "", nil
}

// aggregate formats errors as upstream's utilerrors aggregate does.
func aggregate(errs []error) string {
	if len(errs) == 1 {
		return errs[0].Error()
	}
	seen := map[string]bool{}
	var msgs []string
	for _, e := range errs {
		if m := e.Error(); !seen[m] {
			seen[m] = true
			msgs = append(msgs, m)
		}
	}
	if len(msgs) == 1 {
		return msgs[0]
	}
	out := "["
	for i, m := range msgs {
		if i > 0 {
			out += ", "
		}
		out += m
	}
	return out + "]"
}

// RulesFor lists every rule that applies to user in namespace, and the
// errors met while collecting them (the rules are then incomplete).
func (a *Authorizer) RulesFor(ctx context.Context, user *authn.User, namespace string) ([]rbacv1.PolicyRule, bool, error) {
	var (
		rules []rbacv1.PolicyRule
		errs  []error
	)
	a.VisitRules(ctx, user, namespace, func(_ string, rule *rbacv1.PolicyRule, err error) bool {
		if rule != nil {
			rules = append(rules, *rule)
		}
		if err != nil {
			errs = append(errs, err)
		}
		return true
	})
	return rules, len(errs) > 0, errors.Join(errs...)
}
