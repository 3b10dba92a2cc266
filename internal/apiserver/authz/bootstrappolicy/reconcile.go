package bootstrappolicy

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/apiserver/authz/rbac"
)

// Reconcile writes the policy through client as upstream's API server does
// at start (rbac/bootstrap-roles): a missing object is created; an existing
// one gets the labels, annotations, rules (roles), aggregation selectors
// and subjects (bindings) it lacks, and keeps everything else; a binding
// whose roleRef differs is recreated. An object annotated
// rbac.authorization.kubernetes.io/autoupdate: "false" is left alone.
func Reconcile(ctx context.Context, client kubernetes.Interface, p *Policy) error {
	logger := klog.FromContext(ctx)
	var errs []error
	for i := range p.ClusterRoles {
		exp := &p.ClusterRoles[i]
		api := client.RbacV1().ClusterRoles()
		cur, err := api.Get(ctx, exp.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.Create(ctx, exp, metav1.CreateOptions{})
		case err == nil:
			if next, changed := ReconcileClusterRole(exp, cur); changed {
				logger.V(2).Info("Updating bootstrap cluster role", "name", exp.Name)
				_, err = api.Update(ctx, next, metav1.UpdateOptions{})
			}
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("clusterrole %s: %w", exp.Name, err))
		}
	}
	for i := range p.ClusterRoleBindings {
		exp := &p.ClusterRoleBindings[i]
		api := client.RbacV1().ClusterRoleBindings()
		cur, err := api.Get(ctx, exp.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.Create(ctx, exp, metav1.CreateOptions{})
		case err == nil:
			next, changed, recreate := reconcileBinding(exp.ObjectMeta, exp.RoleRef, exp.Subjects, cur.ObjectMeta, cur.RoleRef, cur.Subjects)
			switch {
			case recreate:
				if err = api.Delete(ctx, cur.Name, metav1.DeleteOptions{}); err == nil {
					b := cur.DeepCopy()
					b.ObjectMeta, b.RoleRef, b.Subjects = cleanMeta(next.meta), exp.RoleRef, next.subjects
					_, err = api.Create(ctx, b, metav1.CreateOptions{})
				}
			case changed:
				b := cur.DeepCopy()
				b.ObjectMeta, b.Subjects = next.meta, next.subjects
				_, err = api.Update(ctx, b, metav1.UpdateOptions{})
			}
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("clusterrolebinding %s: %w", exp.Name, err))
		}
	}
	for i := range p.Roles {
		exp := &p.Roles[i]
		if err := ensureNamespace(ctx, client, exp.Namespace); err != nil {
			errs = append(errs, err)
			continue
		}
		api := client.RbacV1().Roles(exp.Namespace)
		cur, err := api.Get(ctx, exp.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.Create(ctx, exp, metav1.CreateOptions{})
		case err == nil:
			if next, changed := ReconcileRole(exp, cur); changed {
				_, err = api.Update(ctx, next, metav1.UpdateOptions{})
			}
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("role %s/%s: %w", exp.Namespace, exp.Name, err))
		}
	}
	for i := range p.RoleBindings {
		exp := &p.RoleBindings[i]
		if err := ensureNamespace(ctx, client, exp.Namespace); err != nil {
			errs = append(errs, err)
			continue
		}
		api := client.RbacV1().RoleBindings(exp.Namespace)
		cur, err := api.Get(ctx, exp.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.Create(ctx, exp, metav1.CreateOptions{})
		case err == nil:
			next, changed, recreate := reconcileBinding(exp.ObjectMeta, exp.RoleRef, exp.Subjects, cur.ObjectMeta, cur.RoleRef, cur.Subjects)
			switch {
			case recreate:
				if err = api.Delete(ctx, cur.Name, metav1.DeleteOptions{}); err == nil {
					b := cur.DeepCopy()
					b.ObjectMeta, b.RoleRef, b.Subjects = cleanMeta(next.meta), exp.RoleRef, next.subjects
					_, err = api.Create(ctx, b, metav1.CreateOptions{})
				}
			case changed:
				b := cur.DeepCopy()
				b.ObjectMeta, b.Subjects = next.meta, next.subjects
				_, err = api.Update(ctx, b, metav1.UpdateOptions{})
			}
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("rolebinding %s/%s: %w", exp.Namespace, exp.Name, err))
		}
	}
	return errors.Join(errs...)
}

func ensureNamespace(ctx context.Context, client kubernetes.Interface, name string) error {
	_, err := client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	return nil
}

func cleanMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: m.Labels, Annotations: m.Annotations}
}

func protected(m metav1.ObjectMeta) bool { return m.Annotations[AutoUpdateAnnotation] == "false" }

// merge returns cur with the keys of exp it lacks.
func merge(exp, cur map[string]string) map[string]string {
	if len(exp) == 0 {
		return cur
	}
	out := make(map[string]string, len(exp)+len(cur))
	for k, v := range exp {
		out[k] = v
	}
	for k, v := range cur {
		out[k] = v
	}
	return out
}

// reconcileMetaRules merges labels and annotations and adds the expected
// rules the current ones do not cover. It reports whether anything changed.
func reconcileMetaRules(expMeta metav1.ObjectMeta, expRules []rbacv1.PolicyRule, meta *metav1.ObjectMeta, rules *[]rbacv1.PolicyRule) bool {
	changed := false
	if l := merge(expMeta.Labels, meta.Labels); !reflect.DeepEqual(l, meta.Labels) {
		meta.Labels, changed = l, true
	}
	if a := merge(expMeta.Annotations, meta.Annotations); !reflect.DeepEqual(a, meta.Annotations) {
		meta.Annotations, changed = a, true
	}
	if _, missing := rbac.Covers(*rules, expRules); len(missing) > 0 {
		*rules, changed = append(*rules, missing...), true
	}
	return changed
}

// ReconcileClusterRole returns cur reconciled with exp, and whether it
// needs writing (never for a protected role).
func ReconcileClusterRole(exp, cur *rbacv1.ClusterRole) (*rbacv1.ClusterRole, bool) {
	if protected(cur.ObjectMeta) {
		return cur, false
	}
	next := cur.DeepCopy()
	changed := false
	if exp.AggregationRule != nil {
		// An aggregated role's rules belong to the aggregation controller;
		// only its selectors are reconciled.
		if next.AggregationRule == nil {
			next.AggregationRule, changed = &rbacv1.AggregationRule{}, true
		}
		for _, sel := range exp.AggregationRule.ClusterRoleSelectors {
			found := false
			for _, have := range next.AggregationRule.ClusterRoleSelectors {
				if reflect.DeepEqual(sel, have) {
					found = true
					break
				}
			}
			if !found {
				next.AggregationRule.ClusterRoleSelectors = append(next.AggregationRule.ClusterRoleSelectors, sel)
				changed = true
			}
		}
	}
	if reconcileMetaRules(exp.ObjectMeta, exp.Rules, &next.ObjectMeta, &next.Rules) {
		changed = true
	}
	return next, changed
}

// ReconcileRole returns cur reconciled with exp, and whether it needs
// writing.
func ReconcileRole(exp, cur *rbacv1.Role) (*rbacv1.Role, bool) {
	if protected(cur.ObjectMeta) {
		return cur, false
	}
	next := cur.DeepCopy()
	return next, reconcileMetaRules(exp.ObjectMeta, exp.Rules, &next.ObjectMeta, &next.Rules)
}

type reconciledBinding struct {
	meta     metav1.ObjectMeta
	subjects []rbacv1.Subject
}

// reconcileBinding merges labels, annotations and subjects; recreate says
// the roleRef (immutable) differs.
func reconcileBinding(expMeta metav1.ObjectMeta, expRef rbacv1.RoleRef, expSubjects []rbacv1.Subject, meta metav1.ObjectMeta, ref rbacv1.RoleRef, subjects []rbacv1.Subject) (next reconciledBinding, changed, recreate bool) {
	if protected(meta) {
		return reconciledBinding{meta, subjects}, false, false
	}
	next = reconciledBinding{meta: *meta.DeepCopy(), subjects: append([]rbacv1.Subject(nil), subjects...)}
	if l := merge(expMeta.Labels, meta.Labels); !reflect.DeepEqual(l, meta.Labels) {
		next.meta.Labels, changed = l, true
	}
	if a := merge(expMeta.Annotations, meta.Annotations); !reflect.DeepEqual(a, meta.Annotations) {
		next.meta.Annotations, changed = a, true
	}
	for _, s := range expSubjects {
		found := false
		for _, have := range subjects {
			if have.Kind == s.Kind && have.Name == s.Name && have.Namespace == s.Namespace {
				found = true
				break
			}
		}
		if !found {
			next.subjects, changed = append(next.subjects, s), true
		}
	}
	return next, changed, expRef != ref
}
