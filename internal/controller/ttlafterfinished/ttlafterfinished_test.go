package ttlafterfinished

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
)

var now = time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)

func job(ttl *int32, finishedAgo time.Duration, cond batchv1.JobConditionType) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "uid-j"},
		Spec:       batchv1.JobSpec{TTLSecondsAfterFinished: ttl},
	}
	if cond != "" {
		j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-finishedAgo))}}
	}
	return j
}

func TestSync(t *testing.T) {
	cases := []struct {
		name    string
		cached  *batchv1.Job
		live    *batchv1.Job // nil: same as cached
		actions []string
		requeue string
	}{
		{name: "no TTL", cached: job(nil, time.Hour, batchv1.JobComplete)},
		{name: "not finished", cached: job(ptr.To(int32(0)), 0, "")},
		{name: "complete, TTL not yet passed", cached: job(ptr.To(int32(100)), 40*time.Second, batchv1.JobComplete), requeue: "requeue after 1m0s"},
		{name: "complete, TTL passed: foreground delete with UID precondition", cached: job(ptr.To(int32(100)), 100*time.Second, batchv1.JobComplete),
			actions: []string{"get jobs", "delete jobs propagation=Foreground uid=uid-j"}},
		{name: "failed, TTL 0", cached: job(ptr.To(int32(0)), 0, batchv1.JobFailed),
			actions: []string{"get jobs", "delete jobs propagation=Foreground uid=uid-j"}},
		{name: "the live Job's TTL was raised", cached: job(ptr.To(int32(10)), time.Minute, batchv1.JobComplete), live: job(ptr.To(int32(3600)), time.Minute, batchv1.JobComplete),
			actions: []string{"get jobs"}, requeue: "requeue after 59m0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			live := tc.live
			if live == nil {
				live = tc.cached
			}
			client := fake.NewClientset(live)
			inf := informers.NewSharedInformerFactory(client, 0)
			ctrl, err := New(context.Background(), controllercontext.Context{Client: client, Informers: inf, Clock: clocktesting.NewFakeClock(now)})
			if err != nil {
				t.Fatal(err)
			}
			_ = inf.Batch().V1().Jobs().Informer().GetIndexer().Add(tc.cached)
			client.ClearActions()
			err = ctrl.(*Controller).Sync(context.Background(), "ns/j")
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.requeue {
				t.Errorf("sync returned %q, want %q", got, tc.requeue)
			}
			var as []string
			for _, a := range client.Actions() {
				s := a.GetVerb() + " " + a.GetResource().Resource
				if d, ok := a.(k8stesting.DeleteActionImpl); ok {
					s += " propagation=" + string(*d.DeleteOptions.PropagationPolicy) + " uid=" + string(*d.DeleteOptions.Preconditions.UID)
				}
				as = append(as, s)
			}
			if d := cmp.Diff(tc.actions, as); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
			if strings.Contains(strings.Join(as, ","), "delete") {
				if _, err := client.BatchV1().Jobs("ns").Get(context.Background(), "j", metav1.GetOptions{}); err == nil {
					t.Error("job still there")
				}
			}
		})
	}
}
