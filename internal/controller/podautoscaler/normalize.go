package podautoscaler

import (
	"math"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/utils/ptr"
)

// history is what the controller remembers of each HPA between syncs, as
// upstream does in memory: recent recommendations (for stabilization) and
// recent scale events (for the rate policies). A restart forgets them, as
// upstream's does.
type history struct {
	mu              sync.Mutex
	recommendations map[string][]recommendation
	scaleUps        map[string][]scaleEvent
	scaleDowns      map[string][]scaleEvent
}

type recommendation struct {
	replicas int32
	at       time.Time
}

type scaleEvent struct {
	change   int32
	at       time.Time
	outdated bool
}

func newHistory() *history {
	return &history{recommendations: map[string][]recommendation{}, scaleUps: map[string][]scaleEvent{}, scaleDowns: map[string][]scaleEvent{}}
}

func (h *history) forget(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.recommendations, key)
	delete(h.scaleUps, key)
	delete(h.scaleDowns, key)
}

// record adds rec, reusing the slot of one older than cutoff.
func (h *history) record(key string, rec recommendation, stale func(recommendation) bool) {
	for i, r := range h.recommendations[key] {
		if stale(r) {
			h.recommendations[key][i] = rec
			return
		}
	}
	h.recommendations[key] = append(h.recommendations[key], rec)
}

// limit is a normalized count with the ScalingLimited condition's reason
// and message, and the AbleToScale reason and message of stabilization.
type limit struct {
	replicas         int32
	limited          bool
	reason, message  string
	stabilized       bool
	stabilizedReason string
	stabilizedMsg    string
}

// normalize applies stabilization and the min, max and rate limits to a
// proposed count, upstream's normalizeDesiredReplicas (no behavior) and
// normalizeDesiredReplicasWithBehaviors.
func (h *history) normalize(hpa *autoscalingv2.HorizontalPodAutoscaler, key string, now time.Time, downscaleWindow time.Duration, current, proposed, minReplicas int32) limit {
	h.mu.Lock()
	defer h.mu.Unlock()
	if hpa.Spec.Behavior == nil {
		return h.normalizeDefault(key, now, downscaleWindow, current, proposed, minReplicas, hpa.Spec.MaxReplicas)
	}
	up, down := rules(hpa.Spec.Behavior, downscaleWindow)
	out := limit{}
	stabilized, reason, msg := h.stabilize(key, now, up, down, current, proposed)
	if stabilized != proposed {
		out.stabilized, out.stabilizedReason, out.stabilizedMsg = true, reason, msg
	}
	out.replicas, out.reason, out.message = h.rate(key, now, up, down, current, stabilized, minReplicas, hpa.Spec.MaxReplicas)
	out.limited = out.replicas != stabilized
	return out
}

// normalizeDefault: the highest recommendation of the downscale window,
// then at most double (or four) per sync, within min and max.
func (h *history) normalizeDefault(key string, now time.Time, window time.Duration, current, proposed, minReplicas, maxReplicas int32) limit {
	cutoff := now.Add(-window)
	highest := proposed
	for _, r := range h.recommendations[key] {
		if !r.at.Before(cutoff) && r.replicas > highest {
			highest = r.replicas
		}
	}
	h.record(key, recommendation{proposed, now}, func(r recommendation) bool { return r.at.Before(cutoff) })
	out := limit{}
	if highest != proposed {
		out.stabilized, out.stabilizedReason, out.stabilizedMsg = true, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation"
	}
	upLimit := int32(math.Max(2*float64(current), 4))
	maxAllowed, reason, msg := maxReplicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
	if maxReplicas > upLimit {
		maxAllowed, reason, msg = upLimit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
	}
	switch {
	case highest < minReplicas:
		out.replicas, out.reason, out.message = minReplicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
	case highest > maxAllowed:
		out.replicas, out.reason, out.message = maxAllowed, reason, msg
	default:
		out.replicas, out.reason, out.message = highest, "DesiredWithinRange", "the desired count is within the acceptable range"
	}
	out.limited = out.replicas != highest
	return out
}

// rules are the behavior's scale-up and scale-down rules with upstream's
// defaults filled in where the API server left them out.
func rules(b *autoscalingv2.HorizontalPodAutoscalerBehavior, downscaleWindow time.Duration) (up, down autoscalingv2.HPAScalingRules) {
	maxPolicy := autoscalingv2.MaxChangePolicySelect
	up = autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptr.To[int32](0),
		SelectPolicy:               &maxPolicy,
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
	down = autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptr.To(int32(downscaleWindow.Seconds())),
		SelectPolicy:               &maxPolicy,
		Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}},
	}
	merge := func(dst *autoscalingv2.HPAScalingRules, src *autoscalingv2.HPAScalingRules) {
		if src == nil {
			return
		}
		if src.StabilizationWindowSeconds != nil {
			dst.StabilizationWindowSeconds = src.StabilizationWindowSeconds
		}
		if src.SelectPolicy != nil {
			dst.SelectPolicy = src.SelectPolicy
		}
		if len(src.Policies) > 0 {
			dst.Policies = src.Policies
		}
	}
	merge(&up, b.ScaleUp)
	merge(&down, b.ScaleDown)
	return up, down
}

