package volumebinding

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	st "github.com/skiff-sh/skiff/internal/scheduler/testing"
)

func node(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
}

func class(name, provisioner string, mode storagev1.VolumeBindingMode) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode}
}

func claim(name, className string, mods ...func(*v1.PersistentVolumeClaim)) *v1.PersistentVolumeClaim {
	c := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: &className,
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	for _, m := range mods {
		m(c)
	}
	return c
}

func boundTo(pv string) func(*v1.PersistentVolumeClaim) {
	return func(c *v1.PersistentVolumeClaim) {
		c.Spec.VolumeName = pv
		c.Annotations = map[string]string{storagehelpers.AnnBindCompleted: "yes"}
		c.Status.Phase = v1.ClaimBound
	}
}

// localPV is a volume pinned to one node, as local-path makes them.
func localPV(name, className, nodeName string, mods ...func(*v1.PersistentVolume)) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PersistentVolumeSpec{
			StorageClassName: className,
			Capacity:         v1.ResourceList{v1.ResourceStorage: resource.MustParse("5Gi")},
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{nodeName}}},
			}}}},
			PersistentVolumeSource: v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: "/data/" + name}},
		},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeAvailable},
	}
	for _, m := range mods {
		m(pv)
	}
	return pv
}

func podWith(claims ...string) *v1.Pod {
	p := st.MakePod().Name("web").Namespace("ns").Obj()
	for _, c := range claims {
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: c, VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	return p
}

func newPlugin(t *testing.T, nodes []*v1.Node, objs ...runtime.Object) (*VolumeBinding, *st.Handle, *fake.Clientset, informers.SharedInformerFactory) {
	t.Helper()
	client := fake.NewClientset(objs...)
	// The fake tracker keeps resourceVersions as given: count them up, as
	// the API server does, so that PreBind can tell a stale cache.
	var rv atomic.Int64
	client.PrependReactor("update", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if o, ok := a.(k8stesting.UpdateAction).GetObject().(metav1.Object); ok {
			o.SetResourceVersion(strconv.FormatInt(rv.Add(1), 10))
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	h := st.NewHandle(nil, nodes)
	h.Client, h.Informers = client, factory
	p, err := New(context.Background(), nil, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return p.(*VolumeBinding), h, client, factory
}

func TestFilter(t *testing.T) {
	wffc := class("local-path", "rancher.io/local-path", storagev1.VolumeBindingWaitForFirstConsumer)
	static := class("static", storagehelpers.NotSupportedProvisioner, storagev1.VolumeBindingWaitForFirstConsumer)
	immediate := class("fast", "example.com/fast", storagev1.VolumeBindingImmediate)
	nodes := []*v1.Node{node("a"), node("b")}
	unresolvable := func(reason string) *framework.Status {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, reason)
	}
	tests := []struct {
		name string
		objs []runtime.Object
		pod  *v1.Pod
		want map[string]*framework.Status
	}{{
		name: "no claims: skipped",
		pod:  st.MakePod().Name("web").Namespace("ns").Obj(),
	}, {
		name: "missing claim",
		pod:  podWith("data"),
		want: map[string]*framework.Status{"a": unresolvable(`persistentvolumeclaim "data" not found`), "b": unresolvable(`persistentvolumeclaim "data" not found`)},
	}, {
		name: "unbound immediate claim",
		objs: []runtime.Object{immediate, claim("data", "fast")},
		pod:  podWith("data"),
		want: map[string]*framework.Status{"a": unresolvable(ErrUnboundImmediate), "b": unresolvable(ErrUnboundImmediate)},
	}, {
		name: "bound claim: the volume's node affinity decides",
		objs: []runtime.Object{wffc, localPV("pv-b", "local-path", "b"), claim("data", "local-path", boundTo("pv-b"))},
		pod:  podWith("data"),
		want: map[string]*framework.Status{"a": unresolvable(ErrReasonNodeConflict)},
	}, {
		name: "bound to a missing volume",
		objs: []runtime.Object{claim("data", "", boundTo("gone"))},
		pod:  podWith("data"),
		want: map[string]*framework.Status{"a": unresolvable(ErrReasonPVNotExist), "b": unresolvable(ErrReasonPVNotExist)},
	}, {
		name: "WaitForFirstConsumer with a provisioner: every node",
		objs: []runtime.Object{wffc, claim("data", "local-path")},
		pod:  podWith("data"),
	}, {
		name: "WaitForFirstConsumer, static only: where a free volume is",
		objs: []runtime.Object{static, localPV("pv-a", "static", "a"), claim("data", "static")},
		pod:  podWith("data"),
		want: map[string]*framework.Status{"b": unresolvable(ErrReasonBindConflict)},
	}, {
		name: "selected node elsewhere",
		objs: []runtime.Object{wffc, claim("data", "local-path", func(c *v1.PersistentVolumeClaim) {
			c.Annotations = map[string]string{storagehelpers.AnnSelectedNode: "b"}
		})},
		pod:  podWith("data"),
		want: map[string]*framework.Status{"a": unresolvable(ErrReasonBindConflict)},
	}, {
		name: "allowedTopologies limit provisioning",
		objs: []runtime.Object{func() *storagev1.StorageClass {
			c := wffc.DeepCopy()
			c.AllowedTopologies = []v1.TopologySelectorTerm{{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{
				{Key: "kubernetes.io/hostname", Values: []string{"a"}}}}}
			return c
		}(), claim("data", "local-path")},
		pod:  podWith("data"),
		want: map[string]*framework.Status{"b": unresolvable(ErrReasonBindConflict)},
	}, {
		name: "ephemeral claim not created yet",
		pod: func() *v1.Pod {
			p := st.MakePod().Name("web").Namespace("ns").Obj()
			p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}}}
			return p
		}(),
		want: map[string]*framework.Status{
			"a": unresolvable(`waiting for ephemeral volume controller to create the persistentvolumeclaim "web-scratch"`),
			"b": unresolvable(`waiting for ephemeral volume controller to create the persistentvolumeclaim "web-scratch"`),
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, h, _, _ := newPlugin(t, nodes, tc.objs...)
			got := st.RunFilter(t, h, p, tc.pod)
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b *framework.Status) bool { return a.Equal(b) })); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPreBindProvisioning: the claim gets the selected node, and PreBind
// returns once a provisioner and the binder have bound it.
func TestPreBindProvisioning(t *testing.T) {
	wffc := class("local-path", "rancher.io/local-path", storagev1.VolumeBindingWaitForFirstConsumer)
	p, h, client, _ := newPlugin(t, []*v1.Node{node("a")}, wffc, claim("data", "local-path"))
	p.interval = 10 * time.Millisecond
	p.bindTimeout = 30 * time.Second
	ctx := context.Background()
	state := framework.NewCycleState()
	pod := podWith("data")
	if _, s := p.PreFilter(ctx, state, pod, h.Snapshot.List()); !s.IsSuccess() {
		t.Fatal(s)
	}
	if s := p.Filter(ctx, state, pod, h.Snapshot.List()[0]); !s.IsSuccess() {
		t.Fatal(s)
	}
	if s := p.Reserve(ctx, state, pod, "a"); !s.IsSuccess() {
		t.Fatal(s)
	}
	done := make(chan *framework.Status)
	go func() { done <- p.PreBind(ctx, state, pod, "a") }()

	// Play provisioner and binder once the selected node is there.
	var c *v1.PersistentVolumeClaim
	for {
		var err error
		c, err = client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "data", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Annotations[storagehelpers.AnnSelectedNode] != "" {
			break
		}
		select {
		case s := <-done:
			t.Fatalf("PreBind returned %v before writing the selected node", s)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if got := c.Annotations[storagehelpers.AnnSelectedNode]; got != "a" {
		t.Fatalf("selected node %q, want a", got)
	}
	select {
	case s := <-done:
		t.Fatalf("PreBind returned %v before the claim was bound", s)
	default:
	}
	if _, err := client.CoreV1().PersistentVolumes().Create(ctx, localPV("pvc-1", "local-path", "a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	boundTo("pvc-1")(c)
	if _, err := client.CoreV1().PersistentVolumeClaims("ns").Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if s := <-done; !s.IsSuccess() {
		t.Fatalf("PreBind: %v", s)
	}
}

// TestPreBindStatic: a static volume chosen in Filter gets the claimRef;
// a second pod's claim does not get the volume Reserve took.
func TestPreBindStatic(t *testing.T) {
	static := class("static", storagehelpers.NotSupportedProvisioner, storagev1.VolumeBindingWaitForFirstConsumer)
	p, h, client, _ := newPlugin(t, []*v1.Node{node("a")}, static, localPV("pv-a", "static", "a"),
		claim("data", "static"), claim("other", "static"))
	p.bindTimeout = 50 * time.Millisecond
	p.interval = 10 * time.Millisecond
	ctx := context.Background()
	state := framework.NewCycleState()
	pod := podWith("data")
	if _, s := p.PreFilter(ctx, state, pod, h.Snapshot.List()); !s.IsSuccess() {
		t.Fatal(s)
	}
	if s := p.Filter(ctx, state, pod, h.Snapshot.List()[0]); !s.IsSuccess() {
		t.Fatal(s)
	}
	if s := p.Reserve(ctx, state, pod, "a"); !s.IsSuccess() {
		t.Fatal(s)
	}
	// Another pod, while the volume is assumed: no volume for it.
	other := podWith("other")
	other.Name = "other"
	if got := st.RunFilter(t, h, p, other); got["a"].Code() != framework.UnschedulableAndUnresolvable {
		t.Errorf("other pod: %v, want %s", got, ErrReasonBindConflict)
	}
	// Nobody completes the binding here: PreBind times out, having
	// written the volume's claimRef.
	if s := p.PreBind(ctx, state, pod, "a"); s.IsSuccess() {
		t.Fatal("PreBind succeeded without the binder")
	}
	pv, err := client.CoreV1().PersistentVolumes().Get(ctx, "pv-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != "data" {
		t.Errorf("claimRef = %+v, want ns/data", pv.Spec.ClaimRef)
	}
}
