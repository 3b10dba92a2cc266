package job

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

const (
	// DefaultPodFailureBackoff is the delay before a failed pod is replaced
	// the first time; it doubles with each failure since the last success.
	DefaultPodFailureBackoff = 10 * time.Second
	// MaxPodFailureBackoff caps the delay (upstream v1.37: 10 minutes).
	MaxPodFailureBackoff = 10 * time.Minute
)

// backoffRecord remembers, per Job, the failures since its last success and
// when the last of them happened.
type backoffRecord struct {
	failuresAfterLastSuccess int32
	lastFailureTime          *time.Time
}

// backoffStore holds the records of every Job, in memory (as upstream: a
// restarted controller forgets them).
type backoffStore struct {
	mu      sync.Mutex
	records map[string]backoffRecord
}

func newBackoffStore() *backoffStore { return &backoffStore{records: map[string]backoffRecord{}} }

func (s *backoffStore) get(key string) backoffRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.records[key]
}

func (s *backoffStore) set(key string, r backoffRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[key] = r
}

func (s *backoffStore) remove(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.records, key)
}

// nextBackoffRecord folds the newly finished pods into old: a success
// resets the count; failures after the last success add to it.
func nextBackoffRecord(old backoffRecord, succeeded, failed []*corev1.Pod) backoffRecord {
	if len(failed) == 0 {
		if len(succeeded) > 0 {
			return backoffRecord{}
		}
		return old
	}
	failedTimes := finishTimes(failed)
	if len(succeeded) == 0 {
		last := failedTimes[len(failedTimes)-1]
		return backoffRecord{failuresAfterLastSuccess: old.failuresAfterLastSuccess + int32(len(failed)), lastFailureTime: &last}
	}
	succTimes := finishTimes(succeeded)
	lastSuccess := succTimes[len(succTimes)-1]
	r := backoffRecord{}
	for i := len(failedTimes) - 1; i >= 0; i-- {
		t := failedTimes[i]
		if !t.After(lastSuccess) {
			break
		}
		if r.lastFailureTime == nil {
			r.lastFailureTime = &t
		}
		r.failuresAfterLastSuccess++
	}
	return r
}

func finishTimes(pods []*corev1.Pod) []time.Time {
	out := make([]time.Time, len(pods))
	for i, p := range pods {
		out[i] = finishedTime(p)
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// finishedTime is when a pod finished: its containers' latest finish
// time, else when it stopped being ready, else its deletion time less the
// grace period, else its creation.
func finishedTime(p *corev1.Pod) time.Time {
	if t := containersFinishTime(p); t != nil {
		return *t
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	if p.DeletionTimestamp != nil {
		grace := int64(0)
		if p.DeletionGracePeriodSeconds != nil {
			grace = *p.DeletionGracePeriodSeconds
		}
		return p.DeletionTimestamp.Add(-time.Duration(grace) * time.Second)
	}
	return p.CreationTimestamp.Time
}

func containersFinishTime(p *corev1.Pod) *time.Time {
	var latest *time.Time
	consider := func(cs corev1.ContainerStatus) bool {
		t := cs.State.Terminated
		if t == nil || t.FinishedAt.IsZero() {
			return false
		}
		if latest == nil || latest.Before(t.FinishedAt.Time) {
			ft := t.FinishedAt.Time
			latest = &ft
		}
		return true
	}
	for _, cs := range p.Status.ContainerStatuses {
		if !consider(cs) {
			return nil
		}
	}
	sidecars := map[string]bool{}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
		}
	}
	for _, cs := range p.Status.InitContainerStatuses {
		if sidecars[cs.Name] && !consider(cs) {
			return nil
		}
	}
	return latest
}

// remainingBackoff is how long to wait before creating a pod after
// failures failures, the last at last: base doubling up to max.
func remainingBackoff(now time.Time, base, maxDelay time.Duration, failures int32, last *time.Time) time.Duration {
	if failures == 0 || last == nil {
		return 0
	}
	d := base
	for i := 1; i < int(failures); i++ {
		d *= 2
		if d >= maxDelay {
			d = maxDelay
			break
		}
	}
	elapsed := now.Sub(*last)
	if d < elapsed {
		return 0
	}
	return d - elapsed
}
