package kubelet

import (
	"context"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// podWorker is the goroutine that syncs one pod. A wake-up while it syncs
// is kept (the channel holds one), so no change is missed and bursts
// collapse into one sync.
type podWorker struct {
	uid    types.UID
	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	// updated: the pod's spec, labels or deletion changed since the last
	// sync (kubelet_pod_worker_duration_seconds counts it as an update).
	updated atomic.Bool
}

func (w *podWorker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// podChanged records the informer's copy of a pod and wakes its worker.
func (k *Kubelet) podChanged(ctx context.Context, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	k.mu.Lock()
	old := k.pods[pod.UID]
	k.pods[pod.UID] = pod
	k.mu.Unlock()
	if old != nil && !differsForKubelet(old, pod) {
		// A status write (ours, or another component's): as upstream's pod
		// config source, it does not trigger a sync.
		return
	}
	k.registerObjects(ctx, pod)
	w := k.ensureWorker(ctx, pod.UID)
	if old != nil {
		w.updated.Store(true)
	}
	w.poke()
}

// differsForKubelet reports whether a pod changed in what the kubelet acts
// on: spec, labels, annotations, deletion.
func differsForKubelet(a, b *corev1.Pod) bool {
	if a.Generation != b.Generation || !apiequality.Semantic.DeepEqual(a.Spec, b.Spec) {
		return true
	}
	if !apiequality.Semantic.DeepEqual(a.Labels, b.Labels) || !apiequality.Semantic.DeepEqual(a.Annotations, b.Annotations) {
		return true
	}
	if !apiequality.Semantic.DeepEqual(a.DeletionTimestamp, b.DeletionTimestamp) ||
		!apiequality.Semantic.DeepEqual(a.DeletionGracePeriodSeconds, b.DeletionGracePeriodSeconds) {
		return true
	}
	// A phase set by someone else (e.g. an eviction) matters too.
	return a.Status.Phase != b.Status.Phase && (b.Status.Phase == corev1.PodFailed || b.Status.Phase == corev1.PodSucceeded)
}

// podDeleted: the API object is gone; the worker stops what is left and
// cleans up.
func (k *Kubelet) podDeleted(ctx context.Context, pod *corev1.Pod) {
	k.mu.Lock()
	delete(k.pods, pod.UID)
	k.mu.Unlock()
	k.unregisterObjects(pod.UID)
	k.ensureWorker(ctx, pod.UID).poke()
}

func (k *Kubelet) ensureWorker(ctx context.Context, uid types.UID) *podWorker {
	k.mu.Lock()
	defer k.mu.Unlock()
	if w, ok := k.workers[uid]; ok {
		return w
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &podWorker{uid: uid, wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	k.workers[uid] = w
	go k.runWorker(wctx, w)
	return w
}

func (k *Kubelet) wakePod(uid types.UID) {
	k.mu.Lock()
	w := k.workers[uid]
	k.mu.Unlock()
	if w != nil {
		w.poke()
	}
}

func (k *Kubelet) runWorker(ctx context.Context, w *podWorker) {
	defer close(w.done)
	logger := klog.FromContext(ctx).WithValues("podUID", w.uid)
	ctx = klog.NewContext(ctx, logger)
	var timer <-chan time.Time
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-timer:
		}
		// Upstream's operation types: create (first sync), kill (the pod
		// is gone or being deleted), update (its spec changed), sync.
		op := "sync"
		if pod := k.apiPod(w.uid); first {
			op, first = "create", false
		} else if pod == nil || pod.DeletionTimestamp != nil {
			op = "kill"
		} else if w.updated.Swap(false) {
			op = "update"
		}
		start := k.clock.Now()
		next, finished := k.syncPod(ctx, w.uid)
		k.metrics.ObservePodWorker(op, k.clock.Since(start))
		if finished {
			k.mu.Lock()
			// A new event may have arrived for the same uid (it cannot:
			// uids are not reused), so the worker just goes.
			delete(k.workers, w.uid)
			k.mu.Unlock()
			k.probes.removePod(w.uid)
			k.unregisterObjects(w.uid)
			k.crashBackoff.Forget(string(w.uid) + "/")
			return
		}
		if next <= 0 {
			next = k.opts.ResyncInterval
		}
		timer = k.clock.After(next)
	}
}

func (k *Kubelet) stopWorkers() {
	k.mu.Lock()
	workers := make([]*podWorker, 0, len(k.workers))
	for _, w := range k.workers {
		workers = append(workers, w)
	}
	k.mu.Unlock()
	for _, w := range workers {
		w.cancel()
	}
	for _, w := range workers {
		<-w.done
	}
	k.probes.stop()
}

// relistLoop is the pod lifecycle event generator: it lists the runtime's
// containers every RelistPeriod and wakes the worker of each pod whose
// containers changed state, so exits are noticed within a second.
func (k *Kubelet) relistLoop(ctx context.Context) {
	last := map[string]runtimeapi.ContainerState{}
	lastSandboxes := map[string]runtimeapi.PodSandboxState{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.clock.After(k.opts.RelistPeriod):
		}
		containers, err := k.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{})
		if err != nil {
			continue
		}
		seen := make(map[string]runtimeapi.ContainerState, len(containers))
		snap := make(map[string][]*runtimeapi.Container)
		for _, c := range containers {
			key := c.Labels[labelPodUID] + "/" + c.Labels[labelContainerName]
			snap[key] = append(snap[key], c)
			seen[c.Id] = c.State
			if old, ok := last[c.Id]; !ok || old != c.State {
				if uid := c.Labels[labelPodUID]; uid != "" {
					k.wakePod(types.UID(uid))
				}
			}
		}
		last = seen
		k.mu.Lock()
		k.containerSnap = snap
		k.mu.Unlock()
		sandboxes, err := k.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{})
		if err != nil {
			continue
		}
		seenSB := make(map[string]runtimeapi.PodSandboxState, len(sandboxes))
		for _, s := range sandboxes {
			seenSB[s.Id] = s.State
			if old, ok := lastSandboxes[s.Id]; ok && old != s.State {
				if uid := s.Labels[labelPodUID]; uid != "" {
					k.wakePod(types.UID(uid))
				}
			}
		}
		lastSandboxes = seenSB
	}
}

