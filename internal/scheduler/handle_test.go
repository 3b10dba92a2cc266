package scheduler

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	fwruntime "github.com/skiff-sh/skiff/internal/scheduler/framework/runtime"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins"
	st "github.com/skiff-sh/skiff/internal/scheduler/testing"
)

// TestProfilesSeeTheQueueNominations: the frameworks' handle reads the
// queue's nominator, so Filter sees a nomination as soon as the queue
// does, for every profile.
func TestProfilesSeeTheQueueNominations(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := fake.NewClientset()
	other := plugins.DefaultProfile()
	other.SchedulerName = "other"
	s, err := New(ctx, cs, informers.NewSharedInformerFactory(cs, 0), Options{
		Profiles: []fwruntime.Profile{plugins.DefaultProfile(), other},
		Registry: plugins.NewInTreeRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	pod := st.MakePod().Name("preemptor").Obj()
	pod.Spec.SchedulerName = "other"
	pod.Status.NominatedNodeName = "n1"
	s.Queue().Add(ctx, pod)
	s.Queue().Nominator().Add(st.MakePod().Name("from-postfilter").Obj(), "n1")
	for _, profile := range []string{"default-scheduler", "other"} {
		var got []string
		for _, pi := range s.Profile(profile).NominatedPodsForNode("n1") {
			got = append(got, pi.Pod.Name)
		}
		if diff := cmp.Diff([]string{"preemptor", "from-postfilter"}, got); diff != "" {
			t.Errorf("profile %s: nominated to n1 (-want +got):\n%s", profile, diff)
		}
	}
}

func TestCoreEventRecorder(t *testing.T) {
	for _, tc := range []struct {
		name                          string
		eventtype, reason, note, want string
		args                          []any
	}{
		{"preempted", v1.EventTypeNormal, "Preempted", "Preempted by pod %v on node %v", "Normal Preempted Preempted by pod uid-1 on node n1", []any{"uid-1", "n1"}},
		{"no args", v1.EventTypeWarning, "Odd", "plain", "Warning Odd plain", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fr := record.NewFakeRecorder(1)
			coreEventRecorder{fr}.Eventf(st.MakePod().Name("victim").Obj(), st.MakePod().Name("preemptor").Obj(), tc.eventtype, tc.reason, "Preempting", tc.note, tc.args...)
			if got := <-fr.Events; got != tc.want {
				t.Errorf("event %q, want %q", got, tc.want)
			}
		})
	}
}
