package integration

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/manager"
	"github.com/skiff-sh/skiff/internal/scheduler/app"
	"github.com/skiff-sh/skiff/internal/scheduler/config"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins"
	"github.com/skiff-sh/skiff/internal/simulate"
)

// The end-to-end controller tests run the whole controller manager
// (internal/controller/manager, every registered controller) against the
// in-process API server, with simulated kubelets (internal/simulate) and
// Skiff's scheduler (internal/scheduler/app), all in this process.

// e2eControllerOptions are upstream's controller options with the node
// lifecycle durations shortened so that a dead node is noticed in seconds.
func e2eControllerOptions() controllercontext.Options {
	o := manager.DefaultControllerOptions()
	o.NodeMonitorGracePeriod = 3 * time.Second
	o.NodeMonitorPeriod = 250 * time.Millisecond
	o.NodeStartupGracePeriod = 5 * time.Second
	o.NodeEvictionRate = 100 // no waiting between tainted nodes
	return o
}

// e2eMetrics is the one registry the managers of this test binary publish
// their work queue metrics to (client-go's provider is process-global).
var e2eMetrics = prometheus.NewRegistry()

// runManager runs the whole controller manager on c until the returned stop
// is called or the test ends; stop waits for it to return, as a killed
// process would have stopped writing.
func runManager(t *testing.T, c *cluster) (stop func()) {
	t.Helper()
	// As skiff server runs them: each controller with its own service
	// account's token (the harness authorizes everyone, so this checks the
	// tokens, and internal/server's TestRunSecurity the roles).
	m, err := manager.New(c.Config, manager.Options{Controller: e2eControllerOptions(), Metrics: e2eMetrics, UseServiceAccountCredentials: true,
		SharedInformers: inProcessInformers(t, c)})
	if err != nil {
		t.Fatalf("manager.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("controller manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// runNodes starts n simulated nodes whose Leases last 2 s (renewed every
// 500 ms), so that a paused node misses the 3 s grace period quickly. The
// not-ready taint admission adds is left for the node lifecycle controller
// to remove. It returns once every node is registered.
func runNodes(t *testing.T, c *cluster, n int) *simulate.Simulator {
	t.Helper()
	sim := simulate.New(c.Clientset(), simulate.Options{
		Nodes: n, NamePrefix: "e2e-node-",
		LeaseDuration: 2 * time.Second, LeaseRenewInterval: 500 * time.Millisecond,
		StatusUpdateFrequency: time.Second,
		KeepNotReadyTaint:     true,
		Workers:               4,
	})
	runSimulator(t, sim)
	return sim
}

// runSimulator runs sim until the test ends and returns once every node is
// registered.
func runSimulator(t *testing.T, sim *simulate.Simulator) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("simulator: %v", err)
		}
	})
	select {
	case <-sim.Ready():
	case err := <-done:
		t.Fatalf("simulator stopped: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("simulated nodes not ready after 60s")
	}
}

// runScheduler runs Skiff's scheduler (internal/scheduler/app with the
// default profile, without leader election) until the test ends.
func runScheduler(t *testing.T, c *cluster) {
	t.Helper()
	cfg := config.Default(plugins.DefaultProfile())
	cfg.LeaderElection.LeaderElect = false
	a, err := app.New(c.Config, app.Options{Config: cfg, Registry: plugins.NewInTreeRegistry(), Metrics: prometheus.NewRegistry(),
		SharedInformers: inProcessInformers(t, c)})
	if err != nil {
		t.Fatalf("scheduler: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("scheduler: %v", err)
		}
	})
	select {
	case <-a.Ready():
	case err := <-done:
		t.Fatalf("scheduler stopped: %v", err)
	}
}

// e2eDeployment is a Deployment of replicas pods labelled app=name with a
// named container port; its pods tolerate not-ready and unreachable for
// tolerate seconds instead of admission's default 300.
func e2eDeployment(name string, replicas int32, tolerate int64) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []corev1.Container{{Name: "web", Image: "nginx",
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}},
				},
			},
		},
	}
	if tolerate > 0 {
		for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
			d.Spec.Template.Spec.Tolerations = append(d.Spec.Template.Spec.Tolerations, corev1.Toleration{
				Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(tolerate)})
		}
	}
	return d
}

// waitAvailable waits until the Deployment's status reports every replica
// updated and available for its current generation.
func waitAvailable(t *testing.T, cs kubernetes.Interface, ns, name string, replicas int32, timeout time.Duration) {
	t.Helper()
	ctx := testCtx(t, timeout+5*time.Second)
	eventually(t, timeout, fmt.Sprintf("deployment %s/%s available with %d replicas", ns, name, replicas), func() (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := d.Status
		return s.ObservedGeneration == d.Generation && s.Replicas == replicas && s.UpdatedReplicas == replicas &&
			s.AvailableReplicas == replicas && s.ReadyReplicas == replicas && s.UnavailableReplicas == 0, nil
	})
}