// cleanupOrphans stops and removes the sandboxes of pods that are no
// longer bound here (deleted while the agent was down) and removes their
// directories.
func (k *Kubelet) cleanupOrphans(ctx context.Context) {
	logger := klog.FromContext(ctx)
	sandboxes, err := k.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{})
	if err != nil {
		logger.Info("Unable to list sandboxes for clean-up", "err", err)
		return
	}
	k.mu.Lock()
	known := make(map[types.UID]bool, len(k.pods))
	for uid := range k.pods {
		known[uid] = true
	}
	k.mu.Unlock()
	for _, s := range sandboxes {
		uid := types.UID(s.Labels[labelPodUID])
		if uid == "" || known[uid] {
			continue
		}
		logger.Info("Cleaning up a pod that is no longer bound here", "pod", s.Labels[labelPodNamespace]+"/"+s.Labels[labelPodName], "podUID", uid)
		k.ensureWorker(ctx, uid).poke()
	}
	for _, uid := range k.volumes.PodUIDs() {
		if !known[types.UID(uid)] {
			k.ensureWorker(ctx, types.UID(uid)).poke()
		}
	}
}

// housekeeping forgets old back-off entries.
func (k *Kubelet) housekeeping(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.clock.After(time.Minute):
		}
		k.crashBackoff.GC()
		k.imageBackoff.GC()
	}
}

// containersOf returns the instances of a pod's container as the last
// relist saw them, and false before the first relist.
func (k *Kubelet) containersOf(uid types.UID, name string) ([]*runtimeapi.Container, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.containerSnap == nil {
		return nil, false
	}
	return k.containerSnap[string(uid)+"/"+name], true
}