// stabilize keeps the count between the lowest recommendation of the
// scale-up window and the highest of the scale-down window.
func (h *history) stabilize(key string, now time.Time, up, down autoscalingv2.HPAScalingRules, current, proposed int32) (int32, string, string) {
	upCutoff := now.Add(-time.Duration(*up.StabilizationWindowSeconds) * time.Second)
	downCutoff := now.Add(-time.Duration(*down.StabilizationWindowSeconds) * time.Second)
	upRec, downRec := proposed, proposed
	for _, r := range h.recommendations[key] {
		if r.at.After(upCutoff) {
			upRec = min(upRec, r.replicas)
		}
		if r.at.After(downCutoff) {
			downRec = max(downRec, r.replicas)
		}
	}
	rec := max(current, upRec)
	rec = min(rec, downRec)
	h.record(key, recommendation{proposed, now}, func(r recommendation) bool { return r.at.Before(upCutoff) && r.at.Before(downCutoff) })
	if proposed >= current {
		return rec, "ScaleUpStabilized", "recent recommendations were lower than current one, applying the lowest recent recommendation"
	}
	return rec, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation"
}

// rate applies the policies: how many replicas may be added or removed
// within each policy's period, counting the scale events in it.
func (h *history) rate(key string, now time.Time, up, down autoscalingv2.HPAScalingRules, current, desired, minReplicas, maxReplicas int32) (int32, string, string) {
	switch {
	case desired > current:
		upLimit := max(scaleLimit(now, current, h.scaleUps[key], h.scaleDowns[key], up, true), current)
		maxAllowed, reason, msg := maxReplicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
		if maxReplicas > upLimit {
			maxAllowed, reason, msg = upLimit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
		}
		if desired > maxAllowed {
			return maxAllowed, reason, msg
		}
	case desired < current:
		downLimit := min(scaleLimit(now, current, h.scaleUps[key], h.scaleDowns[key], down, false), current)
		minAllowed, reason, msg := minReplicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
		if minReplicas < downLimit {
			minAllowed, reason, msg = downLimit, "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate"
		}
		if desired < minAllowed {
			return minAllowed, reason, msg
		}
	}
	return desired, "DesiredWithinRange", "the desired count is within the acceptable range"
}

// scaleLimit is the furthest the count may go (up or down) under the rules.
func scaleLimit(now time.Time, current int32, ups, downs []scaleEvent, r autoscalingv2.HPAScalingRules, scaleUp bool) int32 {
	sel := *r.SelectPolicy
	if sel == autoscalingv2.DisabledPolicySelect {
		return current
	}
	// Max picks the biggest change: for scaling up the highest count, for
	// scaling down the lowest; Min the reverse.
	pickHigh := (sel == autoscalingv2.MaxChangePolicySelect) == scaleUp
	result := int32(math.MinInt32)
	if !pickHigh {
		result = math.MaxInt32
	}
	for _, p := range r.Policies {
		start := current - changedWithin(now, p.PeriodSeconds, ups) + changedWithin(now, p.PeriodSeconds, downs)
		var proposed int32
		switch {
		case scaleUp && p.Type == autoscalingv2.PodsScalingPolicy:
			proposed = start + p.Value
		case scaleUp:
			proposed = int32(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
		case p.Type == autoscalingv2.PodsScalingPolicy:
			proposed = start - p.Value
		default:
			proposed = int32(float64(start) * (1 - float64(p.Value)/100))
		}
		if pickHigh {
			result = max(result, proposed)
		} else {
			result = min(result, proposed)
		}
	}
	return result
}

func changedWithin(now time.Time, periodSeconds int32, events []scaleEvent) int32 {
	cutoff := now.Add(-time.Duration(periodSeconds) * time.Second)
	var n int32
	for _, e := range events {
		if e.at.After(cutoff) {
			n += e.change
		}
	}
	return n
}

// storeScale remembers a rescale for the rate policies (only with a
// behavior, as upstream: without one, no policy reads them).
func (h *history) storeScale(hpa *autoscalingv2.HorizontalPodAutoscaler, key string, now time.Time, downscaleWindow time.Duration, from, to int32) {
	if hpa.Spec.Behavior == nil {
		return
	}
	up, down := rules(hpa.Spec.Behavior, downscaleWindow)
	h.mu.Lock()
	defer h.mu.Unlock()
	events, r, change := h.scaleUps, up, to-from
	if to < from {
		events, r, change = h.scaleDowns, down, from-to
	}
	var longest int32
	for _, p := range r.Policies {
		longest = max(longest, p.PeriodSeconds)
	}
	cutoff := now.Add(-time.Duration(longest) * time.Second)
	ev := scaleEvent{change: change, at: now}
	for i, e := range events[key] {
		if e.at.Before(cutoff) {
			events[key][i] = ev
			return
		}
	}
	events[key] = append(events[key], ev)
}