// livePodsOf lists the pods of namespace ns that are not being deleted.
func livePodsOf(t *testing.T, cs kubernetes.Interface, ns string) []corev1.Pod {
	t.Helper()
	list, err := cs.CoreV1().Pods(ns).List(testCtx(t, 10*time.Second), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func nodeTaints(t *testing.T, cs kubernetes.Interface, name string) []corev1.Taint {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(testCtx(t, 10*time.Second), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get node %s: %v", name, err)
	}
	return n.Spec.Taints
}

func hasTaint(taints []corev1.Taint, key string, effect corev1.TaintEffect) bool {
	return slices.ContainsFunc(taints, func(t corev1.Taint) bool { return t.Key == key && t.Effect == effect })
}

// TestControllersE2EDeadNode: a simulated node that stops heartbeating is
// marked Unknown and tainted unreachable after the grace period; its pods
// are evicted once their tolerationSeconds have passed and their
// ReplicaSet recreates them on the remaining nodes, where the Deployment
// becomes fully available again. When the node comes back it is
// untainted.
func TestControllersE2EDeadNode(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	sim := runNodes(t, c, 3)
	runManager(t, c)
	runScheduler(t, c)
	ctx := testCtx(t, 3*time.Minute)

	// The node lifecycle controller removes admission's not-ready taint.
	eventually(t, 30*time.Second, "nodes untainted by the node lifecycle controller", func() (bool, error) {
		for _, n := range sim.NodeNames() {
			if len(nodeTaints(t, cs, n)) != 0 {
				return false, nil
			}
		}
		return true, nil
	})

	ns := newNamespace(t, cs)
	const replicas, tolerate = 6, 3
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, e2eDeployment("web", replicas, tolerate), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	waitAvailable(t, cs, ns, "web", replicas, 60*time.Second)

	dead := sim.NodeNames()[0]
	var onDead []string
	for _, p := range livePodsOf(t, cs, ns) {
		if p.Spec.NodeName == dead {
			onDead = append(onDead, p.Name)
		}
	}
	if len(onDead) == 0 {
		t.Fatalf("no pod on node %s to evict", dead)
	}

	sim.PauseNode(dead)
	paused := time.Now()
	eventually(t, 30*time.Second, "dead node tainted unreachable:NoExecute", func() (bool, error) {
		return hasTaint(nodeTaints(t, cs, dead), corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute), nil
	})
	tainted := time.Since(paused)
	// The last Lease renewal was at most 500 ms before the pause.
	if tainted < 3*time.Second-500*time.Millisecond {
		t.Errorf("tainted %v after the pause, before the 3 s grace period", tainted)
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, dead, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionUnknown {
			t.Errorf("dead node Ready = %s, want Unknown", cond.Status)
		}
	}
	if !hasTaint(node.Spec.Taints, corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule) {
		t.Errorf("dead node taints %v, want unreachable:NoSchedule too", node.Spec.Taints)
	}

	// Not before tolerationSeconds: the pods are still there just after
	// the taint.
	for _, name := range onDead {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			if time.Since(paused) < tainted+tolerate*time.Second-time.Second {
				t.Errorf("pod %s evicted %v after the taint, before its %d s toleration (err %v)", name, time.Since(paused)-tainted, tolerate, err)
			}
		}
	}
	eventually(t, 30*time.Second, "pods of the dead node evicted", func() (bool, error) {
		for _, name := range onDead {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil && p.DeletionTimestamp == nil {
				return false, nil
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return true, nil
	})
	evicted := time.Since(paused)
	if evicted < tainted+tolerate*time.Second-500*time.Millisecond {
		t.Errorf("evicted %v after the taint, want at least the %d s toleration", evicted-tainted, tolerate)
	}

	// The ReplicaSet makes up for them elsewhere: all replicas available,
	// none on the dead node.
	waitAvailable(t, cs, ns, "web", replicas, 60*time.Second)
	live := livePodsOf(t, cs, ns)
	if len(live) != replicas {
		t.Errorf("%d live pods, want %d", len(live), replicas)
	}
	for _, p := range live {
		if p.Spec.NodeName == dead {
			t.Errorf("pod %s is on the dead node", p.Name)
		}
	}

	// The node returns: it is untainted and its evicted pods, confirmed
	// by its kubelet, go away.
	sim.ResumeNode(dead)
	eventually(t, 30*time.Second, "returned node untainted", func() (bool, error) {
		return len(nodeTaints(t, cs, dead)) == 0, nil
	})
	eventually(t, 30*time.Second, "evicted pods gone", func() (bool, error) {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == replicas, err
	})
}

// TestControllersE2EEndpointSlice: a Service's EndpointSlice lists the
// simulated pods of a Deployment with their IPs and the resolved named
// port, and follows a pod becoming unready and ready again and a scale
// down.
func TestControllersE2EEndpointSlice(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	runNodes(t, c, 2)
	runManager(t, c)
	runScheduler(t, c)
	ctx := testCtx(t, 3*time.Minute)
	ns := newNamespace(t, cs)

	if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service: %v", err)
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, e2eDeployment("web", 3, 0), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	waitAvailable(t, cs, ns, "web", 3, 60*time.Second)

	// want is "ip ready|unready" per endpoint, sorted, from the pods.
	want := func(unready string) []string {
		var out []string
		for _, p := range livePodsOf(t, cs, ns) {
			r := "ready"
			if p.Name == unready {
				r = "unready"
			}
			out = append(out, p.Status.PodIP+" "+r)
		}
		sort.Strings(out)
		return out
	}
	slice := func() ([]string, error) {
		list, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil {
			return nil, err
		}
		var out []string
		for _, s := range list.Items {
			if len(s.Ports) != 1 || s.Ports[0].Port == nil || *s.Ports[0].Port != 8080 || ptr.Deref(s.Ports[0].Name, "") != "http" {
				return nil, fmt.Errorf("slice %s ports %v, want http 8080", s.Name, s.Ports)
			}
			for _, ep := range s.Endpoints {
				r := "unready"
				if ptr.Deref(ep.Conditions.Ready, false) {
					r = "ready"
				}
				out = append(out, strings.Join(ep.Addresses, ",")+" "+r)
			}
		}
		sort.Strings(out)
		return out, nil
	}
	expect := func(what string, w []string) {
		t.Helper()
		eventually(t, 20*time.Second, what, func() (bool, error) {
			got, err := slice()
			if err == nil && !slices.Equal(got, w) {
				err = fmt.Errorf("slice endpoints %q, want %q", got, w)
			}
			return err == nil, err
		})
	}
	expect("slice of three ready pods", want(""))

	setReady := func(name string, ready corev1.ConditionStatus) {
		t.Helper()
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range p.Status.Conditions {
			if ct := p.Status.Conditions[i].Type; ct == corev1.PodReady || ct == corev1.ContainersReady {
				p.Status.Conditions[i].Status = ready
				p.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
		for i := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[i].Ready = ready == corev1.ConditionTrue
		}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update status of %s: %v", name, err)
		}
	}
	victim := livePodsOf(t, cs, ns)[0].Name
	setReady(victim, corev1.ConditionFalse)
	expect("pod "+victim+" unready in the slice", want(victim))
	eventually(t, 20*time.Second, "deployment counts two ready", func() (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == 2 && d.Status.AvailableReplicas == 2, err
	})
	setReady(victim, corev1.ConditionTrue)
	expect("pod "+victim+" ready again", want(""))

	// Scaling down removes endpoints; the legacy Endpoints agree.
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 1}}
	if _, err := cs.AppsV1().Deployments(ns).UpdateScale(ctx, "web", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("scale: %v", err)
	}
	waitAvailable(t, cs, ns, "web", 1, 60*time.Second)
	eventually(t, 30*time.Second, "terminated pods gone", func() (bool, error) {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 1, err
	})
	expect("slice of one pod", want(""))
	eventually(t, 20*time.Second, "legacy endpoints of one pod", func() (bool, error) {
		ep, err := cs.CoreV1().Endpoints(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(ep.Subsets) == 1 && len(ep.Subsets[0].Addresses) == 1 && len(ep.Subsets[0].NotReadyAddresses) == 0 &&
			ep.Subsets[0].Addresses[0].IP == livePodsOf(t, cs, ns)[0].Status.PodIP && ep.Subsets[0].Ports[0].Port == 8080, nil
	})
}

// TestControllersE2ENamespaceDeletion: deleting a namespace holding a
// running Deployment, Services and ConfigMaps (and what the controllers
// made from them: ReplicaSets, pods, EndpointSlices, Endpoints, the
// default ServiceAccount, kube-root-ca.crt, events) leaves no key of it
// in etcd.
func TestControllersE2ENamespaceDeletion(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	runNodes(t, c, 2)
	runManager(t, c)
	runScheduler(t, c)
	ctx := testCtx(t, 3*time.Minute)

	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := ns.Name
	// The serviceaccount controller makes the default ServiceAccount that
	// admission needs before pods can be created.
	eventually(t, 30*time.Second, "default serviceaccount", func() (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if _, err := cs.AppsV1().Deployments(name).Create(ctx, e2eDeployment("web", 4, 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, svc := range []string{"web", "web-headless"} {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svc}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
		if svc == "web-headless" {
			s.Spec.ClusterIP = corev1.ClusterIPNone
		}
		if _, err := cs.CoreV1().Services(name).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, cm := range []string{"a", "b"} {
		if _, err := cs.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitAvailable(t, cs, name, "web", 4, 60*time.Second)
	eventually(t, 20*time.Second, "endpointslices of both services", func() (bool, error) {
		list, err := cs.DiscoveryV1().EndpointSlices(name).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) >= 2, err
	})
	before := nsSnapshot(t, c, name)
	for _, prefix := range []string{"/registry/pods/", "/registry/replicasets/", "/registry/endpointslices/", "/registry/configmaps/", "/registry/services/endpoints/"} {
		found := false
		for k := range before {
			found = found || strings.HasPrefix(k, prefix)
		}
		if !found {
			t.Errorf("no key under %s%s before the deletion: the check below would prove nothing", prefix, name)
		}
	}

	// Watch the namespace's key in etcd from now on: its deletion is the
	// moment the namespace controller let go of it.
	nsKey := "/registry/namespaces/" + name
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	etcdEvents := c.Etcd().Watch(wctx, nsKey, clientv3.WithRev(etcdRevision(t, c)+1))
	if err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete namespace: %v", err)
	}
	var deletedAt int64
	for deletedAt == 0 {
		select {
		case resp, ok := <-etcdEvents:
			if !ok || resp.Err() != nil {
				t.Fatalf("etcd watch of %s ended: %v", nsKey, resp.Err())
			}
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					deletedAt = ev.Kv.ModRevision
				}
			}
		case <-time.After(90 * time.Second):
			t.Fatalf("namespace %s not deleted from etcd within 90s", name)
		}
	}
	// At the revision that removed the namespace, nothing of it was left;
	// and nothing was written into it since (the API refuses creates in a
	// namespace that is terminating or gone).
	for _, at := range []int64{deletedAt, 0} {
		if left := nsSnapshotAt(t, c, name, at); len(left) != 0 {
			keys := make([]string, 0, len(left))
			for k := range left {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			t.Errorf("keys of the namespace in etcd at revision %d (0: now): %v", at, keys)
		}
	}
}

// nsSnapshotAt is nsSnapshot as of revision rev (0: the latest).
func nsSnapshotAt(t *testing.T, c *cluster, ns string, rev int64) map[string]int64 {
	t.Helper()
	resp, err := c.Etcd().Get(testCtx(t, 5*time.Second), "/registry/", clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithRev(rev))
	if err != nil {
		t.Fatalf("etcd list at %d: %v", rev, err)
	}
	out := map[string]int64{}
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		if strings.Contains(k, "/"+ns+"/") || strings.HasSuffix(k, "/"+ns) {
			out[k] = kv.ModRevision
		}
	}
	return out
}

// TestControllersE2ERestart: a controller manager stopped in the middle
// of a rollout and started again converges to exactly the declared pods:
// one ReplicaSet a template, no pod created twice, and a scale made while
// no manager ran is honoured.
func TestControllersE2ERestart(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	runNodes(t, c, 3)
	runScheduler(t, c)
	ctx := testCtx(t, 3*time.Minute)
	ns := newNamespace(t, cs)

	// Count every pod ever created in the namespace.
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var (
		mu      sync.Mutex
		created = map[string]bool{}
	)
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Added {
				mu.Lock()
				created[p.Name] = true
				mu.Unlock()
			}
		}
	}()
	createdCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(created)
	}

	stop := runManager(t, c)
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, e2eDeployment("web", 30, 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Stop it once some, not all, pods exist.
	eventually(t, 30*time.Second, "first pods created", func() (bool, error) { return createdCount() >= 5, nil })
	stop()
	atStop := createdCount()

	// While no manager runs: scale up, and delete one pod by hand.
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Replicas = ptr.To[int32](40)
	if _, err := cs.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := livePodsOf(t, cs, ns)[0].Name
	if err := cs.CoreV1().Pods(ns).Delete(ctx, deleted, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	runManager(t, c)
	waitAvailable(t, cs, ns, "web", 40, 90*time.Second)
	rss, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rss.Items) != 1 || ptr.Deref(rss.Items[0].Spec.Replicas, -1) != 40 {
		t.Errorf("%d ReplicaSets (first: %v replicas), want one of 40", len(rss.Items), rss.Items)
	}
	eventually(t, 30*time.Second, "exactly 40 pods", func() (bool, error) {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 40, err
	})
	// 40 pods plus the one deleted by hand: any more were created twice
	// and deleted again.
	if got := createdCount(); got != 41 {
		t.Errorf("%d pods created in all (%d before the stop), want 41", got, atStop)
	}
	for _, p := range livePodsOf(t, cs, ns) {
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.Name != rss.Items[0].Name {
			t.Errorf("pod %s controller %v, want ReplicaSet %s", p.Name, ref, rss.Items[0].Name)
		}
	}
}
