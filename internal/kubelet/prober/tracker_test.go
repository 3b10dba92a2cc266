package prober

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// step is one tick of a script: what the runtime shows, and the raw probe
// outcome if the tracker asks to probe.
type step struct {
	id      string
	running bool
	started bool
	at      int // seconds after the container started
	raw     Result
}

type outcome struct {
	Probed bool
	Result Result
}

func run(tr *Tracker, steps []step) []outcome {
	start := time.Unix(1000, 0)
	var out []outcome
	for _, s := range steps {
		probed := tr.ShouldProbe(Observation{ContainerID: s.id, Running: s.running, Started: s.started,
			StartedAt: start, Now: start.Add(time.Duration(s.at) * time.Second)})
		if probed {
			tr.Record(s.raw)
		}
		r, _ := tr.Result()
		out = append(out, outcome{probed, r})
	}
	return out
}

func TestTracker(t *testing.T) {
	cases := []struct {
		name  string
		kind  Kind
		probe corev1.Probe
		steps []step
		want  []outcome
	}{{
		name:  "readiness: not ready before the initial delay, ready after one success, unready after the threshold",
		kind:  Readiness,
		probe: corev1.Probe{InitialDelaySeconds: 5, FailureThreshold: 2, SuccessThreshold: 1},
		steps: []step{
			{"c1", true, true, 1, Success}, {"c1", true, true, 6, Success},
			{"c1", true, true, 16, Failure}, {"c1", true, true, 26, Failure}, {"c1", true, true, 36, Success},
		},
		want: []outcome{{false, Failure}, {true, Success}, {true, Success}, {true, Failure}, {true, Success}},
	}, {
		name:  "liveness: fails after three failures, then holds until the container is replaced",
		kind:  Liveness,
		probe: corev1.Probe{},
		steps: []step{
			{"c1", true, true, 0, Failure}, {"c1", true, true, 10, Failure}, {"c1", true, true, 20, Failure},
			{"c1", true, true, 30, Success}, {"c2", true, true, 0, Success},
		},
		want: []outcome{{true, Success}, {true, Success}, {true, Failure}, {false, Failure}, {true, Success}},
	}, {
		name:  "liveness waits for the startup probe",
		kind:  Liveness,
		probe: corev1.Probe{},
		steps: []step{{"c1", true, false, 0, Failure}, {"c1", true, true, 10, Failure}},
		want:  []outcome{{false, Success}, {true, Success}},
	}, {
		name:  "startup: unknown until it succeeds, then not probed again",
		kind:  Startup,
		probe: corev1.Probe{SuccessThreshold: 1},
		steps: []step{{"c1", true, false, 0, Failure}, {"c1", true, false, 10, Success}, {"c1", true, true, 20, Failure}},
		want:  []outcome{{true, Unknown}, {true, Success}, {false, Success}},
	}, {
		name:  "readiness of a stopped container is a failure",
		kind:  Readiness,
		probe: corev1.Probe{},
		steps: []step{{"c1", true, true, 0, Success}, {"c1", false, true, 10, Success}},
		want:  []outcome{{true, Success}, {false, Failure}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := run(NewTracker(tc.kind, &tc.probe), tc.steps)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
