package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/endpoints"
	"github.com/skiff-sh/skiff/internal/controller/endpointslice"
	"github.com/skiff-sh/skiff/internal/controller/endpointslicemirroring"
	"github.com/skiff-sh/skiff/internal/controller/garbagecollector"
	"github.com/skiff-sh/skiff/internal/controller/namespace"
	"github.com/skiff-sh/skiff/internal/controller/nodelifecycle"
)

// runMaintControllers builds the given controllers on cluster c the way
// the manager does (shared informers started after every New, caches
// synced before Start) and runs them until the test ends.
func runMaintControllers(t *testing.T, c *cluster, opts controllercontext.Options, inits ...controllercontext.InitFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	cs := c.Clientset()
	md, err := metadata.NewForConfig(rest.CopyConfig(c.Config))
	if err != nil {
		t.Fatalf("metadata client: %v", err)
	}
	cc := controllercontext.Context{
		Client:            cs,
		Dynamic:           c.Dynamic(),
		Metadata:          md,
		Informers:         informers.NewSharedInformerFactory(cs, 0),
		MetadataInformers: metadatainformer.NewSharedInformerFactory(md, 0),
		Recorder:          &record.FakeRecorder{},
		Clock:             clock.RealClock{},
		Options:           opts,
	}
	var ctrls []controllercontext.Controller
	for _, init := range inits {
		ctrl, err := init(ctx, cc)
		if err != nil {
			t.Fatalf("build controller: %v", err)
		}
		if ctrl != nil {
			ctrls = append(ctrls, ctrl)
		}
	}
	cc.Informers.Start(ctx.Done())
	cc.MetadataInformers.Start(ctx.Done())
	cc.Informers.WaitForCacheSync(ctx.Done())
	cc.MetadataInformers.WaitForCacheSync(ctx.Done())
	for _, ctrl := range ctrls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ctrl.Start(ctx); err != nil {
				t.Errorf("controller: %v", err)
			}
		}()
	}
}

func readyPodStatus(ip string, ready bool) corev1.PodStatus {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}
}

// TestControllersEndpointSliceFollowsReadiness: a Service's EndpointSlice
// and Endpoints follow a pod becoming ready and unready.
func TestControllersEndpointSliceFollowsReadiness(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	runMaintControllers(t, c, controllercontext.Options{}, endpointslice.New, endpoints.New)
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 60*time.Second)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "it"},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("web")}},
	}}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service: %v", err)
	}
	p := newPod("p")
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "web", ContainerPort: 8080}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	sliceState := func() (string, error) {
		list, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil {
			return "", err
		}
		var parts []string
		for _, s := range list.Items {
			if s.Labels[discoveryv1.LabelManagedBy] != endpointslice.ManagedBy || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Service" {
				return "", fmt.Errorf("slice %s: labels %v owners %v", s.Name, s.Labels, s.OwnerReferences)
			}
			for _, ep := range s.Endpoints {
				port := int32(0)
				if len(s.Ports) > 0 {
					port = *s.Ports[0].Port
				}
				r := "unready"
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					r = "ready"
				}
				parts = append(parts, fmt.Sprintf("%s:%d %s", ep.Addresses[0], port, r))
			}
		}
		return strings.Join(parts, ","), nil
	}
	setReady := func(ready bool) {
		t.Helper()
		cur, err := cs.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Status = readyPodStatus("10.42.0.7", ready)
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update pod status: %v", err)
		}
	}
	expect := func(want string, wantReady, wantNotReady int) {
		t.Helper()
		eventually(t, 20*time.Second, "endpointslice "+want, func() (bool, error) {
			got, err := sliceState()
			return got == want, err
		})
		eventually(t, 20*time.Second, "endpoints", func() (bool, error) {
			ep, err := cs.CoreV1().Endpoints(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			r, nr := 0, 0
			for _, s := range ep.Subsets {
				r += len(s.Addresses)
				nr += len(s.NotReadyAddresses)
			}
			return r == wantReady && nr == wantNotReady, nil
		})
	}
	expect("", 0, 0) // no address yet: an empty slice
	setReady(true)
	expect("10.42.0.7:8080 ready", 1, 0)
	setReady(false)
	expect("10.42.0.7:8080 unready", 0, 1)
	setReady(true)
	expect("10.42.0.7:8080 ready", 1, 0)
}

