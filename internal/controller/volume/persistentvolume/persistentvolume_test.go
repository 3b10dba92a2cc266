package persistentvolume

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// harness runs the controller's syncs over listers that it refreshes from
// the fake clientset before each round, so each round sees every write of
// the one before, as the informers would.
type harness struct {
	t        *testing.T
	client   *fake.Clientset
	recorder *record.FakeRecorder
	events   []string
}

func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	return &harness{t: t, client: fake.NewClientset(objs...), recorder: record.NewFakeRecorder(1000)}
}

func (h *harness) controller() *Controller {
	ctx := context.Background()
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	pvs, pvcs, classes, pods := idx(), idx(), idx(), idx()
	pvList, err := h.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	for i := range pvList.Items {
		_ = pvs.Add(&pvList.Items[i])
	}
	pvcList, _ := h.client.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	for i := range pvcList.Items {
		_ = pvcs.Add(&pvcList.Items[i])
	}
	scList, _ := h.client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	for i := range scList.Items {
		_ = classes.Add(&scList.Items[i])
	}
	podList, _ := h.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	for i := range podList.Items {
		_ = pods.Add(&podList.Items[i])
	}
	c := &Controller{
		client:   h.client,
		recorder: h.recorder,
		clock:    clocktesting.NewFakeClock(metav1.Now().Time),
		volumes:  corelisters.NewPersistentVolumeLister(pvs),
		claims:   corelisters.NewPersistentVolumeClaimLister(pvcs),
		classes:  storagelisters.NewStorageClassLister(classes),
		pods:     corelisters.NewPodLister(pods),
	}
	// The queues are never run here: converge syncs everything each round.
	c.claimQueue = worker.NewQueue("claims", c.syncClaimKey, worker.Options[string]{})
	c.volumeQueue = worker.NewQueue("volumes", c.syncVolumeKey, worker.Options[string]{})
	h.t.Cleanup(func() { c.claimQueue.ShutDown(); c.volumeQueue.ShutDown() })
	return c
}

// converge syncs every claim and volume until a round writes nothing.
func (h *harness) converge() {
	ctx := context.Background()
	for round := 0; round < 10; round++ {
		before := len(h.client.Actions())
		c := h.controller()
		claims, _ := c.claims.List(everything())
		for _, pvc := range claims {
			if err := c.syncClaim(ctx, pvc); err != nil {
				h.t.Logf("sync claim %s: %v", pvc.Name, err)
			}
		}
		c = h.controller()
		volumes, _ := c.volumes.List(everything())
		for _, pv := range volumes {
			if err := c.syncVolume(ctx, pv); err != nil {
				h.t.Logf("sync volume %s: %v", pv.Name, err)
			}
		}
		h.drainEvents()
		writes := 0
		for _, a := range h.client.Actions()[before:] {
			if a.GetVerb() != "list" && a.GetVerb() != "get" && a.GetResource().Resource != "events" {
				writes++
			}
		}
		if writes == 0 {
			return
		}
	}
	h.t.Fatal("no steady state after 10 rounds")
}

func (h *harness) drainEvents() {
	for {
		select {
		case e := <-h.recorder.Events:
			if !contains(h.events, e) {
				h.events = append(h.events, e)
			}
		default:
			return
		}
	}
}

func contains(s []string, e string) bool {
	for _, x := range s {
		if x == e {
			return true
		}
	}
	return false
}

