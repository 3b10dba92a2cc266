package cronjob

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// t0 is a whole hour (10:00 UTC).
var t0 = time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)

func newCronJob(schedule string, opts ...func(*batchv1.CronJob)) *batchv1.CronJob {
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "cj", Namespace: "ns", UID: "uid-cj", CreationTimestamp: metav1.NewTime(t0.Add(-30 * time.Second)), ResourceVersion: "1"},
		Spec: batchv1.CronJobSpec{
			Schedule:          schedule,
			ConcurrencyPolicy: batchv1.AllowConcurrent,
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
				}}},
			},
		},
	}
	for _, o := range opts {
		o(cj)
	}
	return cj
}

// childJob is a Job of cj scheduled at t, finished with cond ("" = running).
func childJob(cj *batchv1.CronJob, t time.Time, cond batchv1.JobConditionType) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: jobName(cj, t), Namespace: "ns", UID: types.UID("uid-" + jobName(cj, t)), ResourceVersion: "1",
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, cronJobKind)}},
		Status: batchv1.JobStatus{StartTime: ptr.To(metav1.NewTime(t))},
	}
	if cond != "" {
		j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue}}
		if cond == batchv1.JobComplete {
			j.Status.CompletionTime = ptr.To(metav1.NewTime(t.Add(10 * time.Second)))
		}
	}
	return j
}

func active(js ...*batchv1.Job) func(*batchv1.CronJob) {
	return func(cj *batchv1.CronJob) {
		for _, j := range js {
			cj.Status.Active = append(cj.Status.Active, corev1.ObjectReference{Kind: "Job", Namespace: "ns", Name: j.Name, UID: j.UID})
		}
	}
}

