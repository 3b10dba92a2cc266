// Package upstream runs upstream Kubernetes components against Skiff.
//
// TestUpstreamSchedulerAndControllerManager starts `skiff server` with its
// own scheduler and controllers turned off, two simulated nodes (`skiff
// simulate`), and upstream kube-scheduler and kube-controller-manager
// v1.37.2 under the identities upstream gives them, then checks that their
// informers sync, that they never meet a resource Skiff does not serve, and
// that they schedule and reconcile a Deployment, a Job, a DaemonSet and a
// StatefulSet.
//
// TestAuthCanIMatchesUpstream (authz_test.go) asks `kubectl auth can-i`
// the same questions of skiff server and of upstream's kube-apiserver.
//
// TestProxyConformanceAgnhost (proxy_test.go) replays upstream's proxy
// conformance tests against `agnhost porter` in a network namespace.
//
// The upstream binaries are built by `hack/upstream/build.sh kube-scheduler
// kube-controller-manager` (`make upstream-components-test` builds them and
// runs this test); the test skips unless they are in $SKIFF_UPSTREAM_BIN or
// the build script's cache. It uses $SKIFF_BINARY when set, else builds
// skiff.
package upstream

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/pki"
)

const (
	upstreamBinEnv = "SKIFF_UPSTREAM_BIN"
	// The build script's default cache (hack/upstream/build.sh).
	upstreamCache = "/var/cache/skiff-upstream/v1.37.2/bin"
	binaryEnv     = "SKIFF_BINARY"
	nodes         = 2
)

// Lines that must never appear in an upstream component's log: a resource
// or group version it expects that Skiff does not serve.
var notFound = []string{"could not find the requested resource", "the server could not find"}

func TestUpstreamSchedulerAndControllerManager(t *testing.T) {
	bin := upstreamBin(t)
	skiff := skiffBinary(t)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	pkiDir := filepath.Join(dataDir, "pki")

	server := start(t, dir, "skiff-server", skiff, "server", "--data-dir", dataDir,
		"--disable-agent", "--disable-cluster-dns", "--disable-scheduler", "--disable-controller-manager",
		"--https-listen-port", "0", "--etcd-client-port", "0", "--etcd-peer-port", "0")
	admin := filepath.Join(dataDir, "admin.kubeconfig")
	waitFor(t, 90*time.Second, "skiff server ready", server, func() bool { return strings.Contains(server.output(), "Skiff is ready") })
	cfg, err := clientcmd.BuildConfigFromFlags("", admin)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)

	sim := start(t, dir, "skiff-simulate", skiff, "simulate", "--kubeconfig", admin, "--nodes", fmt.Sprint(nodes))
	waitFor(t, 60*time.Second, "simulated nodes Ready", sim, func() bool { return strings.Contains(sim.output(), "simulated nodes Ready") })

	// Each component gets the client certificate `skiff server` issued for
	// its identity (system:kube-scheduler, system:kube-controller-manager),
	// as kubeadm gives upstream's, and uses it for delegated authentication
	// and authorization too.
	schedKC := writeKubeconfig(t, dir, cfg.Host, pkiDir, "kube-scheduler")
	kcmKC := writeKubeconfig(t, dir, cfg.Host, pkiDir, "kube-controller-manager")
	schedPort, kcmPort := freePort(t), freePort(t)

	began := time.Now()
	sched := start(t, dir, "kube-scheduler", filepath.Join(bin, "kube-scheduler"),
		"--kubeconfig", schedKC, "--authentication-kubeconfig", schedKC, "--authorization-kubeconfig", schedKC,
		"--bind-address", "127.0.0.1", "--secure-port", fmt.Sprint(schedPort), "--leader-elect=true", "-v=3")
	kcm := start(t, dir, "kube-controller-manager", filepath.Join(bin, "kube-controller-manager"),
		"--kubeconfig", kcmKC, "--authentication-kubeconfig", kcmKC, "--authorization-kubeconfig", kcmKC,
		"--bind-address", "127.0.0.1", "--secure-port", fmt.Sprint(kcmPort), "--leader-elect=true",
		"--controllers=*", "--use-service-account-credentials",
		"--service-account-private-key-file", filepath.Join(pkiDir, "sa.key"),
		"--root-ca-file", filepath.Join(pkiDir, "ca.crt"),
		"--cluster-signing-cert-file", filepath.Join(pkiDir, "ca.crt"),
		"--cluster-signing-key-file", filepath.Join(pkiDir, "ca.key"),
		"-v=3")

	// The scheduler is ready once it leads and its informers' handlers
	// have synced (readyz's sched-handler-sync); it schedules nothing
	// before.
	waitFor(t, 90*time.Second, "kube-scheduler /readyz", sched, func() bool { return healthy(schedPort, "/readyz") })
	waitFor(t, 90*time.Second, "kube-controller-manager /healthz", kcm, func() bool { return healthy(kcmPort, "/healthz") })
	// Every informer has listed, every controller that waits for its
	// caches got them, and the garbage collector watches every resource.
	waitFor(t, 120*time.Second, "every informer synced", kcm, func() bool {
		return allSynced(kcm.output()) == nil && allSynced(sched.output()) == nil &&
			strings.Contains(kcm.output(), gcSynced)
	})
	synced := time.Since(began)
	t.Logf("upstream components ready, every informer synced, in %v", synced.Round(time.Millisecond))

	ctx := t.Context()
	ns := "upstream"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Pods are admitted once the serviceaccount controller made `default`.
	waitFor(t, 60*time.Second, "ServiceAccount upstream/default", kcm, func() bool {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	createWorkloads(t, client, ns)
	created := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pending, err := notReconciled(ctx, client, ns)
		if err != nil {
			return false, err
		}
		for _, p := range []*proc{sched, kcm} {
			if p.exited() {
				return false, fmt.Errorf("%s exited", p.name)
			}
		}
		if len(pending) > 0 {
			t.Logf("waiting for: %s", strings.Join(pending, "; "))
		}
		return len(pending) == 0, nil
	}); err != nil {
		t.Fatalf("workloads not reconciled: %v\n%s", err, podSummary(ctx, client, ns))
	}
	t.Logf("Deployment, Job, DaemonSet, StatefulSet reconciled in %v", time.Since(created).Round(time.Millisecond))

	// Every pod was bound by upstream's scheduler (Skiff's is off).
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	events, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Scheduled"})
	if err != nil {
		t.Fatal(err)
	}
	scheduledBy := map[string]string{}
	for _, e := range events.Items {
		scheduledBy[e.InvolvedObject.Name] = e.Source.Component + e.ReportingController
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			t.Errorf("pod %s is not bound", p.Name)
		}
		if by := scheduledBy[p.Name]; !strings.Contains(by, "default-scheduler") {
			t.Errorf("pod %s: Scheduled event from %q, want default-scheduler", p.Name, by)
		}
	}

	for _, p := range []*proc{sched, kcm} {
		out := p.output()
		if err := allSynced(out); err != nil {
			t.Errorf("%s: %v", p.name, err)
		}
		for _, s := range append(notFound, "Unable to sync caches", "Failed to watch",
			"not all resource monitors could be synced", "failed to discover", "is forbidden") {
			if lines := grep(out, s); len(lines) > 0 {
				t.Errorf("%s logged %q %d times, first: %s", p.name, s, len(lines), lines[0])
			}
		}
		t.Logf("%s informers synced: %s", p.name, strings.Join(populated(out), ", "))
	}
	t.Logf("kube-controller-manager controllers started: %s", strings.Join(started(kcm.output()), ", "))
}

