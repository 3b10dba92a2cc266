package controllers_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/controller/manager"
	"github.com/skiff-sh/skiff/internal/scheduler/app"
	"github.com/skiff-sh/skiff/internal/scheduler/config"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins"
	"github.com/skiff-sh/skiff/internal/simulate"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// nodes is the size of the simulated cluster of every benchmark.
const nodes = 100

// TestMain silences klog: the API server, the simulator and client-go log
// to stderr, which go test interleaves with the benchmark lines.
func TestMain(m *testing.M) {
	fs := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	os.Exit(m.Run())
}

// qpsSettings are the controller manager's --kube-api-qps values each
// benchmark runs with (burst twice as much): its default, which paces pod
// creation, and one high enough that it does not.
var qpsSettings = []int{manager.DefaultQPS, 1000}

// BenchmarkDeployment1000 measures the time from the create of one
// Deployment of 1,000 replicas until its status reports 1,000 available
// replicas (seen through a watch).
func BenchmarkDeployment1000(b *testing.B) {
	for _, qps := range qpsSettings {
		b.Run(fmt.Sprintf("qps=%d", qps), func(b *testing.B) { benchmarkDeployments(b, qps, 1, 1000) })
	}
}

// BenchmarkDeployments100x30 measures the time from the first create of
// 100 Deployments of 30 replicas (made by 4 concurrent clients) until every
// one reports 30 available replicas.
func BenchmarkDeployments100x30(b *testing.B) {
	for _, qps := range qpsSettings {
		b.Run(fmt.Sprintf("qps=%d", qps), func(b *testing.B) { benchmarkDeployments(b, qps, 100, 30) })
	}
}

func benchmarkDeployments(b *testing.B, qps, deployments int, replicas int32) {
	env := startEnv(b, qps)
	var total, cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ns := fmt.Sprintf("bench-%d", i)
		if _, err := env.client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatalf("create namespace: %v", err)
		}
		waitServiceAccount(b, env.client, ns)
		cpu0 := env.cm.cpu(b)
		d := env.rollOut(b, ns, deployments, replicas)
		total += d
		cpu += env.cm.cpu(b) - cpu0
		b.StopTimer()
		env.deleteNamespace(b, ns)
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s_to_available")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cm_cpu_s")
	b.ReportMetric(float64(replicas)*float64(deployments)*float64(b.N)/total.Seconds(), "pods_available/s")
	hwm, rss := env.cm.memory(b)
	b.ReportMetric(float64(hwm)/(1<<20), "cm_peak_rss_MiB")
	b.ReportMetric(float64(rss)/(1<<20), "cm_rss_MiB")
	b.ReportMetric(float64(env.sim.Stats().Errors), "sim_errors")
}

// env is one cluster: API server and etcd (in process), 100 simulated
// nodes, the binder, and the controller manager process.
type env struct {
	client kubernetes.Interface
	sim    *simulate.Simulator
	cm     *process
}