func TestSync(t *testing.T) {
	minute := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	cases := []struct {
		name    string
		cj      *batchv1.CronJob
		jobs    func(cj *batchv1.CronJob) []*batchv1.Job
		now     time.Time
		actions []string
		events  []string
		requeue time.Duration
		// checks on the result
		active       []string
		lastSchedule *time.Time
		check        func(t *testing.T, f *fixture)
	}{{
		name:         "every minute: the due start time runs",
		cj:           newCronJob("*/1 * * * *"),
		now:          t0.Add(5 * time.Second),
		actions:      []string{"create jobs cj-29543640", "update cronjobs/status"},
		events:       []string{"Normal SuccessfulCreate Created job cj-29543640"},
		requeue:      55*time.Second + nextScheduleDelta,
		active:       []string{"cj-29543640"},
		lastSchedule: &t0,
		check: func(t *testing.T, f *fixture) {
			j, err := f.client.BatchV1().Jobs("ns").Get(context.Background(), "cj-29543640", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := j.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; got != "2026-03-04T10:00:00Z" {
				t.Errorf("scheduled-timestamp annotation %q", got)
			}
			if ref := metav1.GetControllerOf(j); ref == nil || ref.UID != "uid-cj" || j.Labels["app"] != "x" {
				t.Errorf("job meta %+v", j.ObjectMeta)
			}
		},
	}, {
		name:    "not yet due",
		cj:      newCronJob("@hourly"),
		now:     t0.Add(-10 * time.Second),
		requeue: 10*time.Second + nextScheduleDelta,
	}, {
		name:         "@hourly runs on the hour",
		cj:           newCronJob("@hourly", func(cj *batchv1.CronJob) { cj.CreationTimestamp = metav1.NewTime(t0.Add(-2 * time.Hour)) }),
		now:          t0.Add(time.Second),
		actions:      []string{"create jobs cj-29543640", "update cronjobs/status"},
		events:       []string{"Normal SuccessfulCreate Created job cj-29543640"},
		requeue:      time.Hour - time.Second + nextScheduleDelta,
		active:       []string{"cj-29543640"},
		lastSchedule: &t0,
	}, {
		name: "time zone: 9:00 in Tokyo is 0:00 UTC",
		cj: newCronJob("0 9 * * *", func(cj *batchv1.CronJob) {
			cj.Spec.TimeZone = ptr.To("Asia/Tokyo")
			cj.CreationTimestamp = metav1.NewTime(t0.Add(-11 * time.Hour))
		}),
		now:          t0,
		actions:      []string{"create jobs cj-29543040", "update cronjobs/status"},
		events:       []string{"Normal SuccessfulCreate Created job cj-29543040"},
		requeue:      14*time.Hour + nextScheduleDelta,
		active:       []string{"cj-29543040"},
		lastSchedule: ptr.To(t0.Add(-10 * time.Hour)),
		check: func(t *testing.T, f *fixture) {
			j, _ := f.client.BatchV1().Jobs("ns").Get(context.Background(), "cj-29543040", metav1.GetOptions{})
			if got := j.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; got != "2026-03-04T09:00:00+09:00" {
				t.Errorf("scheduled-timestamp annotation %q", got)
			}
		},
	}, {
		name: "Forbid: the previous run is still active",
		cj: newCronJob("*/1 * * * *", func(cj *batchv1.CronJob) {
			cj.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent
			cj.Status.LastScheduleTime = ptr.To(metav1.NewTime(minute(-1)))
		}),
		jobs: func(cj *batchv1.CronJob) []*batchv1.Job {
			j := childJob(cj, minute(-1), "")
			active(j)(cj)
			return []*batchv1.Job{j}
		},
		now:     t0.Add(time.Second),
		events:  []string{"Normal JobAlreadyActive Not starting job because prior execution is running and concurrency policy is Forbid"},
		requeue: 59*time.Second + nextScheduleDelta,
		active:  []string{"cj-29543639"},
	}, {
		name: "Replace: the previous run is deleted",
		cj: newCronJob("*/1 * * * *", func(cj *batchv1.CronJob) {
			cj.Spec.ConcurrencyPolicy = batchv1.ReplaceConcurrent
			cj.Status.LastScheduleTime = ptr.To(metav1.NewTime(minute(-1)))
		}),
		jobs: func(cj *batchv1.CronJob) []*batchv1.Job {
			j := childJob(cj, minute(-1), "")
			active(j)(cj)
			return []*batchv1.Job{j}
		},
		now:          t0.Add(time.Second),
		actions:      []string{"create jobs cj-29543640", "delete jobs cj-29543639", "get jobs cj-29543639", "update cronjobs/status"},
		events:       []string{"Normal SuccessfulCreate Created job cj-29543640", "Normal SuccessfulDelete Deleted job cj-29543639"},
		requeue:      59*time.Second + nextScheduleDelta,
		active:       []string{"cj-29543640"},
		lastSchedule: &t0,
	}, {
		name: "startingDeadlineSeconds: a start within the deadline still runs",
		cj: newCronJob("@hourly", func(cj *batchv1.CronJob) {
			cj.Spec.StartingDeadlineSeconds = ptr.To(int64(3600))
			cj.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour - time.Minute))
		}),
		now:     t0.Add(30 * time.Minute),
		actions: []string{"create jobs cj-29543640", "update cronjobs/status"}, // 10:00 is within the hour
		events:  []string{"Normal SuccessfulCreate Created job cj-29543640"},
		requeue: 30*time.Minute + nextScheduleDelta,
		active:  []string{"cj-29543640"},
	}, {
		name: "startingDeadlineSeconds: just inside the deadline",
		cj: newCronJob("@hourly", func(cj *batchv1.CronJob) {
			cj.Spec.StartingDeadlineSeconds = ptr.To(int64(60))
			cj.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
		}),
		now:     t0.Add(59 * time.Second),
		actions: []string{"create jobs cj-29543640", "update cronjobs/status"},
		events:  []string{"Normal SuccessfulCreate Created job cj-29543640"},
		requeue: time.Hour - 59*time.Second + nextScheduleDelta,
		active:  []string{"cj-29543640"},
	}, {
		name: "many missed start times: only the latest runs, with a warning",
		cj: newCronJob("*/1 * * * *", func(cj *batchv1.CronJob) {
			cj.CreationTimestamp = metav1.NewTime(t0.Add(-200 * time.Minute))
		}),
		now:     t0.Add(10 * time.Second),
		actions: []string{"create jobs cj-29543640", "update cronjobs/status"},
		events: []string{
			"Normal SuccessfulCreate Created job cj-29543640",
			"Warning TooManyMissedTimes too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew",
		},
		requeue:      50*time.Second + nextScheduleDelta,
		active:       []string{"cj-29543640"},
		lastSchedule: &t0,
	}, {
		name: "startingDeadlineSeconds passed: the start is skipped",
		cj: newCronJob("@hourly", func(cj *batchv1.CronJob) {
			cj.Spec.StartingDeadlineSeconds = ptr.To(int64(60))
			cj.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
		}),
		now:     t0.Add(61 * time.Second),
		requeue: time.Hour - 61*time.Second + nextScheduleDelta,
	}, {
		name:   "suspended: nothing runs",
		cj:     newCronJob("*/1 * * * *", func(cj *batchv1.CronJob) { cj.Spec.Suspend = ptr.To(true) }),
		now:    t0.Add(5 * time.Second),
		active: nil,
	}, {
		name: "a finished job leaves active; lastSuccessfulTime",
		cj:   newCronJob("@hourly", func(cj *batchv1.CronJob) { cj.Status.LastScheduleTime = ptr.To(metav1.NewTime(t0)) }),
		jobs: func(cj *batchv1.CronJob) []*batchv1.Job {
			j := childJob(cj, t0, batchv1.JobComplete)
			active(j)(cj)
			return []*batchv1.Job{j}
		},
		now:     t0.Add(time.Minute),
		actions: []string{"update cronjobs/status"},
		events:  []string{"Normal SawCompletedJob Saw completed job: cj-29543640, condition: Complete"},
		requeue: 59*time.Minute + nextScheduleDelta,
		check: func(t *testing.T, f *fixture) {
			if got := f.cronJob().Status.LastSuccessfulTime; got == nil || !got.Time.Equal(t0.Add(10*time.Second)) {
				t.Errorf("lastSuccessfulTime %v", got)
			}
		},
	}, {
		name: "history limits: the oldest finished jobs go",
		cj: newCronJob("@hourly", func(cj *batchv1.CronJob) {
			cj.Spec.SuccessfulJobsHistoryLimit = ptr.To(int32(1))
			cj.Spec.FailedJobsHistoryLimit = ptr.To(int32(1))
			cj.Status.LastScheduleTime = ptr.To(metav1.NewTime(t0))
			cj.Status.LastSuccessfulTime = ptr.To(metav1.NewTime(t0.Add(10 * time.Second)))
		}),
		jobs: func(cj *batchv1.CronJob) []*batchv1.Job {
			return []*batchv1.Job{
				childJob(cj, t0.Add(-3*time.Hour), batchv1.JobComplete),
				childJob(cj, t0.Add(-2*time.Hour), batchv1.JobFailed),
				childJob(cj, t0.Add(-1*time.Hour), batchv1.JobFailed),
				childJob(cj, t0, batchv1.JobComplete),
			}
		},
		now:     t0.Add(time.Minute),
		actions: []string{"delete jobs cj-29543460", "delete jobs cj-29543520", "update cronjobs/status"},
		events:  []string{"Normal SuccessfulDelete Deleted job cj-29543460", "Normal SuccessfulDelete Deleted job cj-29543520"},
		requeue: 59*time.Minute + nextScheduleDelta,
	}, {
		name: "an unknown time zone starts nothing",
		cj: newCronJob("*/1 * * * *", func(cj *batchv1.CronJob) {
			cj.Spec.TimeZone = ptr.To("Mars/Olympus")
		}),
		now:    t0.Add(5 * time.Second),
		events: []string{`Warning UnknownTimeZone invalid timeZone: "Mars/Olympus": unknown time zone Mars/Olympus`},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var jobs []*batchv1.Job
			if tc.jobs != nil {
				jobs = tc.jobs(tc.cj)
			}
			objs := []runtime.Object{tc.cj}
			for _, j := range jobs {
				objs = append(objs, j)
			}
			f := newFixture(t, tc.now, objs...)
			err := f.c.Sync(context.Background(), "ns/cj")
			var requeue time.Duration
			if err != nil {
				if requeue = requeueOf(err); requeue == 0 {
					t.Fatalf("sync: %v", err)
				}
			}
			if requeue != tc.requeue {
				t.Errorf("requeue after %v, want %v", requeue, tc.requeue)
			}
			if d := cmp.Diff(tc.actions, actions(f.client.Actions())); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.events, f.events()); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
			cj := f.cronJob()
			var names []string
			for _, r := range cj.Status.Active {
				names = append(names, r.Name)
			}
			if tc.active != nil || len(tc.actions) > 0 {
				if d := cmp.Diff(tc.active, names); d != "" {
					t.Errorf("status.active (-want +got):\n%s", d)
				}
			}
			if tc.lastSchedule != nil && (cj.Status.LastScheduleTime == nil || !cj.Status.LastScheduleTime.Time.Equal(*tc.lastSchedule)) {
				t.Errorf("lastScheduleTime %v, want %v", cj.Status.LastScheduleTime, tc.lastSchedule)
			}
			if tc.check != nil {
				tc.check(t, f)
			}
		})
	}
}

