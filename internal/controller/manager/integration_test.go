package manager_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/polymorphichelpers"

	"github.com/skiff-sh/skiff/internal/controller/manager"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// kubelet is the tests' stand-in for nodes: it binds unscheduled pods of
// one namespace round-robin to three node names, marks bound pods Running
// and Ready readyAfter after it first saw them, and finishes graceful
// deletions at once.
type kubelet struct {
	client     kubernetes.Interface
	namespace  string
	readyAfter time.Duration

	mu    sync.Mutex
	seen  map[string]time.Time
	nodes int
}

func startKubelet(t *testing.T, ctx context.Context, client kubernetes.Interface, namespace string, readyAfter time.Duration) {
	k := &kubelet{client: client, namespace: namespace, readyAfter: readyAfter, seen: map[string]time.Time{}}
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				k.step(ctx)
			}
		}
	}()
}

func (k *kubelet) step(ctx context.Context) {
	pods, err := k.client.CoreV1().Pods(k.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	now := time.Now()
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case p.DeletionTimestamp != nil:
			zero := int64(0)
			_ = k.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &p.UID}})
		case p.Spec.NodeName == "":
			k.mu.Lock()
			node := fmt.Sprintf("node-%d", k.nodes%3)
			k.nodes++
			k.mu.Unlock()
			_ = k.client.CoreV1().Pods(p.Namespace).Bind(ctx, &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
				Target:     corev1.ObjectReference{Kind: "Node", Name: node},
			}, metav1.CreateOptions{})
		case p.Status.Phase != corev1.PodRunning:
			k.mu.Lock()
			first, ok := k.seen[string(p.UID)]
			if !ok {
				first = now
				k.seen[string(p.UID)] = now
			}
			k.mu.Unlock()
			if now.Sub(first) < k.readyAfter {
				continue
			}
			ts := metav1.NewTime(now)
			p.Status.Phase = corev1.PodRunning
			p.Status.StartTime = &ts
			p.Status.Conditions = []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: ts},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: ts},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: ts},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: ts},
			}
			_, _ = k.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		}
	}
}

// metrics is the one registry every manager of this test binary publishes
// to: client-go's workqueue.SetProvider takes effect once a process, so the
// first manager's registry is the one that sees every queue.
var metrics = prometheus.NewRegistry()

// startManager runs a controller manager against c until the returned
// stop is called (or the test ends).
func startManager(t *testing.T, config *rest.Config, opts manager.Options) (stop func()) {
	t.Helper()
	opts.Metrics = metrics
	m, err := manager.New(config, opts)
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
				t.Errorf("manager.Start: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func newNamespace(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
}

func deploymentOf(name string, replicas int32, image string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	maxUnavailable := intstr.FromInt32(2)
	maxSurge := intstr.FromInt32(3)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &maxUnavailable, MaxSurge: &maxSurge},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
			},
		},
	}
}

// rolledOut asks kubectl's own status viewer whether the rollout is done.
func rolledOut(t *testing.T, d *appsv1.Deployment) (string, bool) {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		t.Fatalf("to unstructured: %v", err)
	}
	msg, done, err := (&polymorphichelpers.DeploymentStatusViewer{}).Status(&unstructured.Unstructured{Object: u}, 0)
	if err != nil {
		t.Fatalf("rollout status: %v", err)
	}
	return msg, done
}

