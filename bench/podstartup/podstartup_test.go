package podstartup

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	internalapi "k8s.io/cri-api/pkg/apis"
	criclient "k8s.io/cri-client/pkg"

	"github.com/skiff-sh/skiff/internal/testing/images"
)

// env is one node and its control plane: a server with its agent
// (BenchmarkPodStartup and BenchmarkIdleMemory share one for a run), or a
// server without one beside upstream's kubelet and Skiff's containerd
// (upstream_test.go).
type env struct {
	// requestsPerPod are the API requests of the last batch, per pod.
	requestsPerPod []requestCount
	dir            string
	cmd            *exec.Cmd
	out            *bytes.Buffer
	client         kubernetes.Interface
	image          string
	// upstream is the node of upstream's kubelet, nil for Skiff's agent.
	upstream *upstreamNode
	// unlock releases /tmp/skiff-agent.lock when the env took it.
	unlock func()
}

var (
	// batches numbers the namespaces (sub-benchmarks run more than once).
	batches int
	// shimAnonPerPod is the anonymous memory of the shims per pod at the
	// end of the last batch (all pods running).
	shimAnonPerPod float64
	once           sync.Once
	shared         *env
	setErr         error
)

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..")
}

func start(b *testing.B) *env {
	once.Do(func() { shared, setErr = newEnv(b) })
	if setErr != nil {
		b.Fatal(setErr)
	}
	return shared
}

func newEnv(b *testing.B) (*env, error) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	dir, err := os.MkdirTemp("", "skiff-bench-podstartup")
	if err != nil {
		return nil, err
	}
	bin, err := skiffBinary(dir)
	if err != nil {
		return nil, err
	}
	ref, err := placeImage(b, dir)
	if err != nil {
		return nil, err
	}
	e := &env{dir: dir, out: &bytes.Buffer{}, image: ref}
	if err := e.startServer(bin); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(e.output(), "Node agent ready") {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("not ready:\n%s", e.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := e.connect(deadline); err != nil {
		return nil, err
	}
	for {
		nodes, err := e.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err == nil && len(nodes.Items) == 1 && len(nodes.Items[0].Spec.Taints) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("node not ready")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return e, nil
}

// skiffBinary is $SKIFF_BINARY, or `make build` into dir.
func skiffBinary(dir string) (string, error) {
	if bin := os.Getenv("SKIFF_BINARY"); bin != "" {
		return bin, nil
	}
	bin := filepath.Join(dir, "skiff")
	build := exec.Command("make", "--no-print-directory", "build", "BIN="+bin)
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build: %v\n%s", err, out)
	}
	return bin, nil
}

// placeImage puts the busybox test image where the agent's containerd
// imports images at start (<dir>/data/agent/images) and returns its
// reference.
func placeImage(b *testing.B, dir string) (string, error) {
	tar, ref := images.Busybox(b)
	data, err := os.ReadFile(tar)
	if err != nil {
		return "", err
	}
	imgDir := filepath.Join(dir, "data", "agent", "images")
	if err := os.MkdirAll(imgDir, 0o755); err != nil {
		return "", err
	}
	return ref, os.WriteFile(filepath.Join(imgDir, "busybox.tar"), data, 0o644)
}

// startServer starts `skiff server` on e.dir/data with free ports, and
// extra flags.
func (e *env) startServer(bin string, extra ...string) error {
	e.cmd = exec.Command(bin, "server", "--data-dir", filepath.Join(e.dir, "data"),
		"--https-listen-port", strconv.Itoa(freePort()),
		"--etcd-client-port", strconv.Itoa(freePort()), "--etcd-peer-port", strconv.Itoa(freePort()),
		"--kubelet-port", strconv.Itoa(freePort()),
		// As test/e2e: cluster DNS on a free port, never the host's :53.
		"--cluster-dns-port", strconv.Itoa(freePort()),
		// As test/e2e: the shared build VM's disk is often past 90 % used,
		// and the default nodefs.available<10% would evict the pods.
		"--eviction-hard=memory.available<100Mi,nodefs.available<1%")
	e.cmd.Args = append(e.cmd.Args, extra...)
	// SKIFF_BENCH_ARGS adds server flags (e.g. -v=2 for the kubelet's
	// timings); SKIFF_BENCH_LOG=FILE keeps the server's output in FILE and
	// containerd's log in FILE.containerd.
	e.cmd.Args = append(e.cmd.Args, strings.Fields(os.Getenv("SKIFF_BENCH_ARGS"))...)
	e.cmd.Stdout, e.cmd.Stderr = &lockedWriter{w: e.out}, &lockedWriter{w: e.out}
	return e.cmd.Start()
}

// connect makes e.client from the server's admin kubeconfig once the API
// server answers.
func (e *env) connect(deadline time.Time) error {
	for {
		cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(e.dir, "data", "admin.kubeconfig"))
		if err == nil {
			cfg.QPS, cfg.Burst = -1, 0
			if e.client, err = kubernetes.NewForConfig(cfg); err != nil {
				return err
			}
			if _, err = e.client.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("API server not ready: %v\n%s", err, e.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

var outMu sync.Mutex

func (l *lockedWriter) Write(p []byte) (int, error) {
	outMu.Lock()
	defer outMu.Unlock()
	return l.w.Write(p)
}

func (e *env) output() string {
	outMu.Lock()
	defer outMu.Unlock()
	return e.out.String()
}

// TestMain stops the shared server after the benchmarks.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.stop()
	}
	os.Exit(code)
}

// runtime is a CRI client of the server's containerd.
func (e *env) runtime(ctx context.Context) (internalapi.RuntimeService, error) {
	return criclient.NewRemoteRuntimeService(ctx, "unix://"+filepath.Join(e.dir, "data", "agent", "containerd", "containerd.sock"), 10*time.Second, nil, false)
}

// waitNoSandboxes waits until the kubelet has removed every sandbox.
func (e *env) waitNoSandboxes(ctx context.Context) {
	rs, err := e.runtime(ctx)
	if err != nil {
		return
	}
	defer rs.Close(ctx)
	for ctx.Err() == nil {
		sbs, err := rs.ListPodSandbox(ctx, nil)
		if err != nil || len(sbs) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop deletes every pod, waits until the runtime has no sandbox left (no
// container, network namespace or pod IP outlives the benchmark), stops
// the server and removes its directory.
func (e *env) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	zero := int64(0)
	if e.client != nil {
		if pods, err := e.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err == nil {
			for _, p := range pods.Items {
				_ = e.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			}
		}
		e.waitNoSandboxes(ctx)
	}
	if e.upstream != nil {
		e.upstream.stopKubelet()
	}
	if e.cmd != nil && e.cmd.Process != nil {
		_ = e.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = e.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = e.cmd.Process.Kill()
		}
	}
	if e.upstream != nil {
		e.upstream.stopContainerd()
	}
	if pid := e.containerdPID(); pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	// Shims of pods the kubelet did not tear down in time.
	for _, pid := range e.shimPIDs() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if logPath := os.Getenv("SKIFF_BENCH_LOG"); logPath != "" {
		_ = os.WriteFile(logPath, []byte(e.output()), 0o644)
		if b, err := os.ReadFile(filepath.Join(e.dir, "data", "agent", "containerd", "containerd.log")); err == nil {
			_ = os.WriteFile(logPath+".containerd", b, 0o644)
		}
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		var points []string
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], e.dir+"/") {
				points = append(points, f[4])
			}
		}
		for i := len(points) - 1; i >= 0; i-- {
			_ = syscall.Unmount(points[i], syscall.MNT_DETACH)
		}
	}
	if e.upstream != nil {
		e.upstream.cleanup()
	}
	removeIdleBridge()
	_ = os.RemoveAll(e.dir)
	if e.unlock != nil {
		e.unlock()
	}
}