// TestControllersEndpointSliceMirroring: the Endpoints a user writes for
// a Service without a selector are mirrored into one EndpointSlice
// through create, update and delete (the conformance test's script), and
// the skip-mirror label takes them out again; the endpoint controllers
// running beside it leave the Service alone.
func TestControllersEndpointSliceMirroring(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	runMaintControllers(t, c, controllercontext.Options{}, endpointslicemirroring.New, endpointslice.New, endpoints.New)
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 90*time.Second)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "example-custom-endpoints"}, Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Name: "example", Port: 80, Protocol: corev1.ProtocolTCP}},
	}}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service: %v", err)
	}
	// slices is every slice of the service as "ip:port ready", checking
	// each is the mirroring controller's, owned by the Endpoints.
	slices := func() ([]string, error) {
		list, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
		if err != nil {
			return nil, err
		}
		var out []string
		for _, s := range list.Items {
			if s.Labels[discoveryv1.LabelManagedBy] != endpointslicemirroring.ManagedBy || s.Labels["team"] != "blue" ||
				len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Endpoints" || s.OwnerReferences[0].Name != svc.Name {
				return nil, fmt.Errorf("slice %s: labels %v owners %v", s.Name, s.Labels, s.OwnerReferences)
			}
			var eps []string
			for _, ep := range s.Endpoints {
				eps = append(eps, fmt.Sprintf("%s:%d %v", ep.Addresses[0], *s.Ports[0].Port, *ep.Conditions.Ready))
			}
			out = append(out, strings.Join(eps, ","))
		}
		return out, nil
	}
	expect := func(want ...string) {
		t.Helper()
		var got []string
		eventually(t, 20*time.Second, fmt.Sprintf("mirrored slices %q", want), func() (bool, error) {
			var err error
			got, err = slices()
			return fmt.Sprint(got) == fmt.Sprint(want), err
		})
	}
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Labels: map[string]string{"team": "blue"}},
		Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Port: 80}}, Addresses: []corev1.EndpointAddress{{IP: "10.1.2.3"}}}}}
	ep, err := cs.CoreV1().Endpoints(ns).Create(ctx, ep, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create endpoints: %v", err)
	}
	expect("10.1.2.3:80 true")

	ep.Subsets[0].Addresses = []corev1.EndpointAddress{{IP: "10.2.3.4"}}
	ep.Subsets[0].NotReadyAddresses = []corev1.EndpointAddress{{IP: "10.2.3.5"}}
	if ep, err = cs.CoreV1().Endpoints(ns).Update(ctx, ep, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update endpoints: %v", err)
	}
	expect("10.2.3.4:80 true,10.2.3.5:80 false")

	ep.Labels[discoveryv1.LabelSkipMirror] = "true"
	if ep, err = cs.CoreV1().Endpoints(ns).Update(ctx, ep, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("label endpoints skip-mirror: %v", err)
	}
	expect()
	delete(ep.Labels, discoveryv1.LabelSkipMirror)
	if _, err = cs.CoreV1().Endpoints(ns).Update(ctx, ep, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("unlabel endpoints: %v", err)
	}
	expect("10.2.3.4:80 true,10.2.3.5:80 false")

	if err := cs.CoreV1().Endpoints(ns).Delete(ctx, ep.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete endpoints: %v", err)
	}
	expect()
}

func ownedReplicaSet(d *appsv1.Deployment, name string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": d.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0), Selector: d.Spec.Selector, Template: d.Spec.Template},
	}
}