// waitRolledOut waits until kubectl would say "successfully rolled out"
// and the namespace has exactly want running, non-terminating pods with
// the image.
func waitRolledOut(t *testing.T, client kubernetes.Interface, ns, name string, want int, image string, timeout time.Duration) time.Duration {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	var last string
	for time.Since(start) < timeout {
		d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get deployment: %v", err)
		}
		msg, done := rolledOut(t, d)
		last = msg
		if done {
			pods := livePods(t, client, ns)
			ok := len(pods) == want
			for _, p := range pods {
				if p.Spec.Containers[0].Image != image {
					ok = false
				}
			}
			if ok {
				return time.Since(start)
			}
			last = fmt.Sprintf("%d live pods, want %d with %s", len(pods), want, image)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("deployment %s not rolled out after %v: %s", name, timeout, strings.TrimSpace(last))
	return 0
}

func livePods(t *testing.T, client kubernetes.Interface, ns string) []corev1.Pod {
	t.Helper()
	list, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
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

func availablePods(pods []corev1.Pod) int {
	n := 0
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

func TestDeploymentLifecycle(t *testing.T) {
	c := testapiserver.Start(t)
	client := c.Clientset()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	const ns = "lifecycle"
	newNamespace(t, client, ns)
	startKubelet(t, ctx, client, ns, 200*time.Millisecond)
	stop := startManager(t, c.Config, manager.Options{Controllers: manager.Selection{"deployment", "replicaset"}, Address: "127.0.0.1:0"})

	// A Deployment of 10 replicas becomes available.
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, deploymentOf("web", 10, "image:a"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	took := waitRolledOut(t, client, ns, "web", 10, "image:a", 60*time.Second)
	t.Logf("10 replicas available in %v", took)

	// A rolling update A→B never drops below replicas-maxUnavailable.
	sampleMin := func(during func()) int {
		minSeen := 1 << 30
		sctx, scancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sctx.Err() == nil {
				if n := availablePods(livePods(t, client, ns)); n < minSeen {
					minSeen = n
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		during()
		scancel()
		wg.Wait()
		return minSeen
	}
	setImage := func(image string) {
		d, err := client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		d.Spec.Template.Spec.Containers[0].Image = image
		d.Annotations = map[string]string{"kubernetes.io/change-cause": "set image " + image}
		if _, err := client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update: %v", err)
		}
	}
	minAvail := sampleMin(func() {
		setImage("image:b")
		took := waitRolledOut(t, client, ns, "web", 10, "image:b", 60*time.Second)
		t.Logf("rolling update A→B in %v", took)
	})
	if minAvail < 8 {
		t.Errorf("available pods dropped to %d during the rolling update; want >= 8 (replicas - maxUnavailable)", minAvail)
	}
	t.Logf("minimum available during A→B: %d", minAvail)

	rss, err := client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(rss.Items) != 2 {
		t.Fatalf("replica sets after one update = %v, %v; want 2", rss, err)
	}

	// kubectl rollout undo (its own rollback code) returns to A.
	rb, err := polymorphichelpers.RollbackerFor(appsv1.SchemeGroupVersion.WithKind("Deployment").GroupKind(), client)
	if err != nil {
		t.Fatalf("RollbackerFor: %v", err)
	}
	d, _ := client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	msg, err := rb.Rollback(d, nil, 0, cmdutil.DryRunNone)
	if err != nil {
		t.Fatalf("rollout undo: %v", err)
	}
	t.Logf("rollout undo: %s", msg)
	waitRolledOut(t, client, ns, "web", 10, "image:a", 60*time.Second)
	d, _ = client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if got := d.Annotations["deployment.kubernetes.io/revision"]; got != "3" {
		t.Errorf("revision after undo = %q, want 3", got)
	}
	rss, _ = client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if len(rss.Items) != 2 {
		t.Errorf("undo made %d replica sets, want the old one reused (2)", len(rss.Items))
	}

	// Scale to 0 and back.
	// The controllers write the Deployment's status meanwhile, so a scale
	// read a moment ago may be stale: retry on conflict, as clients do.
	scale := func(n int32) {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			s, err := client.AppsV1().Deployments(ns).GetScale(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Spec.Replicas = n
			_, err = client.AppsV1().Deployments(ns).UpdateScale(ctx, "web", s, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("scale to %d: %v", n, err)
		}
	}
	scale(0)
	waitRolledOut(t, client, ns, "web", 0, "image:a", 30*time.Second)
	scale(5)
	waitRolledOut(t, client, ns, "web", 5, "image:a", 30*time.Second)

	// Deleting a pod brings a new one.
	pods := livePods(t, client, ns)
	if err := client.CoreV1().Pods(ns).Delete(ctx, pods[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		pods2 := livePods(t, client, ns)
		replaced := len(pods2) == 5
		for _, p := range pods2 {
			if p.Name == pods[0].Name {
				replaced = false
			}
		}
		if replaced && availablePods(pods2) == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deleted pod not replaced: %d live pods", len(pods2))
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Killing the manager mid-change and starting another converges
	// without duplicates.
	scale(12)
	// Stop once the ReplicaSet has been scaled, while its pods are being
	// created.
	waitFor(t, 30*time.Second, "the replica set scaled to 12", func() bool {
		rss, err := client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, rs := range rss.Items {
			if rs.Spec.Replicas != nil && *rs.Spec.Replicas == 12 {
				return true
			}
		}
		return false
	})
	stop()
	startManager(t, c.Config, manager.Options{Controllers: manager.Selection{"deployment", "replicaset"}})
	waitRolledOut(t, client, ns, "web", 12, "image:a", 30*time.Second)
	// The new manager's ReplicaSet controller has settled once it reports
	// the 12 pods it sees in the status of the current generation: a
	// duplicate created by it would be among the pods listed after that.
	waitFor(t, 30*time.Second, "the replica set's status to report 12 available pods", func() bool {
		rss, err := client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, rs := range rss.Items {
			if rs.Spec.Replicas != nil && *rs.Spec.Replicas == 12 && rs.Status.ObservedGeneration == rs.Generation &&
				rs.Status.Replicas == 12 && rs.Status.AvailableReplicas == 12 {
				return true
			}
		}
		return false
	})
	if n := len(livePods(t, client, ns)); n != 12 {
		t.Errorf("after restart: %d live pods, want 12", n)
	}
	rss, _ = client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if len(rss.Items) != 2 {
		t.Errorf("after restart: %d replica sets, want 2", len(rss.Items))
	}

	// Events with upstream's reasons and messages.
	events, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	reasons := map[string]bool{}
	scaledUp := false
	for _, e := range events.Items {
		reasons[e.Reason] = true
		if e.Reason == "ScalingReplicaSet" && strings.HasPrefix(e.Message, "Scaled up replica set web-") && strings.Contains(e.Message, " from 0 to ") {
			scaledUp = true
		}
	}
	for _, r := range []string{"ScalingReplicaSet", "SuccessfulCreate", "SuccessfulDelete"} {
		if !reasons[r] {
			t.Errorf("no %s event; reasons seen: %v", r, reasons)
		}
	}
	if !scaledUp {
		t.Errorf("no \"Scaled up replica set web-... from 0 to N\" event")
	}
}

func TestLeaderElection(t *testing.T) {
	c := testapiserver.Start(t)
	client := c.Clientset()
	ctx := context.Background()
	opts := manager.Options{
		Controllers: manager.Selection{"replicaset"}, LeaderElect: true, Identity: "first",
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond,
	}
	stopFirst := startManager(t, c.Config, opts)
	waitHolder := func(want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			l, err := client.CoordinationV1().Leases("kube-system").Get(ctx, "kube-controller-manager", metav1.GetOptions{})
			if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == want {
				return
			}
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatalf("get lease: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("lease not held by %q", want)
	}
	waitHolder("first")
	second := opts
	second.Identity = "second"
	// The second manager's requests to the Lease are observed: it reads
	// the Lease on each try and writes it only once it takes it over.
	leasePath := "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"
	var (
		mu            sync.Mutex
		reads, writes int
		tried         = make(chan struct{})
	)
	secondConfig := rest.CopyConfig(c.Config)
	secondConfig.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if req.URL.Path == leasePath && err == nil {
				mu.Lock()
				if req.Method == http.MethodGet && resp.StatusCode == http.StatusOK {
					reads++
					if reads == 2 {
						close(tried)
					}
				} else if req.Method != http.MethodGet {
					writes++
				}
				mu.Unlock()
			}
			return resp, err
		})
	})
	startManager(t, secondConfig, second)
	// Two reads: the first try ended without taking the Lease.
	select {
	case <-tried:
	case <-time.After(20 * time.Second):
		t.Fatal("the second manager never tried to take the Lease")
	}
	mu.Lock()
	w := writes
	mu.Unlock()
	if w != 0 {
		t.Fatalf("the second manager wrote the Lease %d times while the first held it", w)
	}
	waitHolder("first") // the second waits
	stopFirst()         // releases the lease on the way out
	waitHolder("second")
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// waitFor polls cond until it holds.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAllControllers runs every registered controller (the default "*")
// and checks that they start, stay up and still roll a Deployment out.
func TestAllControllers(t *testing.T) {
	c := testapiserver.Start(t)
	client := c.Clientset()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	const ns = "all"
	newNamespace(t, client, ns)
	startKubelet(t, ctx, client, ns, 0)
	m, err := manager.New(c.Config, manager.Options{Address: "127.0.0.1:0", Controller: manager.DefaultControllerOptions(), Metrics: metrics})
	if err != nil {
		t.Fatalf("manager.New: %v", err)
	}
	if got := len(m.Enabled()); got != len(manager.Controllers()) {
		t.Errorf("enabled %d controllers, want every one of %d", got, len(manager.Controllers()))
	}
	mctx, mcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Start(mctx) }()
	t.Cleanup(func() {
		mcancel()
		if err := <-done; err != nil {
			t.Errorf("manager.Start: %v", err)
		}
	})
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, deploymentOf("web", 3, "image:a"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	took := waitRolledOut(t, client, ns, "web", 3, "image:a", 60*time.Second)
	t.Logf("with every controller: 3 replicas available in %v", took)
	// Node IPAM gives a new Node the first /24 of 10.42.0.0/16.
	if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ipam-node"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node: %v", err)
	}
	waitFor(t, 30*time.Second, "the node's pod CIDR", func() bool {
		n, err := client.CoreV1().Nodes().Get(ctx, "ipam-node", metav1.GetOptions{})
		return err == nil && n.Spec.PodCIDR == "10.42.0.0/24" && slices.Equal(n.Spec.PodCIDRs, []string{"10.42.0.0/24"})
	})
	select {
	case err := <-done:
		t.Fatalf("manager stopped early: %v", err)
	default:
	}

	// The workqueue metrics are served with upstream's names.
	<-m.Ready()
	resp, err := http.Get("http://" + m.Addr() + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`workqueue_adds_total{name="deployment"}`, `workqueue_depth{name="replicaset"}`, `workqueue_work_duration_seconds_bucket{name="deployment"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	resp, err = http.Get("http://" + m.Addr() + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz = %v, %v", resp, err)
	}
}