// TestEveryMinuteOverAnHour drives the controller through an hour of a
// fake clock: each minute's Job is created once, and the history limit of
// 3 keeps the newest three after each run finishes.
func TestEveryMinuteOverAnHour(t *testing.T) {
	cj := newCronJob("* * * * *", func(cj *batchv1.CronJob) { cj.Spec.SuccessfulJobsHistoryLimit = ptr.To(int32(3)) })
	f := newFixture(t, t0, cj)
	created := 0
	for range 60 {
		err := f.c.Sync(context.Background(), "ns/cj")
		wait := requeueOf(err)
		if wait <= 0 {
			t.Fatalf("sync: %v", err)
		}
		for _, a := range f.client.Actions() {
			if a.GetVerb() == "create" {
				created++
			}
		}
		f.client.ClearActions()
		// Every Job finishes before the next start; the informers catch up.
		jobs, _ := f.client.BatchV1().Jobs("ns").List(context.Background(), metav1.ListOptions{})
		idx := f.informer.Batch().V1().Jobs().Informer().GetIndexer()
		for _, o := range idx.List() {
			_ = idx.Delete(o)
		}
		for i := range jobs.Items {
			j := jobs.Items[i].DeepCopy()
			if _, done := finishedType(j); !done {
				j.Status.StartTime = ptr.To(j.CreationTimestamp)
				j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
				j.Status.CompletionTime = ptr.To(metav1.NewTime(f.clock.Now()))
				if _, err := f.client.BatchV1().Jobs("ns").UpdateStatus(context.Background(), j, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			_ = idx.Add(j)
		}
		_ = f.informer.Batch().V1().CronJobs().Informer().GetIndexer().Update(f.cronJob())
		f.clock.Step(wait)
	}
	if created != 60 {
		t.Errorf("created %d jobs in 60 minutes, want 60", created)
	}
	// One more sync applies the limit to the last run (and starts the
	// next one).
	_ = f.c.Sync(context.Background(), "ns/cj")
	jobs, _ := f.client.BatchV1().Jobs("ns").List(context.Background(), metav1.ListOptions{})
	finished := 0
	for i := range jobs.Items {
		if _, ok := finishedType(&jobs.Items[i]); ok {
			finished++
		}
	}
	if finished != 3 || len(jobs.Items) != 4 {
		t.Errorf("%d finished jobs kept of %d, want 3 (successfulJobsHistoryLimit) and the new one", finished, len(jobs.Items))
	}
}

// requeueOf is the wait a worker.RequeueAfter error asks for (its text is
// "requeue after <d>"), else 0.
func requeueOf(err error) time.Duration {
	if err == nil || err.Error() == worker.RequeueAfter(0).Error() || !strings.HasPrefix(err.Error(), "requeue after ") {
		return 0
	}
	d, _ := time.ParseDuration(strings.TrimPrefix(err.Error(), "requeue after "))
	return d
}

type fixture struct {
	client   *fake.Clientset
	informer informers.SharedInformerFactory
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock
	c        *Controller
}

func newFixture(t *testing.T, now time.Time, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{client: fake.NewClientset(objs...), recorder: record.NewFakeRecorder(1000), clock: clocktesting.NewFakeClock(now)}
	f.client.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		j := a.(k8stesting.CreateAction).GetObject().(*batchv1.Job)
		j.UID = types.UID("uid-" + j.Name)
		return false, nil, nil
	})
	f.informer = informers.NewSharedInformerFactory(f.client, 0)
	ctrl, err := New(context.Background(), controllercontext.Context{Client: f.client, Informers: f.informer, Recorder: f.recorder, Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	f.c = ctrl.(*Controller)
	for _, o := range objs {
		switch o := o.(type) {
		case *batchv1.CronJob:
			_ = f.informer.Batch().V1().CronJobs().Informer().GetIndexer().Add(o)
		case *batchv1.Job:
			_ = f.informer.Batch().V1().Jobs().Informer().GetIndexer().Add(o)
		}
	}
	f.client.ClearActions()
	return f
}

func (f *fixture) cronJob() *batchv1.CronJob {
	cj, _ := f.client.BatchV1().CronJobs("ns").Get(context.Background(), "cj", metav1.GetOptions{})
	return cj
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			sort.Strings(out)
			return out
		}
	}
}

func actions(as []k8stesting.Action) []string {
	var out []string
	for _, a := range as {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			s += "/" + a.GetSubresource()
		}
		switch a := a.(type) {
		case k8stesting.CreateAction:
			if j, ok := a.GetObject().(*batchv1.Job); ok {
				s += " " + j.Name
			}
		case k8stesting.DeleteAction:
			s += " " + a.GetName()
		case k8stesting.GetAction:
			s += " " + a.GetName()
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
