package admission

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apitypes "k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/quota"
)

// quotaStore is a QuotaStatusWriter over the objects reader, with
// compare-and-swap on resourceVersion; conflicts makes the next n writes
// fail as if another writer had won.
type quotaStore struct {
	o         *objects
	conflicts int
	writes    int
}

func (s *quotaStore) UpdateQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) error {
	for i, obj := range s.o.byGVR[resourceQuotasGVR] {
		cur := obj.(*corev1.ResourceQuota)
		if cur.Namespace != q.Namespace || cur.Name != q.Name {
			continue
		}
		if s.conflicts > 0 || cur.ResourceVersion != q.ResourceVersion {
			if s.conflicts > 0 {
				s.conflicts--
				rv, _ := strconv.Atoi(cur.ResourceVersion)
				cur.ResourceVersion = strconv.Itoa(rv + 1)
			}
			return apierrors.NewConflict(resourceQuotasGVR.GroupResource(), q.Name, nil)
		}
		next := cur.DeepCopy()
		next.Status = q.Status
		rv, _ := strconv.Atoi(cur.ResourceVersion)
		next.ResourceVersion = strconv.Itoa(rv + 1)
		s.o.byGVR[resourceQuotasGVR][i] = next
		*q = *next.DeepCopy()
		s.writes++
		return nil
	}
	return apierrors.NewNotFound(resourceQuotasGVR.GroupResource(), q.Name)
}

func (s *quotaStore) used(name string) corev1.ResourceList {
	for _, obj := range s.o.byGVR[resourceQuotasGVR] {
		if q := obj.(*corev1.ResourceQuota); q.Name == name {
			return q.Status.Used
		}
	}
	return nil
}

func measuredQuota(name string, hard, used corev1.ResourceList, scopes ...corev1.ResourceQuotaScope) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: "5", UID: apitypes.UID("u-" + name)},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard, Scopes: scopes},
		Status:     corev1.ResourceQuotaStatus{Hard: hard, Used: used},
	}
}

