package quota

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func rl(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func TestUsage(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	grace := int64(30)
	gone := metav1.NewTime(now.Add(-time.Minute))
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "2")}}},
		Containers: []corev1.Container{
			{Name: "a", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500m", "memory", "64Mi", "hugepages-2Mi", "2Mi", "example.com/gpu", "1"), Limits: rl("cpu", "1", "memory", "64Mi")}},
			{Name: "b", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500m")}},
		}}}
	stuck := pod.DeepCopy()
	stuck.DeletionTimestamp, stuck.DeletionGracePeriodSeconds = &gone, &grace
	class := "fast"
	tests := []struct {
		name string
		gr   schema.GroupResource
		obj  runtime.Object
		want corev1.ResourceList
	}{
		{"pod: the larger of init and regular containers", Pods, pod, rl("count/pods", "1", "pods", "1",
			"cpu", "2", "requests.cpu", "2", "limits.cpu", "1", "memory", "64Mi", "requests.memory", "64Mi", "limits.memory", "64Mi",
			"hugepages-2Mi", "2Mi", "requests.hugepages-2Mi", "2Mi", "requests.example.com/gpu", "1")},
		{"pod past its graceful deletion: the count only", Pods, stuck, rl("count/pods", "1")},
		{"load balancer", Services, &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 1}, {Port: 2}}}},
			rl("count/services", "1", "services", "1", "services.loadbalancers", "1", "services.nodeports", "2")},
		{"claim with a class", PersistentVolumeClaims, &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class,
			Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", "1500m")}}},
			rl("count/persistentvolumeclaims", "1", "persistentvolumeclaims", "1", "requests.storage", "2",
				"fast.storageclass.storage.k8s.io/persistentvolumeclaims", "1", "fast.storageclass.storage.k8s.io/requests.storage", "2")},
		{"secret", schema.GroupResource{Resource: "secrets"}, &corev1.Secret{}, rl("count/secrets", "1", "secrets", "1")},
		{"deployment", schema.GroupResource{Group: "apps", Resource: "deployments"}, &corev1.Secret{}, rl("count/deployments.apps", "1")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Usage(tc.gr, tc.obj, now)
			if !Equals(tc.want, got) {
				t.Errorf("usage %s, want %s", String(got), String(tc.want))
			}
		})
	}
}

func TestMatches(t *testing.T) {
	besteffort := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}, PriorityClassName: "high"}}
	quotaWith := func(hard corev1.ResourceList, scopes []corev1.ResourceQuotaScope, sel *corev1.ScopeSelector) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Scopes: scopes, ScopeSelector: sel}, Status: corev1.ResourceQuotaStatus{Hard: hard}}
	}
	tests := []struct {
		name string
		q    *corev1.ResourceQuota
		gr   schema.GroupResource
		obj  runtime.Object
		want bool
	}{
		{"unscoped pods quota", quotaWith(rl("pods", "1"), nil, nil), Pods, besteffort, true},
		{"a quota on other resources", quotaWith(rl("services", "1"), nil, nil), Pods, besteffort, false},
		{"BestEffort", quotaWith(rl("pods", "1"), []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}, nil), Pods, besteffort, true},
		{"NotBestEffort", quotaWith(rl("pods", "1"), []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotBestEffort}, nil), Pods, besteffort, false},
		{"PriorityClass In", quotaWith(rl("pods", "1"), nil, &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
			{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}}}}), Pods, besteffort, true},
		{"PriorityClass NotIn", quotaWith(rl("pods", "1"), nil, &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
			{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpNotIn, Values: []string{"high"}}}}), Pods, besteffort, false},
		{"a scoped quota never matches a configmap", quotaWith(rl("configmaps", "1"), []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}, nil),
			schema.GroupResource{Resource: "configmaps"}, &corev1.ConfigMap{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Matches(tc.q, tc.gr, tc.obj)
			if err != nil || got != tc.want {
				t.Errorf("Matches = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestConstraintsAndArithmetic(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "a", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}},
		{Name: "b"},
	}}}
	err := Constraints(Pods, []corev1.ResourceName{"requests.cpu", "limits.memory", "pods"}, pod)
	if want := "must specify limits.memory for: a,b; requests.cpu for: b"; err == nil || err.Error() != want {
		t.Errorf("Constraints = %v, want %q", err, want)
	}
	if diff := cmp.Diff("cpu=1500m,pods=3", String(Add(rl("pods", "1", "cpu", "1"), rl("pods", "2", "cpu", "500m")))); diff != "" {
		t.Errorf("Add (-want +got):\n%s", diff)
	}
	if got := String(SubtractNonNegative(rl("pods", "1", "cpu", "1"), rl("pods", "2", "cpu", "500m"))); got != "cpu=500m,pods=0" {
		t.Errorf("SubtractNonNegative = %s", got)
	}
	if ok, exceeded := LessThanOrEqual(rl("pods", "3", "cpu", "1"), rl("pods", "2")); ok || !cmp.Equal(exceeded, []corev1.ResourceName{"pods"}) {
		t.Errorf("LessThanOrEqual = %v %v", ok, exceeded)
	}
}
