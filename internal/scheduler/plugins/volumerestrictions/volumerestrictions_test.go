package volumerestrictions

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	st "github.com/skiff-sh/skiff/internal/scheduler/testing"
)

func claim(name string, mode v1.PersistentVolumeAccessMode) *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: v1.PersistentVolumeClaimSpec{AccessModes: []v1.PersistentVolumeAccessMode{mode}}}
}

func podUsing(name, node string, claims ...string) *v1.Pod {
	p := st.MakePod().Name(name).Namespace("ns").Node(node).Obj()
	p.UID = types.UID("uid-" + name)
	for _, c := range claims {
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: c, VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	return p
}

func setup(t *testing.T, pods []*v1.Pod, objs ...runtime.Object) (*VolumeRestrictions, *st.Handle) {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	nodes := []*v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "b"}}}
	h := st.NewHandle(pods, nodes)
	h.Client, h.Informers = client, factory
	p, err := New(context.Background(), nil, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return p.(*VolumeRestrictions), h
}

func TestFilter(t *testing.T) {
	conflict := framework.NewStatus(framework.Unschedulable, ErrReasonReadWriteOncePodConflict)
	claims := []runtime.Object{claim("once", v1.ReadWriteOncePod), claim("rwo", v1.ReadWriteOnce)}
	tests := []struct {
		name     string
		existing []*v1.Pod
		pod      *v1.Pod
		want     map[string]*framework.Status
	}{
		{name: "no claims", pod: podUsing("p", "")},
		{name: "ReadWriteOncePod claim unused", pod: podUsing("p", "", "once")},
		{name: "ReadWriteOncePod claim used elsewhere: no node", existing: []*v1.Pod{podUsing("q", "a", "once")},
			pod: podUsing("p", "", "once"), want: map[string]*framework.Status{"a": conflict, "b": conflict}},
		{name: "ReadWriteOnce claims are shared", existing: []*v1.Pod{podUsing("q", "a", "rwo")}, pod: podUsing("p", "", "rwo")},
		{name: "another namespace's claim of that name", existing: []*v1.Pod{func() *v1.Pod {
			p := podUsing("q", "a", "once")
			p.Namespace = "other"
			return p
		}()}, pod: podUsing("p", "", "once")},
		{name: "missing claim", pod: podUsing("p", "", "gone"), want: map[string]*framework.Status{
			"a": framework.NewStatus(framework.UnschedulableAndUnresolvable, `persistentvolumeclaim "gone" not found`),
			"b": framework.NewStatus(framework.UnschedulableAndUnresolvable, `persistentvolumeclaim "gone" not found`),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, h := setup(t, tc.existing, claims...)
			got := st.RunFilter(t, h, p, tc.pod)
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b *framework.Status) bool { return a.Equal(b) })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestPreemptionDryRun: removing the pod that holds the claim makes room.
func TestPreemptionDryRun(t *testing.T) {
	holder := podUsing("q", "a", "once")
	p, h := setup(t, []*v1.Pod{holder}, claim("once", v1.ReadWriteOncePod))
	ctx := context.Background()
	cs := framework.NewCycleState()
	pod := podUsing("p", "", "once")
	if _, s := p.PreFilter(ctx, cs, pod, h.Snapshot.List()); !s.IsSuccess() {
		t.Fatal(s)
	}
	ni := h.Snapshot.List()[0]
	if s := p.Filter(ctx, cs, pod, ni); s.Code() != framework.Unschedulable {
		t.Fatalf("with the holder: %v", s)
	}
	if s := p.RemovePod(ctx, cs, pod, framework.MustPodInfo(holder), ni); !s.IsSuccess() {
		t.Fatal(s)
	}
	if s := p.Filter(ctx, cs, pod, ni); !s.IsSuccess() {
		t.Errorf("without the holder: %v", s)
	}
}
