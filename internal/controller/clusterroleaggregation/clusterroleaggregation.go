// Package clusterroleaggregation is upstream's clusterrole-aggregation
// controller: a ClusterRole with an aggregationRule gets, as its rules, the
// rules of every ClusterRole its selectors match (in name order, each rule
// once), kept up to date as roles come and go. This is how admin, edit and
// view grow with the aggregate-to-* labelled roles of new APIs.
package clusterroleaggregation

import (
	"context"
	"fmt"
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Name is the controller's name in the manager's registry.
const Name = "clusterrole-aggregation"

// Controller aggregates ClusterRoles.
type Controller struct {
	client kubernetes.Interface
	lister rbaclisters.ClusterRoleLister
	synced []cache.InformerSynced
	queue  *worker.Queue[string]
}

// New builds the controller.
func New(ctx context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	inf := cc.Informers.Rbac().V1().ClusterRoles()
	c := &Controller{client: cc.Client, lister: inf.Lister(), synced: []cache.InformerSynced{inf.Informer().HasSynced}}
	c.queue = worker.NewQueue(Name, c.sync, worker.Options[string]{Workers: 1, Clock: cc.Clock})
	// Any change may change what an aggregated role matches: enqueue them all.
	enqueue := func(any) {
		roles, err := c.lister.List(labels.Everything())
		if err != nil {
			return
		}
		for _, r := range roles {
			if r.AggregationRule != nil {
				c.queue.Add(r.Name)
			}
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return nil, fmt.Errorf("clusterroleaggregation: handler: %w", err)
	}
	return c, nil
}

// Start runs the worker until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, c.synced, c.queue)
}

// Aggregate returns the rules an aggregated role gets from roles: those of
// each role (other than itself) matched by a selector, in name order, each
// distinct rule once.
func Aggregate(role *rbacv1.ClusterRole, roles []*rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	var sels []labels.Selector
	for i := range role.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&role.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			return nil, err
		}
		sels = append(sels, sel)
	}
	sorted := append([]*rbacv1.ClusterRole(nil), roles...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	rules := []rbacv1.PolicyRule{}
	for _, r := range sorted {
		if r.Name == role.Name {
			continue
		}
		matched := false
		for _, sel := range sels {
			if sel.Matches(labels.Set(r.Labels)) {
				matched = true
				break
			}
		}
		if !matched {
			continue
		}
		for _, rule := range r.Rules {
			seen := false
			for _, have := range rules {
				if equality.Semantic.DeepEqual(have, rule) {
					seen = true
					break
				}
			}
			if !seen {
				rules = append(rules, rule)
			}
		}
	}
	return rules, nil
}

func (c *Controller) sync(ctx context.Context, name string) error {
	role, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if role.AggregationRule == nil {
		return nil
	}
	all, err := c.lister.List(labels.Everything())
	if err != nil {
		return err
	}
	rules, err := Aggregate(role, all)
	if err != nil {
		return nil // an invalid selector is not retried
	}
	if len(rules) == len(role.Rules) && (len(rules) == 0 || equality.Semantic.DeepEqual(rules, role.Rules)) {
		return nil
	}
	next := role.DeepCopy()
	next.Rules = rules
	if _, err := c.client.RbacV1().ClusterRoles().Update(ctx, next, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update clusterrole %s: %w", name, err)
	}
	return nil
}
