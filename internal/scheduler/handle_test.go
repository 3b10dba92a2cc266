package scheduler

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

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