// memory returns a process's peak and current resident set.
func memory(pid int) (hwm, rss int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
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

// smapsRollup is one field of a process's /proc/<pid>/smaps_rollup, in
// bytes.
func smapsRollup(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func (e *env) containerdPID() int {
	b, err := os.ReadFile(filepath.Join(e.dir, "data", "agent", "containerd", "containerd.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

func ready(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

// BenchmarkIdleMemory reports the RSS of the idle server process (API
// server, etcd, controllers, scheduler and the node agent) and its
// containerd, after 20 s without pods.
func BenchmarkIdleMemory(b *testing.B) {
	e := start(b)
	for i := 0; i < b.N; i++ {
		time.Sleep(20 * time.Second)
	}
	_, rss := memory(e.cmd.Process.Pid)
	var crss int64
	if pid := e.containerdPID(); pid > 0 {
		_, crss = memory(pid)
	}
	b.ReportMetric(float64(rss)/(1<<20), "server_rss_MiB")
	b.ReportMetric(float64(crss)/(1<<20), "containerd_rss_MiB")
	b.ReportMetric(float64(rss+crss)/(1<<20), "total_rss_MiB")
	// RSS counts the pages of the skiff executable both processes map
	// (about 100 MiB, one copy in memory) twice; PSS divides each shared
	// page among the processes that map it, so the sum is what the two
	// hold together.
	pss := smapsRollup(e.cmd.Process.Pid, "Pss:")
	var cpss int64
	if pid := e.containerdPID(); pid > 0 {
		cpss = smapsRollup(pid, "Pss:")
	}
	b.ReportMetric(float64(pss)/(1<<20), "server_pss_MiB")
	b.ReportMetric(float64(cpss)/(1<<20), "containerd_pss_MiB")
	b.ReportMetric(float64(pss+cpss)/(1<<20), "total_pss_MiB")
	b.ReportMetric(float64(smapsRollup(e.cmd.Process.Pid, "Anonymous:"))/(1<<20), "server_anon_MiB")
	b.ReportMetric(float64(smapsRollup(e.cmd.Process.Pid, "Rss:")-smapsRollup(e.cmd.Process.Pid, "Anonymous:"))/(1<<20), "server_file_MiB")
	if pid := e.containerdPID(); pid > 0 {
		b.ReportMetric(float64(smapsRollup(pid, "Anonymous:"))/(1<<20), "containerd_anon_MiB")
	}
	// SKIFF_BENCH_HEAP=FILE saves the idle server's heap profile (the
	// kubelet API's /debug/pprof/heap, through the API server's node proxy).
	if path := os.Getenv("SKIFF_BENCH_HEAP"); path != "" {
		nodes, err := e.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err != nil || len(nodes.Items) == 0 {
			b.Fatalf("list nodes: %v", err)
		}
		heap, err := e.client.CoreV1().RESTClient().Get().Resource("nodes").Name(nodes.Items[0].Name).
			SubResource("proxy").Suffix("debug/pprof/heap").DoRaw(context.Background())
		if err != nil {
			b.Fatalf("heap profile: %v", err)
		}
		if err := os.WriteFile(path, heap, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPodStartup creates n pods at once (image present, no probes)
// and records, per pod, the time from its create request to the watch
// event showing it Running and Ready. One op is one batch of n pods;
// p50/p99 are over every pod of every op.
func BenchmarkPodStartup(b *testing.B) {
	for _, n := range []int{1, 10, 30} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			e := start(b)
			b.StopTimer()
			var all []time.Duration
			var cpu cpuTimes
			for i := 0; i < b.N; i++ {
				lat, c := e.batch(b, n, i)
				all = append(all, lat...)
				cpu.server += c.server
				cpu.containerd += c.containerd
				cpu.shims += c.shims
			}
			perPod := func(d time.Duration) float64 { return float64(d.Milliseconds()) / float64(n*b.N) }
			b.ReportMetric(perPod(cpu.server+cpu.containerd+cpu.shims), "cpu_ms/pod")
			b.ReportMetric(perPod(cpu.server), "cpu_server_ms/pod")
			b.ReportMetric(perPod(cpu.containerd), "cpu_containerd_ms/pod")
			b.ReportMetric(perPod(cpu.shims), "cpu_shims_ms/pod")
			b.ReportMetric(shimAnonPerPod, "shim_anon_MiB/pod")
			var reqs float64
			for _, r := range e.requestsPerPod {
				reqs += r.perPod
			}
			b.ReportMetric(reqs, "api_requests/pod")
			// The requests of the last batch by kind, most first.
			for _, r := range e.requestsPerPod {
				b.Logf("%-60s %6.2f per pod", r.key, r.perPod)
			}
			sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
			b.ReportMetric(float64(percentile(all, 0.5).Microseconds())/1000, "p50_ms")
			b.ReportMetric(float64(percentile(all, 0.99).Microseconds())/1000, "p99_ms")
			hwm, _ := memory(e.cmd.Process.Pid)
			b.ReportMetric(float64(hwm)/(1<<20), "server_peak_rss_MiB")
			if pid := e.containerdPID(); pid > 0 {
				chwm, _ := memory(pid)
				b.ReportMetric(float64(chwm)/(1<<20), "containerd_peak_rss_MiB")
			}
		})
	}
}

// batch creates n pods at once and returns each one's latency and the CPU
// time the server, containerd and the shims spent meanwhile.
func (e *env) batch(b *testing.B, n, iter int) ([]time.Duration, cpuTimes) {
	ctx := context.Background()
	batches++
	ns := fmt.Sprintf("bench-%d-%d", n, batches)
	if _, err := e.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	for {
		if _, err := e.client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	w, err := e.client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	created := make([]time.Time, n)
	var mu sync.Mutex
	req0 := e.requests(ctx)
	cpu0 := e.cpuTime()
	b.StartTimer()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			one := int64(0)
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: ns},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &one, RuntimeClassName: benchRuntimeClass(), Containers: []corev1.Container{{
					Name: "c", Image: e.image, ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"sleep", "3600"}}}}}
			mu.Lock()
			created[i] = time.Now()
			mu.Unlock()
			if _, err := e.client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				b.Error(err)
			}
		}()
	}
	seen := map[string]time.Duration{}
	timeout := time.After(2 * time.Minute)
	for len(seen) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatal("watch closed")
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod || ev.Type == watch.Deleted || !ready(p) {
				continue
			}
			if _, done := seen[p.Name]; done {
				continue
			}
			i, _ := strconv.Atoi(strings.TrimPrefix(p.Name, "p"))
			mu.Lock()
			seen[p.Name] = time.Since(created[i])
			mu.Unlock()
		case <-timeout:
			b.Fatalf("%d of %d pods Running and Ready after 2 min", len(seen), n)
		}
	}
	b.StopTimer()
	cpu1 := e.cpuTime()
	e.requestsPerPod = requestsDelta(req0, e.requests(ctx), n)
	var shimAnon int64
	for _, pid := range e.shimPIDs() {
		shimAnon += smapsRollup(pid, "Anonymous:")
	}
	shimAnonPerPod = float64(shimAnon) / (1 << 20) / float64(n)
	cpu := cpu1.sub(cpu0)
	wg.Wait()
	// Clean up outside the timer: delete the namespace's pods and wait
	// until they are gone.
	zero := int64(0)
	_ = e.client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	for {
		pods, err := e.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil && len(pods.Items) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The next batch starts once the runtime has torn these pods down.
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	e.waitNoSandboxes(wctx)
	cancel()
	_ = e.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	out := make([]time.Duration, 0, n)
	for _, d := range seen {
		out = append(out, d)
	}
	return out, cpu
}