// createWorkloads makes a Deployment of 3, a DaemonSet (one pod a node), a
// StatefulSet of 2 and a Job of 2 completions whose simulated pods succeed
// after a second.
func createWorkloads(t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	ctx := t.Context()
	podSpec := func(app string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
		}
	}
	selector := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: selector("web"), Template: podSpec("web")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec:       appsv1.DaemonSetSpec{Selector: selector("agent"), Template: podSpec("agent")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), ServiceName: "db", Selector: selector("db"), Template: podSpec("db")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job := podSpec("batch")
	job.Annotations = map[string]string{"simulate.skiff.sh/run-seconds": "1"}
	job.Spec.RestartPolicy = corev1.RestartPolicyNever
	if _, err := client.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "batch"},
		Spec:       batchv1.JobSpec{Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2), Template: job},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// notReconciled names each workload not yet where its controller must
// bring it.
func notReconciled(ctx context.Context, client kubernetes.Interface, ns string) ([]string, error) {
	var pending []string
	d, err := client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != 3 || d.Status.AvailableReplicas != 3 {
		pending = append(pending, fmt.Sprintf("Deployment web updated %d available %d of 3", d.Status.UpdatedReplicas, d.Status.AvailableReplicas))
	}
	ds, err := client.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if ds.Status.DesiredNumberScheduled != nodes || ds.Status.NumberReady != nodes || ds.Status.NumberAvailable != nodes {
		pending = append(pending, fmt.Sprintf("DaemonSet agent desired %d ready %d of %d", ds.Status.DesiredNumberScheduled, ds.Status.NumberReady, nodes))
	}
	ss, err := client.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if ss.Status.ObservedGeneration != ss.Generation || ss.Status.ReadyReplicas != 2 || ss.Status.AvailableReplicas != 2 {
		pending = append(pending, fmt.Sprintf("StatefulSet db ready %d of 2", ss.Status.ReadyReplicas))
	}
	j, err := client.BatchV1().Jobs(ns).Get(ctx, "batch", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	complete := slices.ContainsFunc(j.Status.Conditions, func(c batchv1.JobCondition) bool {
		return c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue
	})
	if !complete || j.Status.Succeeded != 2 {
		pending = append(pending, fmt.Sprintf("Job batch succeeded %d of 2, complete %v", j.Status.Succeeded, complete))
	}
	return pending, nil
}

func podSummary(ctx context.Context, client kubernetes.Interface, ns string) string {
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s node=%q phase=%s\n", p.Name, p.Spec.NodeName, p.Status.Phase)
	}
	return b.String()
}