// TestControllersGarbageCollection: ReplicaSets owned by a deleted
// Deployment go (background), go first (foreground, the Deployment
// waiting for them), or stay without the reference (orphan).
func TestControllersGarbageCollection(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	runMaintControllers(t, c, controllercontext.Options{}, garbagecollector.New)
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 90*time.Second)
	for _, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan} {
		t.Run(string(policy), func(t *testing.T) {
			name := strings.ToLower(string(policy))
			d, err := cs.AppsV1().Deployments(ns).Create(ctx, newDeployment(name), metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create deployment: %v", err)
			}
			rs := ownedReplicaSet(d, name+"-rs")
			if _, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create replicaset: %v", err)
			}
			// A finalizer of our own holds the ReplicaSet, so the
			// foreground case can observe the owner waiting for it.
			if policy == metav1.DeletePropagationForeground {
				cur, _ := cs.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{})
				cur.Finalizers = []string{"example.com/hold"}
				if _, err := cs.AppsV1().ReplicaSets(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := cs.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
				t.Fatalf("delete deployment: %v", err)
			}
			gone := func(get func() error) func() (bool, error) {
				return func() (bool, error) {
					err := get()
					if apierrors.IsNotFound(err) {
						return true, nil
					}
					return false, err
				}
			}
			getRS := func() error { _, err := cs.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{}); return err }
			getD := func() error { _, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); return err }
			switch policy {
			case metav1.DeletePropagationBackground:
				eventually(t, 30*time.Second, "owned replicaset deleted", gone(getRS))
			case metav1.DeletePropagationForeground:
				eventually(t, 30*time.Second, "replicaset marked for deletion", func() (bool, error) {
					cur, err := cs.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{})
					return err == nil && cur.DeletionTimestamp != nil, err
				})
				dep, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatalf("deployment gone while its blocking dependent remains: %v", err)
				}
				if dep.DeletionTimestamp == nil || !contains(dep.Finalizers, metav1.FinalizerDeleteDependents) {
					t.Fatalf("deployment = deletion %v finalizers %v; want waiting in the foreground", dep.DeletionTimestamp, dep.Finalizers)
				}
				cur, _ := cs.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{})
				cur.Finalizers = nil
				if _, err := cs.AppsV1().ReplicaSets(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				eventually(t, 30*time.Second, "replicaset gone", gone(getRS))
				eventually(t, 30*time.Second, "deployment gone after its dependents", gone(getD))
			case metav1.DeletePropagationOrphan:
				eventually(t, 30*time.Second, "deployment gone", gone(getD))
				cur, err := cs.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatalf("orphaned replicaset: %v", err)
				}
				if len(cur.OwnerReferences) != 0 {
					t.Errorf("orphaned replicaset still has owners %v", cur.OwnerReferences)
				}
			}
		})
	}
}

// TestControllersGarbageCollectionCircle: three objects owning each other
// in a circle with blocking references (as upstream's conformance test
// "should not be blocked by dependency circle") are all collected after a
// foreground deletion of one of them.
func TestControllersGarbageCollectionCircle(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	runMaintControllers(t, c, controllercontext.Options{}, garbagecollector.New)
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 90*time.Second)
	cms := cs.CoreV1().ConfigMaps(ns)
	var made []*corev1.ConfigMap
	for _, name := range []string{"cm1", "cm2", "cm3"} {
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		made = append(made, cm)
	}
	// cm1 owned by cm3, cm2 by cm1, cm3 by cm2.
	for i, cm := range made {
		owner := made[(i+2)%3]
		patch := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":%q,"uid":%q,"controller":true,"blockOwnerDeletion":true}]}}`, owner.Name, owner.UID)
		if _, err := cms.Patch(ctx, cm.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("own %s by %s: %v", cm.Name, owner.Name, err)
		}
	}
	foreground := metav1.DeletePropagationForeground
	if err := cms.Delete(ctx, "cm1", metav1.DeleteOptions{PropagationPolicy: &foreground, Preconditions: metav1.NewUIDPreconditions(string(made[0].UID))}); err != nil {
		t.Fatalf("delete cm1: %v", err)
	}
	eventually(t, 60*time.Second, "all three ConfigMaps of the circle gone", func() (bool, error) {
		list, err := cms.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var left []string
		for _, cm := range list.Items {
			if cm.Name != "kube-root-ca.crt" {
				left = append(left, fmt.Sprintf("%s (deleting %v, finalizers %v, owners %v)", cm.Name, cm.DeletionTimestamp != nil, cm.Finalizers, cm.OwnerReferences))
			}
		}
		if len(left) > 0 {
			return false, fmt.Errorf("left: %v", left)
		}
		return true, nil
	})
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestControllersNamespaceDeletion: deleting a namespace with
// Deployments, Services and ConfigMaps leaves nothing behind and the
// namespace disappears.
func TestControllersNamespaceDeletion(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	runMaintControllers(t, c, controllercontext.Options{}, namespace.New, garbagecollector.New)
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 90*time.Second)
	d, err := cs.AppsV1().Deployments(ns).Create(ctx, newDeployment("app"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, ownedReplicaSet(d, "app-rs"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete namespace: %v", err)
	}
	eventually(t, 60*time.Second, "namespace "+ns+" removed", func() (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	var left []string
	for _, k := range etcdKeys(t, c, "/registry/") {
		if strings.Contains(k, "/"+ns+"/") || strings.HasSuffix(k, "/"+ns) {
			left = append(left, k)
		}
	}
	if len(left) > 0 {
		t.Errorf("keys left behind: %v", left)
	}
}

// heartbeat renews node's Lease and Ready condition every interval until
// stopped, as a kubelet would. stop returns when the last renewal was
// sent: a controller can only have seen it after that.
func heartbeat(t *testing.T, c *cluster, node string, interval time.Duration) (stop func() (lastSent time.Time)) {
	cs := c.Clientset()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var last time.Time // written by the goroutine, read after done
	go func() {
		defer close(done)
		tk := time.NewTicker(interval)
		defer tk.Stop()
		for {
			now := metav1.NowMicro()
			last = time.Now()
			l, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				_, _ = cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Name: node},
					Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now},
				}, metav1.CreateOptions{})
			} else if err == nil {
				l.Spec.RenewTime = &now
				_, _ = cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(ctx, l, metav1.UpdateOptions{})
			}
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
	return func() time.Time { cancel(); <-done; return last }
}