// state renders claims and volumes as "kind/name phase -> other".
func (h *harness) state() []string {
	ctx := context.Background()
	var out []string
	pvcs, _ := h.client.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	for _, c := range pvcs.Items {
		line := "pvc/" + c.Name + " " + string(c.Status.Phase)
		if c.Spec.VolumeName != "" {
			line += " -> " + c.Spec.VolumeName
		}
		if q, ok := c.Status.Capacity[corev1.ResourceStorage]; ok {
			line += " " + q.String()
		}
		if c.Spec.StorageClassName != nil && *c.Spec.StorageClassName != "" {
			line += " class=" + *c.Spec.StorageClassName
		}
		if p := c.Annotations[storagehelpers.AnnStorageProvisioner]; p != "" {
			line += " provisioner=" + p
		}
		out = append(out, line)
	}
	pvs, _ := h.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	for _, v := range pvs.Items {
		line := "pv/" + v.Name + " " + string(v.Status.Phase)
		if v.Spec.ClaimRef != nil {
			line += " -> " + v.Spec.ClaimRef.Name
			if v.Spec.ClaimRef.UID == "" {
				line += " (no uid)"
			}
		}
		out = append(out, line)
	}
	sort.Strings(out)
	return out
}

func everything() labels.Selector { return labels.Everything() }

func pv(name, size string, mods ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	v := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + name}},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable},
	}
	for _, m := range mods {
		m(v)
	}
	return v
}

func pvc(name, size string, mods ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
			StorageClassName: ptr(""),
		},
	}
	for _, m := range mods {
		m(c)
	}
	return c
}

func ptr[T any](v T) *T { return &v }

func class(name, provisioner string, mode storagev1.VolumeBindingMode, isDefault bool) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode}
	if isDefault {
		sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	}
	return sc
}

