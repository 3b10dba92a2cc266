package clusterroleaggregation

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
)

func role(name string, lbls map[string]string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}, Rules: rules}
}

var (
	readPods  = rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	readCRDs  = rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}
	writePods = rbacv1.PolicyRule{Verbs: []string{"create"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	toView    = map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}
)

func viewRole(rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	r := role("view", nil, rules...)
	r.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: toView}}}
	return r
}

func TestAggregate(t *testing.T) {
	tests := []struct {
		name  string
		roles []*rbacv1.ClusterRole
		want  []rbacv1.PolicyRule
	}{
		{name: "nothing matches", roles: []*rbacv1.ClusterRole{role("a", nil, readPods)}, want: []rbacv1.PolicyRule{}},
		{name: "name order, each rule once", roles: []*rbacv1.ClusterRole{
			role("z-crd", toView, readCRDs, readPods), role("a-core", toView, readPods), role("unlabelled", nil, writePods)},
			want: []rbacv1.PolicyRule{readPods, readCRDs}},
		{name: "itself excluded", roles: []*rbacv1.ClusterRole{func() *rbacv1.ClusterRole { r := viewRole(writePods); r.Labels = toView; return r }()},
			want: []rbacv1.PolicyRule{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Aggregate(viewRole(), tc.roles)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("rules (-want +got):\n%s", d)
			}
		})
	}
}

func TestSync(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs := fake.NewClientset(viewRole(writePods), role("pods-view", toView, readPods))
	f := informers.NewSharedInformerFactory(cs, 0)
	ctrl, err := New(ctx, controllercontext.Context{Client: cs, Informers: f, Clock: clocktesting.NewFakeClock(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	if err := ctrl.(*Controller).sync(ctx, "view"); err != nil {
		t.Fatal(err)
	}
	got, err := cs.RbacV1().ClusterRoles().Get(ctx, "view", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]rbacv1.PolicyRule{readPods}, got.Rules); d != "" {
		t.Errorf("view rules (-want +got):\n%s", d)
	}
}
