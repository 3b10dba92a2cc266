// Package prober runs liveness, readiness and startup probes as upstream's
// kubelet does. Tracker is the pure core: it decides, from what the
// runtime shows of the container and the clock, whether to probe now, and
// turns raw probe outcomes into a result by the probe's thresholds. Manager
// runs one Tracker a probe on a ticker and does the probing.
package prober

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Observation is the container as the runtime shows it at a tick.
type Observation struct {
	ContainerID string
	Running     bool
	StartedAt   time.Time
	// Started tells liveness and readiness whether the startup probe has
	// succeeded (true when there is none).
	Started bool
	Now     time.Time
}

// Tracker is one probe of one container.
type Tracker struct {
	Kind  Kind
	Probe *corev1.Probe

	containerID string
	current     Result
	lastRaw     Result
	run         int
	onHold      bool
}

// NewTracker returns a tracker holding upstream's initial result: readiness
// starts as Failure, liveness as Success, startup as Unknown.
func NewTracker(kind Kind, probe *corev1.Probe) *Tracker {
	t := &Tracker{Kind: kind, Probe: probe}
	t.current = t.initial()
	return t
}

func (t *Tracker) initial() Result {
	switch t.Kind {
	case Readiness:
		return Failure
	case Liveness:
		return Success
	}
	return Unknown
}

// Result returns the current result and the container it belongs to.
func (t *Tracker) Result() (Result, string) { return t.current, t.containerID }

// ShouldProbe reports whether to run the probe now. It resets the tracker
// when the container changed and reports false while the container is not
// running, before its initial delay, while a startup probe has not
// succeeded (liveness, readiness), once it has (startup), and after a
// liveness or startup failure until the container is replaced.
func (t *Tracker) ShouldProbe(o Observation) bool {
	if o.ContainerID != t.containerID {
		t.containerID = o.ContainerID
		t.current = t.initial()
		t.run = 0
		t.lastRaw = Unknown
		t.onHold = false
	}
	if !o.Running {
		if t.Kind == Readiness || t.Kind == Startup {
			// A stopped container is not ready; a new one starts over.
			t.current = t.initial()
		}
		t.run = 0
		return false
	}
	if t.onHold {
		return false
	}
	switch t.Kind {
	case Liveness, Readiness:
		if !o.Started {
			return false
		}
	case Startup:
		if t.current == Success {
			return false
		}
	}
	if o.Now.Sub(o.StartedAt) < time.Duration(t.Probe.InitialDelaySeconds)*time.Second {
		return false
	}
	return true
}

// Record takes one probe outcome and reports whether the result changed.
// A result only changes after failureThreshold failures or successThreshold
// successes in a row.
func (t *Tracker) Record(raw Result) bool {
	if raw == t.lastRaw {
		t.run++
	} else {
		t.lastRaw = raw
		t.run = 1
	}
	failureThreshold := int(t.Probe.FailureThreshold)
	if failureThreshold <= 0 {
		failureThreshold = 3
	}
	successThreshold := int(t.Probe.SuccessThreshold)
	if successThreshold <= 0 {
		successThreshold = 1
	}
	if (raw == Failure && t.run < failureThreshold) || (raw == Success && t.run < successThreshold) {
		return false
	}
	changed := raw != t.current
	t.current = raw
	if raw == Failure && (t.Kind == Liveness || t.Kind == Startup) {
		// The container is restarted; wait for the new one.
		t.onHold = true
		t.run = 0
	}
	return changed
}

// Period is how often the probe runs (default 10 s).
func Period(p *corev1.Probe) time.Duration {
	if p.PeriodSeconds <= 0 {
		return 10 * time.Second
	}
	return time.Duration(p.PeriodSeconds) * time.Second
}

// Timeout bounds one probe (default 1 s).
func Timeout(p *corev1.Probe) time.Duration {
	if p.TimeoutSeconds <= 0 {
		return time.Second
	}
	return time.Duration(p.TimeoutSeconds) * time.Second
}