// TestControllersNodeLifecycleEviction: a node whose Lease stops renewing
// is marked Unknown and tainted unreachable:NoExecute after the grace
// period; its pods go after their tolerationSeconds; a heartbeating node
// is left alone.
func TestControllersNodeLifecycleEviction(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	ctx := testCtx(t, 90*time.Second)
	for _, name := range []string{"live", "dead"} {
		n, err := cs.CoreV1().Nodes().Create(ctx, newNode(name), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stopLive := heartbeat(t, c, "live", 200*time.Millisecond)
	defer stopLive()
	stopDead := heartbeat(t, c, "dead", 200*time.Millisecond)

	runMaintControllers(t, c, controllercontext.Options{
		NodeMonitorGracePeriod: 2 * time.Second, NodeMonitorPeriod: 200 * time.Millisecond,
		NodeStartupGracePeriod: 3 * time.Second, NodeEvictionRate: 100,
	}, nodelifecycle.New)

	ns := newNamespace(t, cs)
	mkPod := func(name, node string, seconds int64) {
		p := newPod(name)
		p.Spec.NodeName = node
		p.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(seconds)}}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", name, err)
		}
	}
	mkPod("short", "dead", 2)
	mkPod("long", "dead", 3600)
	mkPod("elsewhere", "live", 2)

	// The not-ready NoSchedule taint the API server adds goes once Ready.
	eventually(t, 10*time.Second, "not-ready taint removed from ready nodes", func() (bool, error) {
		for _, name := range []string{"live", "dead"} {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || len(n.Spec.Taints) != 0 {
				return false, err
			}
		}
		return true, nil
	})

	// The grace period runs from the last renewal the controller saw,
	// which it saw no earlier than it was sent.
	stopped := stopDead()
	eventually(t, 20*time.Second, "dead node tainted unreachable:NoExecute", func() (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "dead", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, tn := range n.Spec.Taints {
			if tn.Key == corev1.TaintNodeUnreachable && tn.Effect == corev1.TaintEffectNoExecute {
				return true, nil
			}
		}
		return false, nil
	})
	if time.Since(stopped) < 2*time.Second {
		t.Errorf("tainted %v after the last renewal was sent, before the 2 s grace period", time.Since(stopped))
	}
	n, _ := cs.CoreV1().Nodes().Get(ctx, "dead", metav1.GetOptions{})
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady && (cond.Status != corev1.ConditionUnknown || cond.Reason != "NodeStatusUnknown") {
			t.Errorf("dead node Ready = %s/%s, want Unknown/NodeStatusUnknown", cond.Status, cond.Reason)
		}
	}
	evicted := func(name string) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && p.DeletionTimestamp != nil, err
	}
	eventually(t, 20*time.Second, "pod tolerating 2 s evicted", func() (bool, error) { return evicted("short") })
	for _, name := range []string{"long", "elsewhere"} {
		if gone, err := evicted(name); gone || err != nil {
			t.Errorf("pod %s evicted (%v), want it kept", name, err)
		}
	}
	if l, _ := cs.CoreV1().Nodes().Get(ctx, "live", metav1.GetOptions{}); len(l.Spec.Taints) != 0 {
		t.Errorf("live node taints = %v, want none", l.Spec.Taints)
	}

	// The node comes back: it is untainted.
	n, _ = cs.CoreV1().Nodes().Get(ctx, "dead", metav1.GetOptions{})
	for i := range n.Status.Conditions {
		n.Status.Conditions[i].Status, n.Status.Conditions[i].LastHeartbeatTime = corev1.ConditionTrue, metav1.Now()
		if n.Status.Conditions[i].Type != corev1.NodeReady {
			n.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stopDead = heartbeat(t, c, "dead", 200*time.Millisecond)
	defer stopDead()
	eventually(t, 20*time.Second, "returned node untainted", func() (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "dead", metav1.GetOptions{})
		return err == nil && len(n.Spec.Taints) == 0, err
	})
}