func TestBinding(t *testing.T) {
	withClass := func(n string) func(*corev1.PersistentVolumeClaim) {
		return func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr(n) }
	}
	pvClass := func(n string) func(*corev1.PersistentVolume) {
		return func(v *corev1.PersistentVolume) { v.Spec.StorageClassName = n }
	}
	released := func(v *corev1.PersistentVolume) {
		v.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "ns", Name: "gone", UID: "uid-gone"}
		v.Status.Phase = corev1.VolumeBound
	}
	tests := []struct {
		name       string
		objs       []runtime.Object
		wantState  []string
		wantEvents []string
	}{{
		name: "the smallest volume that fits is bound, capacity from the volume",
		objs: []runtime.Object{pv("small", "1Gi"), pv("mid", "5Gi"), pv("big", "20Gi"), pvc("data", "2Gi")},
		wantState: []string{"pv/big Available", "pv/mid Bound -> data", "pv/small Available",
			"pvc/data Bound -> mid 5Gi"},
	}, {
		name: "access modes must all be offered",
		objs: []runtime.Object{pv("rwo", "5Gi"), pvc("data", "1Gi", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
		})},
		wantState:  []string{"pv/rwo Available", "pvc/data Pending"},
		wantEvents: []string{"Normal FailedBinding no persistent volumes available for this claim and no storage class is set"},
	}, {
		name: "label selector",
		objs: []runtime.Object{
			pv("plain", "5Gi"),
			pv("fast", "5Gi", func(v *corev1.PersistentVolume) { v.Labels = map[string]string{"tier": "fast"} }),
			pvc("data", "1Gi", func(c *corev1.PersistentVolumeClaim) {
				c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "fast"}}
			}),
		},
		wantState: []string{"pv/fast Bound -> data", "pv/plain Available", "pvc/data Bound -> fast 5Gi"},
	}, {
		name:      "storageClassName must match",
		objs:      []runtime.Object{pv("gold", "5Gi", pvClass("gold")), pv("none", "9Gi"), pvc("data", "1Gi", withClass("gold"))},
		wantState: []string{"pv/gold Bound -> data", "pv/none Available", "pvc/data Bound -> gold 5Gi class=gold"},
	}, {
		name:       "a claim naming a volume too small for it stays Pending",
		objs:       []runtime.Object{pv("tiny", "1Gi"), pvc("data", "2Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "tiny" })},
		wantState:  []string{"pv/tiny Available", "pvc/data Pending -> tiny"},
		wantEvents: []string{`Warning VolumeMismatch Cannot bind to requested volume "tiny": requested PV is too small`},
	}, {
		name:      "a claim naming a volume gets it, even a larger one than another fit",
		objs:      []runtime.Object{pv("a", "1Gi"), pv("b", "8Gi"), pvc("data", "1Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "b" })},
		wantState: []string{"pv/a Available", "pv/b Bound -> data", "pvc/data Bound -> b 8Gi"},
	}, {
		name: "a volume pre-bound by claimRef goes to that claim only",
		objs: []runtime.Object{
			pv("reserved", "5Gi", func(v *corev1.PersistentVolume) {
				v.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "ns", Name: "mine"}
			}),
			pvc("other", "1Gi"), pvc("mine", "1Gi"),
		},
		wantState:  []string{"pv/reserved Bound -> mine", "pvc/mine Bound -> reserved 5Gi", "pvc/other Pending"},
		wantEvents: []string{"Normal FailedBinding no persistent volumes available for this claim and no storage class is set"},
	}, {
		name:      "Retain: a released volume keeps its claimRef and data",
		objs:      []runtime.Object{pv("kept", "5Gi", released)},
		wantState: []string{"pv/kept Released -> gone"},
	}, {
		name: "Delete without a deleter: Failed",
		objs: []runtime.Object{pv("static", "5Gi", released, func(v *corev1.PersistentVolume) {
			v.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
		})},
		wantState:  []string{"pv/static Failed -> gone"},
		wantEvents: []string{`Warning VolumeFailedDelete error getting deleter volume plugin for volume "static": no deletable volume plugin matched`},
	}, {
		name: "Delete of an externally provisioned volume is left to its provisioner",
		objs: []runtime.Object{pv("pvc-x", "5Gi", released, func(v *corev1.PersistentVolume) {
			v.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
			v.Annotations = map[string]string{storagehelpers.AnnDynamicallyProvisioned: "rancher.io/local-path"}
		})},
		wantState: []string{"pv/pvc-x Released -> gone"},
	}, {
		name: "a claim without a class gets the default class, then asks its provisioner",
		objs: []runtime.Object{
			class("local-path", "rancher.io/local-path", storagev1.VolumeBindingImmediate, true),
			class("other", "example.com/other", storagev1.VolumeBindingImmediate, false),
			pvc("data", "1Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = nil }),
		},
		wantState: []string{"pvc/data Pending class=local-path provisioner=rancher.io/local-path"},
		wantEvents: []string{"Normal ExternalProvisioning Waiting for a volume to be created either by the external provisioner 'rancher.io/local-path' " +
			"or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered."},
	}, {
		name:       "a missing class: ProvisioningFailed",
		objs:       []runtime.Object{pvc("data", "1Gi", withClass("nope"))},
		wantState:  []string{"pvc/data Pending class=nope"},
		wantEvents: []string{`Warning ProvisioningFailed storageclass.storage.k8s.io "nope" not found`},
	}, {
		name: "WaitForFirstConsumer without a consumer",
		objs: []runtime.Object{
			class("local-path", "rancher.io/local-path", storagev1.VolumeBindingWaitForFirstConsumer, true),
			pvc("data", "1Gi", withClass("local-path")),
		},
		wantState:  []string{"pvc/data Pending class=local-path"},
		wantEvents: []string{"Normal WaitForFirstConsumer waiting for first consumer to be created before binding"},
	}, {
		name: "WaitForFirstConsumer with a pod not yet scheduled",
		objs: []runtime.Object{
			class("local-path", "rancher.io/local-path", storagev1.VolumeBindingWaitForFirstConsumer, true),
			pvc("data", "1Gi", withClass("local-path")),
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{{
				Name: "v", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}},
		},
		wantState:  []string{"pvc/data Pending class=local-path"},
		wantEvents: []string{"Normal WaitForPodScheduled waiting for pod web to be scheduled"},
	}, {
		name: "WaitForFirstConsumer with a selected node: provisioning, and the unbound static volume is not taken",
		objs: []runtime.Object{
			class("local-path", "rancher.io/local-path", storagev1.VolumeBindingWaitForFirstConsumer, true),
			pv("static", "5Gi", pvClass("local-path")),
			pvc("data", "1Gi", withClass("local-path"), func(c *corev1.PersistentVolumeClaim) {
				c.Annotations = map[string]string{storagehelpers.AnnSelectedNode: "node-1"}
			}),
		},
		wantState: []string{"pv/static Available", "pvc/data Pending class=local-path provisioner=rancher.io/local-path"},
		wantEvents: []string{"Normal ExternalProvisioning Waiting for a volume to be created either by the external provisioner 'rancher.io/local-path' " +
			"or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered."},
	}, {
		name: "a provisioned volume pre-bound with the claim's UID is bound",
		objs: []runtime.Object{
			class("local-path", "rancher.io/local-path", storagev1.VolumeBindingWaitForFirstConsumer, true),
			pv("pvc-uid-data", "1Gi", pvClass("local-path"), func(v *corev1.PersistentVolume) {
				v.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "ns", Name: "data", UID: "uid-data"}
				v.Status.Phase = ""
			}),
			pvc("data", "1Gi", withClass("local-path")),
		},
		wantState: []string{"pv/pvc-uid-data Bound -> data", "pvc/data Bound -> pvc-uid-data 1Gi class=local-path"},
	}, {
		name: "a bound claim whose volume is gone is Lost",
		objs: []runtime.Object{pvc("data", "1Gi", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.VolumeName = "gone"
			c.Annotations = map[string]string{storagehelpers.AnnBindCompleted: "yes"}
			c.Status.Phase = corev1.ClaimBound
		})},
		wantState:  []string{"pvc/data Lost -> gone"},
		wantEvents: []string{"Warning ClaimLost Bound claim has lost its PersistentVolume. Data on the volume is lost!"},
	}, {
		name: "a volume bound by the controller to a claim bound elsewhere is freed",
		objs: []runtime.Object{
			pv("stray", "5Gi", func(v *corev1.PersistentVolume) {
				v.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "ns", Name: "data", UID: "uid-data"}
				v.Annotations = map[string]string{storagehelpers.AnnBoundByController: "yes"}
				v.Status.Phase = corev1.VolumeBound
			}),
			pv("right", "5Gi", func(v *corev1.PersistentVolume) {
				v.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "ns", Name: "data", UID: "uid-data"}
				v.Status.Phase = corev1.VolumeBound
			}),
			pvc("data", "1Gi", func(c *corev1.PersistentVolumeClaim) {
				c.Spec.VolumeName = "right"
				c.Annotations = map[string]string{storagehelpers.AnnBindCompleted: "yes"}
				c.Status.Phase = corev1.ClaimBound
			}),
		},
		wantState: []string{"pv/right Bound -> data", "pv/stray Available", "pvc/data Bound -> right"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.objs...)
			h.converge()
			if diff := cmp.Diff(tc.wantState, h.state()); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEvents, h.events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBoundAnnotations checks what clients read on a bound pair.
func TestBoundAnnotations(t *testing.T) {
	h := newHarness(t, pv("vol", "5Gi"), pvc("data", "1Gi"))
	h.converge()
	ctx := context.Background()
	claim, _ := h.client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "data", metav1.GetOptions{})
	vol, _ := h.client.CoreV1().PersistentVolumes().Get(ctx, "vol", metav1.GetOptions{})
	got := []string{
		claim.Annotations[storagehelpers.AnnBindCompleted], claim.Annotations[storagehelpers.AnnBoundByController],
		vol.Annotations[storagehelpers.AnnBoundByController], string(vol.Spec.ClaimRef.UID), vol.Spec.ClaimRef.Kind,
		strings.Join([]string{string(claim.Status.AccessModes[0])}, ","),
	}
	want := []string{"yes", "yes", "yes", "uid-data", "PersistentVolumeClaim", "ReadWriteOnce"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
