package resourcequota

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/quota"
)

func TestSyncRecounts(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	q := func(s string) resource.Quantity { return resource.MustParse(s) }
	pod := func(name string, phase corev1.PodPhase, cpu string, deadline *int64) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Status: corev1.PodStatus{Phase: phase},
			Spec: corev1.PodSpec{ActiveDeadlineSeconds: deadline, Containers: []corev1.Container{{Name: "c"}}}}
		if cpu != "" {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: q(cpu)}
		}
		return p
	}
	deadline := int64(60)
	objs := []runtime.Object{
		pod("running", corev1.PodRunning, "250m", nil),
		pod("pending", corev1.PodPending, "", nil),
		pod("done", corev1.PodSucceeded, "1", nil), // terminal: counted by count/pods only
		pod("batch", corev1.PodRunning, "100m", &deadline),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "np", Namespace: "ns"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: "other"}},
	}
	tests := []struct {
		name   string
		hard   corev1.ResourceList
		scopes []corev1.ResourceQuotaScope
		want   corev1.ResourceList
	}{
		{"counts and requests", corev1.ResourceList{"pods": q("10"), "count/pods": q("10"), "requests.cpu": q("4"), "services.nodeports": q("5"), "secrets": q("3")},
			nil, corev1.ResourceList{"pods": q("3"), "count/pods": q("4"), "requests.cpu": q("350m"), "services.nodeports": q("1"), "secrets": q("0")}},
		{"Terminating scope", corev1.ResourceList{"pods": q("10")}, []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating}, corev1.ResourceList{"pods": q("1")}},
		{"BestEffort scope", corev1.ResourceList{"pods": q("10")}, []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}, corev1.ResourceList{"pods": q("1")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"}, Spec: corev1.ResourceQuotaSpec{Hard: tc.hard, Scopes: tc.scopes}}
			client := fake.NewClientset(append([]runtime.Object{rq}, objs...)...)
			inf := informers.NewSharedInformerFactory(client, 0)
			ctrl, err := New(context.Background(), controllercontext.Context{Client: client, Informers: inf, Clock: clocktesting.NewFakeClock(now)})
			if err != nil {
				t.Fatal(err)
			}
			_ = inf.Core().V1().ResourceQuotas().Informer().GetIndexer().Add(rq)
			for _, o := range objs {
				switch o := o.(type) {
				case *corev1.Pod:
					_ = inf.Core().V1().Pods().Informer().GetIndexer().Add(o)
				case *corev1.Service:
					_ = inf.Core().V1().Services().Informer().GetIndexer().Add(o)
				}
			}
			c := ctrl.(*Controller)
			c.count = func(context.Context, schema.GroupResource, string) (int64, error) { return 0, nil }
			if err := c.Sync(context.Background(), "ns/q"); err != nil {
				t.Fatal(err)
			}
			got, err := client.CoreV1().ResourceQuotas("ns").Get(context.Background(), "q", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !quota.Equals(tc.want, got.Status.Used) || !quota.Equals(tc.hard, got.Status.Hard) {
				t.Errorf("status used %v hard %v, want used %v hard %v", quota.String(got.Status.Used), quota.String(got.Status.Hard), quota.String(tc.want), quota.String(tc.hard))
			}
		})
	}
}
