package eviction

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Observation is one signal's value now: what is available of what
// capacity (bytes, inodes or process ids).
type Observation struct {
	Available int64
	Capacity  int64
}

// Observations are the node's signals at one moment.
type Observations map[Signal]Observation

// Met reports whether t is met by the observations.
func (t Threshold) Met(obs Observations) bool {
	o, ok := obs[t.Signal]
	if !ok {
		return false
	}
	return o.Available < t.Value(o.Capacity)
}

// MetReclaiming reports whether t is met when its minimum reclaim is
// added to it: a threshold acted on stays met until that much more is
// available (upstream's thresholdsMet with enforceMinReclaim).
func (t Threshold) MetReclaiming(obs Observations) bool {
	o, ok := obs[t.Signal]
	if !ok {
		return false
	}
	v := t.Value(o.Capacity)
	if t.MinReclaim != nil {
		v += t.MinReclaim.Value(o.Capacity)
	}
	return o.Available < v
}

// Unresolved returns the thresholds that are met with their minimum
// reclaim added, whatever their grace periods: after node-level
// resources were reclaimed, none must be left for eviction to be spared.
func Unresolved(thresholds []Threshold, obs Observations) []Threshold {
	var out []Threshold
	for _, t := range thresholds {
		if t.MetReclaiming(obs) {
			out = append(out, t)
		}
	}
	return out
}

// State is the eviction manager's memory between observations.
type State struct {
	firstMet     map[string]time.Time
	conditionSaw map[corev1.NodeConditionType]time.Time
	// acting holds the thresholds of the last decision's Met: they stay
	// met until their minimum reclaim is available too.
	acting map[string]bool
}

// Decision is what one observation calls for.
type Decision struct {
	// Conditions are the pressure conditions that are true now (including
	// those kept true within the transition period), in the order
	// MemoryPressure, DiskPressure, PIDPressure.
	Conditions []corev1.NodeConditionType
	// Met are the thresholds met now whose grace period has passed, memory
	// first (upstream's byEvictionPriority).
	Met []Threshold
}

// Reclaim is the threshold to act on (the first of Met), if any.
func (d Decision) Reclaim() (Threshold, bool) {
	if len(d.Met) == 0 {
		return Threshold{}, false
	}
	return d.Met[0], true
}

// HasCondition reports whether c is among the decision's conditions.
func (d Decision) HasCondition(c corev1.NodeConditionType) bool {
	for _, x := range d.Conditions {
		if x == c {
			return true
		}
	}
	return false
}

// Observe updates the state with the observations made at now and
// returns the decision.
func (s *State) Observe(cfg Config, obs Observations, now time.Time) Decision {
	transition := cfg.PressureTransitionPeriod
	if transition <= 0 {
		transition = DefaultPressureTransitionPeriod
	}
	firstMet := map[string]time.Time{}
	var met []Threshold
	for _, t := range cfg.Thresholds {
		if !t.Met(obs) && !(s.acting[t.key()] && t.MetReclaiming(obs)) {
			continue
		}
		at, ok := s.firstMet[t.key()]
		if !ok {
			at = now
		}
		firstMet[t.key()] = at
		if s.conditionSaw == nil {
			s.conditionSaw = map[corev1.NodeConditionType]time.Time{}
		}
		s.conditionSaw[ConditionOf(t.Signal)] = now
		if now.Sub(at) >= t.GracePeriod {
			met = append(met, t)
		}
	}
	s.firstMet = firstMet
	sort.SliceStable(met, func(i, j int) bool {
		return met[i].Signal == SignalMemoryAvailable && met[j].Signal != SignalMemoryAvailable
	})
	var d Decision
	for _, c := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		if at, ok := s.conditionSaw[c]; ok && now.Sub(at) < transition {
			d.Conditions = append(d.Conditions, c)
		}
	}
	d.Met = met
	s.acting = map[string]bool{}
	for _, t := range met {
		s.acting[t.key()] = true
	}
	return d
}