// cpuTimes are CPU times (user and system, a process's own and its
// waited-for children's) of the server process, of its containerd (whose
// children are the CNI plugins and the shims' start commands) and of the
// running shims of that containerd (whose children are runc).
// kubelet is upstream's kubelet process (zero beside Skiff's agent, which
// runs in the server process).
type cpuTimes struct{ server, kubelet, containerd, shims time.Duration }

func (c cpuTimes) total() time.Duration { return c.server + c.kubelet + c.containerd + c.shims }

func (c cpuTimes) sub(d cpuTimes) cpuTimes {
	return cpuTimes{c.server - d.server, c.kubelet - d.kubelet, c.containerd - d.containerd, c.shims - d.shims}
}

func (c cpuTimes) add(d cpuTimes) cpuTimes {
	return cpuTimes{c.server + d.server, c.kubelet + d.kubelet, c.containerd + d.containerd, c.shims + d.shims}
}

func (e *env) cpuTime() cpuTimes {
	// USER_HZ is 100 on Linux.
	const tick = 10 * time.Millisecond
	var t cpuTimes
	t.server = time.Duration(procTicks(e.cmd.Process.Pid)) * tick
	if e.upstream != nil {
		t.kubelet = time.Duration(procTicks(e.upstream.kubelet.Process.Pid)) * tick
	}
	if pid := e.containerdPID(); pid > 0 {
		t.containerd = time.Duration(procTicks(pid)) * tick
	}
	var ticks int64
	for _, pid := range e.shimPIDs() {
		ticks += procTicks(pid)
	}
	t.shims = time.Duration(ticks) * tick
	return t
}