// The garbage collector's line once it watches every resource that
// discovery lists.
const gcSynced = "Garbage collector: all resource monitors have synced"

var (
	// klog's text format: the message is quoted, the key/values follow.
	waitingRE  = regexp.MustCompile(`"Waiting for caches to sync"`)
	syncedRE   = regexp.MustCompile(`"Caches are synced"`)
	startRE    = regexp.MustCompile(`"Starting reflector" type="([^"]*)" resyncPeriod="[^"]*" reflector="([^"]*)"`)
	populateRE = regexp.MustCompile(`"Caches populated" type="([^"]*)" reflector="([^"]*)"`)
	controlRE  = regexp.MustCompile(`"Controller starting\.\.\." controller="([^"]*)"`)
)

// allSynced checks a component's log (at -v=3): every reflector started
// ("Starting reflector") has listed ("Caches populated"), and every
// "Waiting for caches to sync" (client-go's WaitForNamedCacheSync) was
// followed by its "Caches are synced".
func allSynced(out string) error {
	reflectors := map[string]int{}
	waiting := 0
	for _, line := range strings.Split(out, "\n") {
		if m := startRE.FindStringSubmatch(line); m != nil {
			reflectors[m[1]+" "+m[2]]++
		}
		if m := populateRE.FindStringSubmatch(line); m != nil {
			reflectors[m[1]+" "+m[2]]--
		}
		if waitingRE.MatchString(line) {
			waiting++
		}
		if syncedRE.MatchString(line) {
			waiting--
		}
	}
	var unsynced []string
	for r, n := range reflectors {
		if n > 0 {
			unsynced = append(unsynced, r)
		}
	}
	slices.Sort(unsynced)
	switch {
	case len(reflectors) == 0:
		return fmt.Errorf("no reflector started yet")
	case len(unsynced) > 0:
		return fmt.Errorf("informers not synced: %s", strings.Join(unsynced, ", "))
	case waiting > 0:
		return fmt.Errorf("%d cache waits not satisfied", waiting)
	}
	return nil
}

// started lists the controllers kube-controller-manager started.
func started(out string) []string {
	var names []string
	for _, line := range strings.Split(out, "\n") {
		if m := controlRE.FindStringSubmatch(line); m != nil {
			names = append(names, m[1])
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// populated lists the types whose reflectors listed.
func populated(out string) []string {
	var types []string
	for _, line := range strings.Split(out, "\n") {
		if m := populateRE.FindStringSubmatch(line); m != nil {
			types = append(types, m[1])
		}
	}
	slices.Sort(types)
	return slices.Compact(types)
}

func grep(out, s string) []string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			lines = append(lines, sc.Text())
		}
	}
	return lines
}

func upstreamBin(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(upstreamBinEnv)
	if dir == "" {
		dir = upstreamCache
	}
	for _, name := range []string{"kube-scheduler", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Skipf("upstream %s v1.37.2 not built in %s (set %s, or run `make upstream-components-test`, which builds it with hack/upstream/build.sh)", name, dir, upstreamBinEnv)
		}
	}
	return dir
}

func skiffBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv(binaryEnv); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "skiff")
	build := exec.Command("make", "--no-print-directory", "build", "BIN="+bin)
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build skiff: %v\n%s", err, out)
	}
	return bin
}

// writeKubeconfig writes a kubeconfig for the client certificate
// pki/<name>.crt that skiff server issued.
func writeKubeconfig(t *testing.T, dir, server, pkiDir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name+".kubeconfig")
	if err := pki.WriteFileKubeconfig(path, server, pkiDir, name); err != nil {
		t.Fatal(err)
	}
	return path
}

func healthy(port int, path string) bool {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d%s", port, path))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// proc is a program the test runs; its output is kept in memory and, when
// the test fails or SKIFF_UPSTREAM_LOGS names a directory, written there.
type proc struct {
	name string
	mu   sync.Mutex
	buf  bytes.Buffer
	done chan struct{}
	err  error
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.Write(b)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.String()
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func start(t *testing.T, dir, name, path string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, done: make(chan struct{})}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = p, p
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	// Cleanups run last-registered first: components stop before the
	// server they talk to.
	t.Cleanup(func() {
		if !p.exited() {
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-p.done
			}
		}
		logs := os.Getenv("SKIFF_UPSTREAM_LOGS")
		if logs == "" && t.Failed() {
			logs = filepath.Join(os.TempDir(), "skiff-upstream-logs")
		}
		if logs != "" {
			_ = os.MkdirAll(logs, 0o755)
			file := filepath.Join(logs, name+".log")
			if err := os.WriteFile(file, []byte(p.output()), 0o644); err == nil {
				t.Logf("%s log: %s", name, file)
			}
		}
	})
	return p
}

// waitFor polls cond until it holds; it fails the test if p exits first or
// the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, p *proc, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if p.exited() {
			t.Fatalf("%s exited (%v) while waiting for %s:\n%s", p.name, p.err, what, tail(p.output(), 60))
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v:\n%s", what, timeout, tail(p.output(), 60))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