func TestResourceQuota(t *testing.T) {
	rl := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = q(kv[i+1])
		}
		return l
	}
	cpuPod := func(name, cpu string) *corev1.Pod {
		return podWith(name, corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q(cpu)}, Limits: corev1.ResourceList{corev1.ResourceCPU: q(cpu)}})
	}
	tests := []struct {
		name     string
		quotas   []*corev1.ResourceQuota
		gvr      schema.GroupVersionResource
		obj      any
		wantErr  string
		wantUsed map[string]corev1.ResourceList
	}{
		{
			name:   "pod within the count",
			quotas: []*corev1.ResourceQuota{measuredQuota("pods", rl("pods", "2"), rl("pods", "1"))},
			gvr:    podsRes, obj: podWith("p", corev1.ResourceRequirements{}),
			wantUsed: map[string]corev1.ResourceList{"pods": rl("pods", "2")},
		},
		{
			name:   "third pod over a quota of two",
			quotas: []*corev1.ResourceQuota{measuredQuota("pods", rl("pods", "2"), rl("pods", "2"))},
			gvr:    podsRes, obj: podWith("p", corev1.ResourceRequirements{}),
			wantErr: `pods "p" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=2, limited: pods=2`,
		},
		{
			name:   "cpu requests add up",
			quotas: []*corev1.ResourceQuota{measuredQuota("compute", rl("requests.cpu", "1", "limits.cpu", "2"), rl("requests.cpu", "500m", "limits.cpu", "500m"))},
			gvr:    podsRes, obj: cpuPod("p", "300m"),
			wantUsed: map[string]corev1.ResourceList{"compute": rl("requests.cpu", "800m", "limits.cpu", "800m")},
		},
		{
			name:   "cpu over",
			quotas: []*corev1.ResourceQuota{measuredQuota("compute", rl("requests.cpu", "1", "limits.cpu", "2"), rl("requests.cpu", "900m", "limits.cpu", "900m"))},
			gvr:    podsRes, obj: cpuPod("p", "300m"),
			wantErr: `pods "p" is forbidden: exceeded quota: compute, requested: requests.cpu=300m, used: requests.cpu=900m, limited: requests.cpu=1`,
		},
		{
			name:   "a pod without the requests a quota limits",
			quotas: []*corev1.ResourceQuota{measuredQuota("compute", rl("requests.cpu", "1", "limits.memory", "1Gi"), rl("requests.cpu", "0", "limits.memory", "0"))},
			gvr:    podsRes, obj: podWith("p", corev1.ResourceRequirements{}),
			wantErr: `pods "p" is forbidden: failed quota: compute: must specify limits.memory for: a; requests.cpu for: a`,
		},
		{
			name:   "a quota not measured yet",
			quotas: []*corev1.ResourceQuota{measuredQuota("pods", rl("pods", "2"), nil)},
			gvr:    podsRes, obj: podWith("p", corev1.ResourceRequirements{}),
			wantErr: `pods "p" is forbidden: status unknown for quota: pods, resources: pods`,
		},
		{
			name: "BestEffort scope skips a pod with requests",
			quotas: []*corev1.ResourceQuota{
				measuredQuota("besteffort", rl("pods", "0"), rl("pods", "0"), corev1.ResourceQuotaScopeBestEffort),
			},
			gvr: podsRes, obj: cpuPod("p", "100m"),
		},
		{
			name: "BestEffort scope counts a pod without",
			quotas: []*corev1.ResourceQuota{
				measuredQuota("besteffort", rl("pods", "0"), rl("pods", "0"), corev1.ResourceQuotaScopeBestEffort),
			},
			gvr: podsRes, obj: podWith("p", corev1.ResourceRequirements{}),
			wantErr: `pods "p" is forbidden: exceeded quota: besteffort, requested: pods=1, used: pods=0, limited: pods=0`,
		},
		{
			name:   "object count of configmaps",
			quotas: []*corev1.ResourceQuota{measuredQuota("cm", rl("count/configmaps", "1", "configmaps", "5"), rl("count/configmaps", "1", "configmaps", "1"))},
			gvr:    corev1.SchemeGroupVersion.WithResource("configmaps"), obj: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}},
			wantErr: `configmaps "c" is forbidden: exceeded quota: cm, requested: count/configmaps=1, used: count/configmaps=1, limited: count/configmaps=1`,
		},
		{
			name:   "node ports of a service",
			quotas: []*corev1.ResourceQuota{measuredQuota("svc", rl("services.nodeports", "1", "services", "10"), rl("services.nodeports", "0", "services", "0"))},
			gvr:    corev1.SchemeGroupVersion.WithResource("services"),
			obj: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80}, {Port: 81}}}},
			wantErr: `services "s" is forbidden: exceeded quota: svc, requested: services.nodeports=2, used: services.nodeports=0, limited: services.nodeports=1`,
		},
		{
			name:   "claim storage per class",
			quotas: []*corev1.ResourceQuota{measuredQuota("st", rl("fast.storageclass.storage.k8s.io/requests.storage", "10Gi"), rl("fast.storageclass.storage.k8s.io/requests.storage", "4Gi"))},
			gvr:    pvcsRes,
			obj: &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: ptrTo("fast"), Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q("5Gi")}}}},
			wantUsed: map[string]corev1.ResourceList{"st": rl("fast.storageclass.storage.k8s.io/requests.storage", "9Gi")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := newObjects(resourceQuotasGVR)
			for _, qq := range tc.quotas {
				o.with(resourceQuotasGVR, qq)
			}
			store := &quotaStore{o: o}
			p := NewResourceQuota(o, store, clocktesting.NewFakePassiveClock(time.Now()))
			a := &Attributes{Operation: Create, Resource: tc.gvr, Namespace: "ns"}
			switch obj := tc.obj.(type) {
			case *corev1.Pod:
				a.Object, a.Name = obj, obj.Name
			case *corev1.ConfigMap:
				a.Object, a.Name = obj, obj.Name
			case *corev1.Service:
				a.Object, a.Name = obj, obj.Name
			case *corev1.PersistentVolumeClaim:
				a.Object, a.Name = obj, obj.Name
			}
			got := ""
			if err := p.Validate(context.Background(), a); err != nil {
				got = err.Error()
				if !apierrors.IsForbidden(err) {
					t.Errorf("not a 403: %v", err)
				}
			}
			if diff := cmp.Diff(tc.wantErr, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			for name, want := range tc.wantUsed {
				if !quota.Equals(want, store.used(name)) {
					t.Errorf("quota %s used %v, want %v", name, store.used(name), want)
				}
			}
			if tc.wantErr != "" && store.writes != 0 {
				t.Errorf("a refused request wrote %d quota statuses", store.writes)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestResourceQuotaConflict: a charge that loses a race with another
// writer reads the quota again and charges the new usage once.
func TestResourceQuotaConflict(t *testing.T) {
	o := newObjects(resourceQuotasGVR, measuredQuota("pods", corev1.ResourceList{"pods": q("5")}, corev1.ResourceList{"pods": q("1")}))
	store := &quotaStore{o: o, conflicts: 2}
	p := NewResourceQuota(o, store, clocktesting.NewFakePassiveClock(time.Now()))
	for i, name := range []string{"a", "b"} {
		a := &Attributes{Operation: Create, Resource: podsRes, Namespace: "ns", Name: name, Object: podWith(name, corev1.ResourceRequirements{})}
		if err := p.Validate(context.Background(), a); err != nil {
			t.Fatalf("pod %s: %v", name, err)
		}
		if got, want := store.used("pods")["pods"], q(strconv.Itoa(2+i)); got.Cmp(want) != 0 {
			t.Errorf("after pod %s: used pods=%s, want %s", name, got.String(), want.String())
		}
	}
	// A dry run checks but charges nothing.
	a := &Attributes{Operation: Create, Resource: podsRes, Namespace: "ns", Name: "c", Object: podWith("c", corev1.ResourceRequirements{}), DryRun: true}
	if err := p.Validate(context.Background(), a); err != nil || store.writes != 2 {
		t.Errorf("dry run: err %v, writes %d, want nil and 2", err, store.writes)
	}
}