// shimPIDs are the running shims of the server's containerd.
func (e *env) shimPIDs() []int {
	var pids []int
	sock := filepath.Join(e.dir, "data", "agent", "containerd", "containerd.sock")
	entries, _ := os.ReadDir("/proc")
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-address" && args[i+1] == sock {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// procTicks is utime+stime+cutime+cstime of a process, in clock ticks.
func procTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name (which may hold spaces): state is
	// field 3, utime, stime, cutime and cstime fields 14 to 17.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return 0
	}
	var sum int64
	for _, v := range f[11:15] {
		n, _ := strconv.ParseInt(v, 10, 64)
		sum += n
	}
	return sum
}

// requests reads the API server's apiserver_request_total counters, by
// verb, resource and subresource (all clients: the kubelet, scheduler,
// controllers and the benchmark itself).
func (e *env) requests(ctx context.Context) map[string]float64 {
	raw, err := e.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(line[len("apiserver_request_total{"):strings.LastIndexByte(line, '}')], ",") {
			if k, val, ok := strings.Cut(kv, "="); ok {
				labels[k] = strings.Trim(val, `"`)
			}
		}
		if labels["verb"] == "WATCH" {
			continue
		}
		key := labels["verb"] + " " + labels["resource"]
		if labels["subresource"] != "" {
			key += "/" + labels["subresource"]
		}
		out[key] += v
	}
	return out
}

type requestCount struct {
	key    string
	perPod float64
}

func requestsDelta(before, after map[string]float64, n int) []requestCount {
	var out []requestCount
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out = append(out, requestCount{k, d / float64(n)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].perPod > out[j].perPod })
	return out
}

// benchRuntimeClass is the pods' runtimeClassName, from
// SKIFF_BENCH_RUNTIME_CLASS (e.g. crun); unset: the node's default (runc).
func benchRuntimeClass() *string {
	if rc := os.Getenv("SKIFF_BENCH_RUNTIME_CLASS"); rc != "" {
		return &rc
	}
	return nil
}