func startEnv(b *testing.B, qps int) *env {
	b.Helper()
	c := testapiserver.Start(b)
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatalf("client: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	b.Cleanup(func() { cancel(); wg.Wait() })

	sim := simulate.New(client, simulate.Options{Nodes: nodes, Workers: 16})
	simDone := make(chan error, 1)
	wg.Go(func() { simDone <- sim.Start(ctx) })
	select {
	case <-sim.Ready():
	case err := <-simDone:
		b.Fatalf("simulator: %v", err)
	case <-time.After(2 * time.Minute):
		b.Fatal("simulated nodes not Ready after 2m")
	}
	if *binder {
		wg.Go(func() { runBinder(ctx, client, sim.NodeNames()) })
	} else {
		startScheduler(b, ctx, &wg, c.Config)
	}

	cm := startControllerManager(b, c.Kubeconfig(), qps)
	return &env{client: client, sim: sim, cm: cm}
}

// rollOut creates the Deployments in ns and returns the time until all
// report every replica available.
func (e *env) rollOut(b *testing.B, ns string, deployments int, replicas int32) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	factory := informers.NewSharedInformerFactoryWithOptions(e.client, 0, informers.WithNamespace(ns))
	// Shutdown waits for the informers, which stop with ctx.
	defer func() { cancel(); factory.Shutdown() }()
	inf := factory.Apps().V1().Deployments().Informer()
	var (
		mu        sync.Mutex
		available = map[string]bool{}
		done      = make(chan struct{})
	)
	check := func(obj any) {
		d, ok := obj.(*appsv1.Deployment)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		ok = d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == replicas && d.Status.UpdatedReplicas == replicas
		if ok && !available[d.Name] {
			available[d.Name] = true
			if len(available) == deployments {
				close(done)
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: check, UpdateFunc: func(_, o any) { check(o) }}); err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	start := time.Now()
	var (
		wg   sync.WaitGroup
		errs = make(chan error, deployments)
		next = make(chan int, deployments)
	)
	for i := range deployments {
		next <- i
	}
	close(next)
	for range min(4, deployments) {
		wg.Go(func() {
			for i := range next {
				if _, err := e.client.AppsV1().Deployments(ns).Create(ctx, deployment(fmt.Sprintf("app-%d", i), replicas), metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("create deployment: %v", err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		mu.Lock()
		n := len(available)
		mu.Unlock()
		b.Fatalf("%d of %d deployments available after %v", n, deployments, time.Since(start))
	}
	return time.Since(start)
}

// deleteNamespace deletes ns and waits until the namespace controller has
// emptied and removed it, so that the next iteration starts clean.
func (e *env) deleteNamespace(b *testing.B, ns string) {
	b.Helper()
	ctx := context.Background()
	if err := e.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		b.Fatalf("delete namespace: %v", err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		_, err := e.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("namespace %s not gone after 5m (last error %v)", ns, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func waitServiceAccount(b *testing.B, client kubernetes.Interface, ns string) {
	b.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(context.Background(), "default", metav1.GetOptions{})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("no default serviceaccount in %s: %v", ns, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers:                    []corev1.Container{{Name: "app", Image: "nginx"}},
				},
			},
		},
	}
}

// binder replaces the scheduler by runBinder, to see what scheduling
// costs (and as the benchmarks ran before Skiff had a scheduler loop).
var binder = flag.Bool("binder", false, "bind pods round-robin instead of running Skiff's scheduler")

// startScheduler runs Skiff's scheduler in process (internal/scheduler/app
// with the default profile and its default client rates, without leader
// election) until ctx is done.
func startScheduler(b *testing.B, ctx context.Context, wg *sync.WaitGroup, restConfig *rest.Config) {
	b.Helper()
	cfg := config.Default(plugins.DefaultProfile())
	cfg.LeaderElection.LeaderElect = false
	a, err := app.New(restConfig, app.Options{Config: cfg, Registry: plugins.NewInTreeRegistry()})
	if err != nil {
		b.Fatalf("scheduler: %v", err)
	}
	done := make(chan error, 1)
	wg.Go(func() { done <- a.Start(ctx) })
	select {
	case <-a.Ready():
	case err := <-done:
		b.Fatalf("scheduler stopped: %v", err)
	}
}

// runBinder stands in for the scheduler (with -binder): it
// binds every unscheduled pod round-robin over the given nodes (all Ready
// and untainted in these benchmarks), with 8 workers fed by an informer of
// pods whose spec.nodeName is empty.
func runBinder(ctx context.Context, client kubernetes.Interface, nodeNames []string) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", "").String()
	}))
	inf := factory.Core().V1().Pods().Informer()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue})
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	var (
		mu   sync.Mutex
		next int
		wg   sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for {
				key, shutdown := queue.Get()
				if shutdown {
					return
				}
				obj, exists, _ := inf.GetIndexer().GetByKey(key)
				if pod, ok := obj.(*corev1.Pod); exists && ok && pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil {
					mu.Lock()
					node := nodeNames[next%len(nodeNames)]
					next++
					mu.Unlock()
					err := client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
						ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
						Target:     corev1.ObjectReference{Kind: "Node", Name: node},
					}, metav1.CreateOptions{})
					if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
						queue.AddRateLimited(key)
						queue.Done(key)
						continue
					}
				}
				queue.Forget(key)
				queue.Done(key)
			}
		})
	}
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
}

// process is the controller manager, `skiff controller-manager`, running
// as a child process.
type process struct {
	cmd *exec.Cmd
	out *lockedBuffer
}

// lockedBuffer is the process's output, written by exec's copier and read
// by the benchmark.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// buildOnce returns $SKIFF_BIN, or a skiff built from this tree once per
// benchmark run.
var buildOnce = sync.OnceValues(func() (string, error) {
	if bin := os.Getenv("SKIFF_BIN"); bin != "" {
		return bin, nil
	}
	dir, err := os.MkdirTemp("", "skiff-bench-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "skiff")
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/skiff")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/skiff: %w\n%s", err, out)
	}
	return bin, nil
})

// startControllerManager runs every controller, without leader election
// and without a metrics port, against the harness's API server.
func startControllerManager(b *testing.B, kubeconfig string, qps int) *process {
	b.Helper()
	bin, err := buildOnce()
	if err != nil {
		b.Fatalf("skiff binary: %v", err)
	}
	p := &process{out: &lockedBuffer{}}
	p.cmd = exec.Command(bin, "controller-manager", "--kubeconfig", kubeconfig, "--leader-elect=false", "--secure-port=0",
		fmt.Sprintf("--kube-api-qps=%d", qps), fmt.Sprintf("--kube-api-burst=%d", 2*qps))
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		b.Fatalf("start controller manager: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(exited) }()
	b.Cleanup(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-exited
		}
	})
	// Started once it logs that its controllers run.
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(p.output(), "Started controllers") {
		select {
		case <-exited:
			b.Fatalf("controller manager exited: %s", p.output())
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("controller manager not started after 60s: %s", p.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return p
}

func (p *process) output() string { return p.out.String() }

// memory returns the process's peak and current resident set (VmHWM,
// VmRSS) in bytes.
func (p *process) memory(b *testing.B) (hwm, rss int64) {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		b.Fatalf("controller manager status: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmHWM:":
			hwm = kb << 10
		case "VmRSS:":
			rss = kb << 10
		}
	}
	return hwm, rss
}

// cpu returns the process's user and system CPU time so far.
func (p *process) cpu(b *testing.B) time.Duration {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		b.Fatalf("controller manager stat: %v", err)
	}
	// Fields after the command name (which is in parentheses): utime and
	// stime are the 12th and 13th, in clock ticks (100 a second on Linux).
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
