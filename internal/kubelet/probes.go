package kubelet

import (
	"context"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/kubelet/plan"
	"github.com/skiff-sh/skiff/internal/kubelet/prober"
)

// probeManager runs one goroutine per probe of each container of each pod
// and keeps the current results by container id.
type probeManager struct {
	k *Kubelet

	mu      sync.Mutex
	workers map[probeKey]context.CancelFunc
	results map[string]map[prober.Kind]prober.Result // container id → kind → result
	ctx     context.Context
	wg      sync.WaitGroup
}

type probeKey struct {
	uid       types.UID
	container string
	kind      prober.Kind
}

func newProbeManager(k *Kubelet) *probeManager {
	return &probeManager{k: k, workers: map[probeKey]context.CancelFunc{}, results: map[string]map[prober.Kind]prober.Result{},
		ctx: context.Background()}
}

// lookup is a plan.ProbeLookup.
func (m *probeManager) lookup(kind prober.Kind, containerID string) (prober.Result, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.results[containerID][kind]
	return r, ok
}

func (m *probeManager) set(id string, kind prober.Kind, r prober.Result) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	byKind, ok := m.results[id]
	if !ok {
		byKind = map[prober.Kind]prober.Result{}
		m.results[id] = byKind
	}
	old, had := byKind[kind]
	byKind[kind] = r
	return !had || old != r
}

// ensure starts the probe workers of a pod's containers (idempotent).
func (m *probeManager) ensure(pod *corev1.Pod) {
	type probe struct {
		c    *corev1.Container
		kind prober.Kind
		p    *corev1.Probe
	}
	var want []probe
	add := func(c *corev1.Container) {
		if c.StartupProbe != nil {
			want = append(want, probe{c, prober.Startup, c.StartupProbe})
		}
		if c.LivenessProbe != nil {
			want = append(want, probe{c, prober.Liveness, c.LivenessProbe})
		}
		if c.ReadinessProbe != nil {
			want = append(want, probe{c, prober.Readiness, c.ReadinessProbe})
		}
	}
	for i := range pod.Spec.InitContainers {
		if plan.IsSidecar(&pod.Spec.InitContainers[i]) {
			add(&pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range want {
		key := probeKey{pod.UID, w.c.Name, w.kind}
		if _, ok := m.workers[key]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(m.k.baseCtx())
		m.workers[key] = cancel
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.run(ctx, pod.DeepCopy(), w.c.DeepCopy(), w.kind, w.p.DeepCopy())
		}()
	}
}

func (m *probeManager) removePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, cancel := range m.workers {
		if key.uid == uid {
			cancel()
			delete(m.workers, key)
		}
	}
}

func (m *probeManager) stop() {
	m.mu.Lock()
	for key, cancel := range m.workers {
		cancel()
		delete(m.workers, key)
	}
	m.mu.Unlock()
	m.wg.Wait()
}

// run is one probe's worker: every second it looks at the container, and
// probes it when the tracker says so and a period has passed.
func (m *probeManager) run(ctx context.Context, pod *corev1.Pod, c *corev1.Container, kind prober.Kind, p *corev1.Probe) {
	k := m.k
	tr := prober.NewTracker(kind, p)
	period := prober.Period(p)
	var lastProbe time.Time
	lastID := ""
	startedAt := map[string]time.Time{}
	tick := time.Second
	if period < tick {
		tick = period
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.clock.After(tick):
		}
		obs, sandboxID, ok := m.observe(ctx, pod, c, kind, startedAt)
		if !ok {
			continue
		}
		if obs.ContainerID != lastID {
			lastID = obs.ContainerID
			lastProbe = time.Time{}
		}
		if tr.ShouldProbe(obs) && k.clock.Since(lastProbe) >= period {
			lastProbe = k.clock.Now()
			target := prober.Target{PodIP: m.podIP(ctx, pod, sandboxID), Container: c,
				Exec: func(ctx context.Context, cmd []string, timeout time.Duration) ([]byte, int, error) {
					stdout, stderr, err := k.runtime.ExecSync(ctx, obs.ContainerID, cmd, timeout)
					if err != nil {
						if ee, ok := err.(interface{ ExitStatus() int }); ok {
							return append(stdout, stderr...), ee.ExitStatus(), nil
						}
						return append(stdout, stderr...), -1, err
					}
					return append(stdout, stderr...), 0, nil
				}}
			raw, msg := prober.Run(ctx, p, target)
			if raw == prober.Failure && ctx.Err() == nil {
				k.recorder.Eventf(k.containerRef(pod, c), corev1.EventTypeWarning, "Unhealthy", "%s probe failed: %s", kind, strings.TrimSpace(msg))
			}
			tr.Record(raw)
		}
		r, id := tr.Result()
		if id != "" && m.set(id, kind, r) {
			klog.FromContext(ctx).V(2).Info("Probe result changed", "pod", klog.KObj(pod), "container", c.Name, "probe", kind, "result", r)
			k.wakePod(pod.UID)
		}
	}
}

// observe returns the newest instance of the container as a probe sees it:
// from the last relist (the runtime is asked directly before the first),
// with its start time asked once per container.
func (m *probeManager) observe(ctx context.Context, pod *corev1.Pod, c *corev1.Container, kind prober.Kind, started map[string]time.Time) (prober.Observation, string, bool) {
	k := m.k
	list, ok := k.containersOf(pod.UID, c.Name)
	if !ok {
		var err error
		list, err = k.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{
			labelPodUID: string(pod.UID), labelContainerName: c.Name}})
		if err != nil {
			return prober.Observation{}, "", false
		}
	}
	if len(list) == 0 {
		return prober.Observation{}, "", false
	}
	newest := list[0]
	for _, x := range list[1:] {
		if x.CreatedAt > newest.CreatedAt {
			newest = x
		}
	}
	obs := prober.Observation{ContainerID: newest.Id, Running: newest.State == runtimeapi.ContainerState_CONTAINER_RUNNING, Now: k.clock.Now(), Started: true}
	if at, ok := started[newest.Id]; ok {
		obs.StartedAt = at
	} else if resp, err := k.runtime.ContainerStatus(ctx, newest.Id, false); err == nil && resp.GetStatus().GetStartedAt() > 0 {
		obs.StartedAt = time.Unix(0, resp.GetStatus().GetStartedAt())
		clear(started)
		started[newest.Id] = obs.StartedAt
	}
	if c.StartupProbe != nil && kind != prober.Startup {
		r, ok := m.lookup(prober.Startup, newest.Id)
		obs.Started = ok && r == prober.Success
	}
	return obs, newest.PodSandboxId, true
}

func (m *probeManager) podIP(ctx context.Context, pod *corev1.Pod, sandboxID string) string {
	if pod.Spec.HostNetwork {
		if ips := m.k.hostIPs(); len(ips) > 0 {
			return ips[0]
		}
		return "127.0.0.1"
	}
	resp, err := m.k.runtime.PodSandboxStatus(ctx, sandboxID, false)
	if err != nil {
		return ""
	}
	return resp.GetStatus().GetNetwork().GetIp()
}
