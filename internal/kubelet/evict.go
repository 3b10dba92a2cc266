package kubelet

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/kubelet/eviction"
	"github.com/skiff-sh/skiff/internal/kubelet/podstatus"
)

// Eviction defaults, as upstream's kubelet.
const (
	DefaultEvictionInterval = 10 * time.Second
	// hardEvictionGrace is the grace a pod evicted for a hard threshold
	// gets (upstream's immediateEvictionGracePeriodSeconds).
	hardEvictionGrace = time.Second
	// evictionCleanupTimeout bounds the wait for an evicted pod's
	// containers to stop before the next pod may be evicted.
	evictionCleanupTimeout = 30 * time.Second
)

// evictRequest is an eviction the eviction manager asked a pod worker to
// carry out.
type evictRequest struct {
	grace   time.Duration
	message string
	// reason is the pod's status reason: Evicted when empty, or
	// DeadlineExceeded (activeDeadlineSeconds, deadline.go).
	reason string
	// noCondition: no DisruptionTarget condition (local storage limit
	// evictions, as upstream).
	noCondition bool
}

// evictionLoop is the eviction manager: every EvictionInterval it
// observes the node, updates the pressure conditions, and when a
// threshold is met (past its grace period) reclaims node-level resources
// (dead containers, unused images) for disk, then evicts one pod at a
// time and waits for it to stop.
func (k *Kubelet) evictionLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.clock.After(k.opts.EvictionInterval):
		}
		if uid, ok := k.synchronizeEviction(ctx); ok {
			k.waitEvicted(ctx, uid)
		}
	}
}

// pressureConditions are the node's pressure conditions now.
func (k *Kubelet) pressureConditions() []corev1.NodeConditionType {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]corev1.NodeConditionType(nil), k.pressure...)
}

// synchronizeEviction runs one round of the eviction manager and returns
// the pod it evicted.
func (k *Kubelet) synchronizeEviction(ctx context.Context) (types.UID, bool) {
	logger := klog.FromContext(ctx)
	obs, err := k.stats.Observe(ctx)
	if err != nil {
		logger.Info("Eviction manager: unable to observe the node", "err", err)
		return "", false
	}
	k.mu.Lock()
	d := k.evictionState.Observe(k.opts.Eviction, obs, k.clock.Now())
	changed := !sameConditions(k.pressure, d.Conditions)
	k.pressure = d.Conditions
	k.mu.Unlock()
	if changed {
		logger.Info("Eviction manager: node pressure changed", "conditions", d.Conditions)
		k.kickStatus()
	}
	if uid, ok := k.localStorageEviction(ctx); ok {
		return uid, true
	}
	t, ok := d.Reclaim()
	if !ok {
		return "", false
	}
	res := eviction.ResourceOf(t.Signal)
	logger.Info("Eviction manager: attempting to reclaim", "resourceName", res, "threshold", t.String())
	k.recorder.Eventf(k.nodeRef(), corev1.EventTypeWarning, "EvictionThresholdMet", "Attempting to reclaim %s", res)
	if res == corev1.ResourceEphemeralStorage || res == eviction.ResourceInodes {
		// Node-level resources first: dead containers and unused images.
		k.reclaimDisk(ctx)
		if after, err := k.stats.Observe(ctx); err == nil {
			obs = after
			// Upstream's check: no threshold left with its minimum reclaim
			// added (--eviction-minimum-reclaim), grace periods aside.
			if len(eviction.Unresolved(k.opts.Eviction.Thresholds, after)) == 0 {
				logger.Info("Eviction manager: able to reduce resource pressure without evicting pods", "resourceName", res)
				return "", false
			}
		}
	}
	podStats, err := k.stats.PodStats(ctx, res == corev1.ResourceEphemeralStorage || res == eviction.ResourceInodes)
	if err != nil {
		logger.Info("Eviction manager: unable to read pod stats", "err", err)
	}
	cands := k.evictionCandidates(podStats)
	if len(cands) == 0 {
		logger.Info("Eviction manager: thresholds met, but no pod is active to evict")
		return "", false
	}
	eviction.Rank(t.Signal, cands)
	for _, c := range cands {
		if eviction.IsCritical(c.Pod) {
			continue
		}
		grace := hardEvictionGrace
		if t.Soft {
			grace = gracePeriodSpec(c.Pod)
			if max := k.opts.Eviction.MaxPodGracePeriod; max > 0 && max < grace {
				grace = max
			}
		}
		msg := eviction.Message(t, obs, c)
		k.evictPod(ctx, c.Pod, &evictRequest{grace: grace, message: msg})
		k.metrics.IncEviction(string(t.Signal))
		return c.Pod.UID, true
	}
	logger.Info("Eviction manager: unable to evict any pods from the node")
	return "", false
}

// evictionCandidates are the pods that run here and are neither finished
// nor already being evicted.
func (k *Kubelet) evictionCandidates(stats map[types.UID]*eviction.PodStats) []eviction.Candidate {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []eviction.Candidate
	for uid, p := range k.pods {
		if !k.admitted[uid] || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if ps := k.syncs[uid]; ps != nil && (ps.terminated || ps.evict != nil) {
			continue
		}
		out = append(out, eviction.Candidate{Pod: p, Stats: stats[uid], Requests: podRequests(p)})
	}
	return out
}

// evictPod hands the eviction to the pod's worker, with upstream's event.
func (k *Kubelet) evictPod(ctx context.Context, pod *corev1.Pod, ev *evictRequest) {
	klog.FromContext(ctx).Info("Eviction manager: evicting pod", "pod", klog.KObj(pod), "grace", ev.grace, "message", ev.message)
	k.recorder.Event(pod, corev1.EventTypeWarning, eviction.Reason, ev.message)
	ps := k.podSyncState(pod.UID)
	k.mu.Lock()
	ps.evict = ev
	k.mu.Unlock()
	k.wakePod(pod.UID)
}

// localStorageEviction evicts, at once, a pod whose disk usage breaks one
// of its own limits (an emptyDir sizeLimit, ephemeral-storage limits), as
// upstream does before looking at the node's thresholds.
func (k *Kubelet) localStorageEviction(ctx context.Context) (types.UID, bool) {
	for _, c := range k.evictionCandidates(nil) {
		if !eviction.HasLocalStorageLimits(c.Pod) || eviction.IsCritical(c.Pod) {
			continue
		}
		u, err := k.stats.LocalStorage(ctx, c.Pod)
		if err != nil || u == nil {
			continue
		}
		if msg, signal, ok := eviction.LocalStorageViolation(c.Pod, *u); ok {
			k.evictPod(ctx, c.Pod, &evictRequest{grace: hardEvictionGrace, message: msg, noCondition: true})
			k.metrics.IncEviction(signal)
			return c.Pod.UID, true
		}
	}
	return "", false
}

// waitEvicted waits until the evicted pod's containers are stopped (its
// worker marked it terminated), at most evictionCleanupTimeout.
func (k *Kubelet) waitEvicted(ctx context.Context, uid types.UID) {
	deadline := k.clock.Now().Add(evictionCleanupTimeout)
	for k.clock.Now().Before(deadline) {
		k.mu.Lock()
		ps := k.syncs[uid]
		done := ps == nil || ps.terminated
		k.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-k.clock.After(time.Second):
		}
	}
}

// pendingEviction returns the eviction asked of the pod, if any.
func (k *Kubelet) pendingEviction(ps *podSync) *evictRequest {
	k.mu.Lock()
	defer k.mu.Unlock()
	return ps.evict
}

// syncEvicted stops an evicted pod's containers with the eviction's grace
// and writes its terminal status: phase Failed, reason Evicted, the
// message, and a DisruptionTarget condition (TerminationByKubelet).
func (k *Kubelet) syncEvicted(ctx context.Context, pod *corev1.Pod, ps *podSync, ev *evictRequest) (time.Duration, bool) {
	st, err := k.readState(ctx, string(pod.UID))
	if err != nil {
		return 2 * time.Second, false
	}
	k.killPod(ctx, pod, st, ev.grace, "")
	k.probes.removePod(pod.UID)
	st, err = k.readState(ctx, string(pod.UID))
	if err != nil {
		return 2 * time.Second, false
	}
	if st.RunningContainers() > 0 {
		return time.Second, false
	}
	ps.terminated = true
	k.writeStatus(ctx, pod, k.generateStatus(pod, st, ps, true), ps)
	return time.Minute, false
}

// applyEviction makes an evicted pod's status say so (generateStatus).
func applyEviction(pod *corev1.Pod, s *corev1.PodStatus, ev *evictRequest, now time.Time) {
	s.Phase = corev1.PodFailed
	s.Reason = eviction.Reason
	if ev.reason != "" {
		s.Reason = ev.reason
	}
	s.Message = ev.message
	if ev.noCondition {
		return
	}
	cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, ObservedGeneration: pod.Generation,
		Reason: corev1.PodReasonTerminationByKubelet, Message: ev.message, LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))}
	for i := range s.Conditions {
		if s.Conditions[i].Type == corev1.DisruptionTarget {
			if s.Conditions[i].Status == corev1.ConditionTrue {
				cond.LastTransitionTime = s.Conditions[i].LastTransitionTime
			}
			s.Conditions[i] = cond
			return
		}
	}
	s.Conditions = append(s.Conditions, cond)
}

// admitPressure refuses a pod the node's pressure conditions do not let
// in (upstream's eviction admission handler).
func (k *Kubelet) admitPressure(pod *corev1.Pod) (bool, string) {
	return eviction.Admit(k.pressureConditions(), pod, podstatus.QOSClass(pod))
}

func (k *Kubelet) nodeRef() *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", Name: k.opts.NodeName, UID: types.UID(k.opts.NodeName)}
}

func sameConditions(a, b []corev1.NodeConditionType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
