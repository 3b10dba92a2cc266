package job

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
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
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type fixture struct {
	t        *testing.T
	client   *fake.Clientset
	informer informers.SharedInformerFactory
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock
	c        *Controller
}

// newFixture seeds the fake clientset and the informer caches with objs
// (the test feeds the informers; nothing is started).
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{t: t, client: fake.NewClientset(objs...), recorder: record.NewFakeRecorder(1000), clock: clocktesting.NewFakeClock(now)}
	var n atomic.Int32
	f.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		if p.Name == "" {
			p.Name = fmt.Sprintf("%s%05d", p.GenerateName, n.Add(1))
		}
		return false, nil, nil
	})
	// As the API server: a pod with finalizers gets a deletionTimestamp.
	f.client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		o, err := f.client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), d.GetNamespace(), d.GetName())
		if err != nil {
			return true, nil, err
		}
		p := o.(*corev1.Pod).DeepCopy()
		if len(p.Finalizers) == 0 {
			return false, nil, nil
		}
		if p.DeletionTimestamp == nil {
			p.DeletionTimestamp = ptr.To(metav1.NewTime(f.clock.Now()))
		}
		return true, p, f.client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), p, d.GetNamespace())
	})
	f.informer = informers.NewSharedInformerFactory(f.client, 0)
	ctrl, err := New(context.Background(), controllercontext.Context{Client: f.client, Informers: f.informer, Recorder: f.recorder, Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	f.c = ctrl.(*Controller)
	for _, o := range objs {
		f.feed(o)
	}
	f.client.ClearActions()
	return f
}

func (f *fixture) feed(o runtime.Object) {
	var err error
	switch o := o.(type) {
	case *batchv1.Job:
		err = f.informer.Batch().V1().Jobs().Informer().GetIndexer().Update(o)
	case *corev1.Pod:
		err = f.informer.Core().V1().Pods().Informer().GetIndexer().Update(o)
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

// sync runs one sync of ns/name and returns the API actions it made.
func (f *fixture) sync(name string) []string {
	f.t.Helper()
	f.client.ClearActions()
	if err := f.c.Sync(context.Background(), "ns/"+name); err != nil {
		f.t.Fatalf("sync: %v", err)
	}
	return actions(f.client.Actions())
}

// refeed copies the API's current jobs and pods into the informer caches,
// as the watch would, and forgets the finished-job note (as the update
// event does).
func (f *fixture) refeed() {
	jobs, _ := f.client.BatchV1().Jobs("ns").List(context.Background(), metav1.ListOptions{})
	for i := range jobs.Items {
		f.feed(&jobs.Items[i])
	}
	idx := f.informer.Core().V1().Pods().Informer().GetIndexer()
	for _, o := range idx.List() {
		_ = idx.Delete(o)
	}
	pods, _ := f.client.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	for i := range pods.Items {
		f.feed(&pods.Items[i])
		f.c.finalizerExpectations.observed("ns/"+pods.Items[i].OwnerReferences[0].Name, pods.Items[i].UID)
	}
	f.c.expectations = newExpectations(f.clock)
}

func (f *fixture) job(name string) *batchv1.Job {
	j, err := f.client.BatchV1().Jobs("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return j
}

func (f *fixture) pods() []corev1.Pod {
	l, _ := f.client.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// actions summarises API actions as "verb resource[/sub] [name]".
func actions(as []k8stesting.Action) []string {
	var out []string
	for _, a := range as {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		s := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			s += "/" + a.GetSubresource()
		}
		switch a := a.(type) {
		case k8stesting.PatchAction:
			s += " " + a.GetName()
		case k8stesting.DeleteAction:
			s += " " + a.GetName()
		}
		out = append(out, s)
	}
	sort.Strings(out) // pods are created and deleted concurrently
	return out
}

type jobOpt func(*batchv1.Job)

func newJob(name string, completions, parallelism int32, opts ...jobOpt) *batchv1.Job {
	l := map[string]string{batchv1.ControllerUidLabel: "uid-" + name, batchv1.JobNameLabel: name}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Generation: 1, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Spec: batchv1.JobSpec{
			Completions:          ptr.To(completions),
			Parallelism:          ptr.To(parallelism),
			BackoffLimit:         ptr.To(int32(6)),
			CompletionMode:       ptr.To(batchv1.NonIndexedCompletion),
			Suspend:              ptr.To(false),
			PodReplacementPolicy: ptr.To(batchv1.TerminatingOrFailed),
			Selector:             &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: "uid-" + name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
	for _, o := range opts {
		o(j)
	}
	return j
}

func indexed(j *batchv1.Job) { j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion) }
func started(ago time.Duration) jobOpt {
	return func(j *batchv1.Job) { j.Status.StartTime = ptr.To(metav1.NewTime(now.Add(-ago))) }
}

type podOpt func(*corev1.Pod)

func newPod(j *batchv1.Job, name string, phase corev1.PodPhase, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", UID: types.UID("uid-" + name), ResourceVersion: "1",
			Labels:            j.Spec.Template.Labels,
			Finalizers:        []string{batchv1.JobTrackingFinalizer},
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(j, jobKind)},
			CreationTimestamp: metav1.NewTime(now.Add(-time.Minute)),
		},
		Spec:   corev1.PodSpec{NodeName: "node"},
		Status: corev1.PodStatus{Phase: phase},
	}
	if phase == corev1.PodRunning {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func index(ix int) podOpt {
	return func(p *corev1.Pod) {
		p.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: fmt.Sprint(ix)}
	}
}
func exitCode(code int32, finishedAgo time.Duration) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, FinishedAt: metav1.NewTime(now.Add(-finishedAgo)),
		}}}}
	}
}

// conds renders conditions as "Type=Status/Reason".
func conds(j *batchv1.Job) []string {
	var out []string
	for _, c := range j.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return out
}

func TestCreatesPods(t *testing.T) {
	t.Run("non-indexed: parallelism pods with the finalizer and owner", func(t *testing.T) {
		j := newJob("pi", 3, 2)
		f := newFixture(t, j)
		got := f.sync("pi")
		want := []string{"create pods", "create pods", "update jobs/status"}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("actions (-want +got):\n%s", d)
		}
		pods := f.pods()
		if len(pods) != 2 {
			t.Fatalf("pods = %d, want 2", len(pods))
		}
		for _, p := range pods {
			if !strings.HasPrefix(p.Name, "pi-") || !hasTrackingFinalizer(&p) || metav1.GetControllerOf(&p).UID != j.UID {
				t.Errorf("pod %s: finalizers %v owner %v", p.Name, p.Finalizers, p.OwnerReferences)
			}
		}
		st := f.job("pi").Status
		if st.Active != 2 || st.StartTime == nil || !st.StartTime.Time.Equal(now) || *st.Ready != 0 {
			t.Errorf("status = active %d ready %v start %v", st.Active, st.Ready, st.StartTime)
		}
		if d := cmp.Diff([]string{"Normal SuccessfulCreate Created pod: pi-00001", "Normal SuccessfulCreate Created pod: pi-00002"}, sorted(f.events())); d != "" {
			t.Errorf("events (-want +got):\n%s", d)
		}
	})
	t.Run("indexed: one pod per index with annotation, label, env and hostname", func(t *testing.T) {
		j := newJob("idx", 5, 5, indexed)
		f := newFixture(t, j, newPod(j, "idx-1-abc", corev1.PodRunning, index(1)))
		f.sync("idx")
		var got []string
		for _, p := range f.pods() {
			env := ""
			if len(p.Spec.Containers) > 0 && len(p.Spec.Containers[0].Env) == 1 {
				e := p.Spec.Containers[0].Env[0]
				env = e.Name + "<-" + e.ValueFrom.FieldRef.FieldPath
			}
			got = append(got, fmt.Sprintf("%s ann=%s label=%s host=%s env=%s", p.GenerateName+"*",
				p.Annotations[batchv1.JobCompletionIndexAnnotation], p.Labels[batchv1.JobCompletionIndexAnnotation], p.Spec.Hostname, env))
		}
		want := []string{
			"* ann=1 label= host= env=", // the running pod of index 1
			"idx-0-* ann=0 label=0 host=idx-0 env=JOB_COMPLETION_INDEX<-metadata.labels['batch.kubernetes.io/job-completion-index']",
			"idx-2-* ann=2 label=2 host=idx-2 env=JOB_COMPLETION_INDEX<-metadata.labels['batch.kubernetes.io/job-completion-index']",
			"idx-3-* ann=3 label=3 host=idx-3 env=JOB_COMPLETION_INDEX<-metadata.labels['batch.kubernetes.io/job-completion-index']",
			"idx-4-* ann=4 label=4 host=idx-4 env=JOB_COMPLETION_INDEX<-metadata.labels['batch.kubernetes.io/job-completion-index']",
		}
		sort.Strings(got)
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("pods (-want +got):\n%s", d)
		}
	})
}

func sorted(s []string) []string { sort.Strings(s); return s }

// TestTracking walks a Job through pods finishing, sync by sync, as the
// informers would see the API.
func TestTracking(t *testing.T) {
	j := newJob("t", 2, 2, started(time.Minute))
	j.Status.Active = 2
	j.Status.Ready = ptr.To(int32(2))
	p1 := newPod(j, "t-1", corev1.PodSucceeded)
	p2 := newPod(j, "t-2", corev1.PodRunning)
	f := newFixture(t, j, p1, p2)

	// One pod succeeded: uncounted first, then its finalizer goes, then it
	// is counted; no replacement (1 left to do, 1 running).
	got := f.sync("t")
	want := []string{"patch pods t-1", "update jobs/status", "update jobs/status"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("actions (-want +got):\n%s", d)
	}
	var statuses []string
	for _, a := range f.client.Actions() {
		if u, ok := a.(k8stesting.UpdateAction); ok {
			s := u.GetObject().(*batchv1.Job).Status
			statuses = append(statuses, fmt.Sprintf("succeeded=%d uncounted=%v active=%d", s.Succeeded, s.UncountedTerminatedPods.Succeeded, s.Active))
		}
	}
	if d := cmp.Diff([]string{"succeeded=0 uncounted=[uid-t-1] active=1", "succeeded=1 uncounted=[] active=1"}, statuses); d != "" {
		t.Errorf("status writes (-want +got):\n%s", d)
	}

	// A stale cache that still shows t-1 with its finalizer must not count
	// it again.
	f.feed(f.job("t"))
	got = f.sync("t")
	if len(got) != 0 || f.job("t").Status.Succeeded != 1 {
		t.Errorf("stale resync: actions %v, succeeded %d", got, f.job("t").Status.Succeeded)
	}

	// The second pod succeeds: SuccessCriteriaMet then Complete.
	f.refeed()
	p2 = f.pods()[1].DeepCopy()
	p2.Status.Phase = corev1.PodSucceeded
	p2.Status.Conditions = nil
	if _, err := f.client.CoreV1().Pods("ns").UpdateStatus(context.Background(), p2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.refeed()
	f.clock.Step(time.Second)
	f.sync("t")
	done := f.job("t")
	if d := cmp.Diff([]string{"SuccessCriteriaMet=True/CompletionsReached", "Complete=True/CompletionsReached"}, conds(done)); d != "" {
		t.Errorf("conditions (-want +got):\n%s", d)
	}
	if done.Status.Succeeded != 2 || done.Status.Active != 0 || done.Status.CompletionTime == nil {
		t.Errorf("status %+v", done.Status)
	}
	for _, p := range f.pods() {
		if hasTrackingFinalizer(&p) {
			t.Errorf("pod %s keeps its finalizer", p.Name)
		}
	}
	if ev := f.events(); len(ev) == 0 || ev[len(ev)-1] != "Normal Completed Job completed" {
		t.Errorf("events = %v", ev)
	}
	// Marked finished: no further sync until the update is seen.
	if got := f.sync("t"); len(got) != 0 {
		t.Errorf("sync after finish made %v", got)
	}
}

func TestFailures(t *testing.T) {
	failJob := &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}}},
		{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}},
	}}
	cases := []struct {
		name    string
		job     *batchv1.Job
		pods    func(j *batchv1.Job) []*corev1.Pod
		want    []string // actions of the first sync
		conds   []string // conditions after syncing until quiet
		failed  int32
		events  []string // warning events
		created int      // pods created over the syncs
	}{{
		name: "backoff limit exceeded",
		job:  newJob("b", 5, 1, started(time.Minute), func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr.To(int32(1)) }),
		pods: func(j *batchv1.Job) []*corev1.Pod {
			return []*corev1.Pod{newPod(j, "b-1", corev1.PodFailed, exitCode(1, 30*time.Second)), newPod(j, "b-2", corev1.PodFailed, exitCode(1, 20*time.Second))}
		},
		want:   []string{"patch pods b-1", "patch pods b-2", "update jobs/status", "update jobs/status"},
		conds:  []string{"FailureTarget=True/BackoffLimitExceeded", "Failed=True/BackoffLimitExceeded"},
		failed: 2,
		events: []string{"Warning BackoffLimitExceeded Job has reached the specified backoff limit"},
	}, {
		name: "pod failure policy FailJob on an exit code",
		job: newJob("p", 5, 2, started(time.Minute), func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = failJob
			j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
		}),
		pods: func(j *batchv1.Job) []*corev1.Pod {
			return []*corev1.Pod{newPod(j, "p-1", corev1.PodFailed, exitCode(42, time.Second)), newPod(j, "p-2", corev1.PodRunning)}
		},
		want:   []string{"delete pods p-2", "patch pods p-1", "patch pods p-2", "update jobs/status", "update jobs/status"},
		conds:  []string{"FailureTarget=True/PodFailurePolicy", "Failed=True/PodFailurePolicy"},
		failed: 2,
		events: []string{"Warning PodFailurePolicy Container c for pod ns/p-1 failed with exit code 42 matching FailJob rule at index 0"},
	}, {
		name: "pod failure policy Ignore: not counted, replaced at once",
		job: newJob("i", 5, 1, started(time.Minute), func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = failJob
			j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
		}),
		pods: func(j *batchv1.Job) []*corev1.Pod {
			return []*corev1.Pod{newPod(j, "i-1", corev1.PodFailed, func(p *corev1.Pod) {
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}
			})}
		},
		want:    []string{"create pods", "patch pods i-1", "update jobs/status"},
		failed:  0,
		created: 1,
	}, {
		name: "active deadline exceeded",
		job:  newJob("d", 5, 2, started(2*time.Minute), func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = ptr.To(int64(60)) }),
		pods: func(j *batchv1.Job) []*corev1.Pod {
			return []*corev1.Pod{newPod(j, "d-1", corev1.PodRunning), newPod(j, "d-2", corev1.PodRunning)}
		},
		want:   []string{"delete pods d-1", "delete pods d-2", "patch pods d-1", "patch pods d-2", "update jobs/status", "update jobs/status"},
		conds:  []string{"FailureTarget=True/DeadlineExceeded", "Failed=True/DeadlineExceeded"},
		failed: 2,
		events: []string{"Warning DeadlineExceeded Job was active longer than specified deadline"},
	}, {
		name: "pod failure policy FailIndex with maxFailedIndexes 0 fails the job",
		job: newJob("fi", 2, 2, indexed, started(time.Minute), func(j *batchv1.Job) {
			j.Spec.BackoffLimitPerIndex = ptr.To(int32(3))
			j.Spec.MaxFailedIndexes = ptr.To(int32(0))
			j.Spec.BackoffLimit = ptr.To(int32(1 << 30))
			j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				{Action: batchv1.PodFailurePolicyActionFailIndex, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{5}}},
			}}
		}),
		pods: func(j *batchv1.Job) []*corev1.Pod {
			return []*corev1.Pod{newPod(j, "fi-0", corev1.PodFailed, index(0), exitCode(5, time.Second)), newPod(j, "fi-1", corev1.PodRunning, index(1))}
		},
		want:   []string{"delete pods fi-1", "patch pods fi-0", "patch pods fi-1", "update jobs/status", "update jobs/status"},
		conds:  []string{"FailureTarget=True/MaxFailedIndexesExceeded", "Failed=True/MaxFailedIndexesExceeded"},
		failed: 2,
		events: []string{"Warning MaxFailedIndexesExceeded Job has exceeded the specified maximal number of failed indexes"},
	}, {
		name: "backoffLimitPerIndex: the index fails, the others run",
		job: newJob("x", 3, 3, indexed, started(time.Minute), func(j *batchv1.Job) {
			j.Spec.BackoffLimitPerIndex = ptr.To(int32(0))
			j.Spec.BackoffLimit = ptr.To(int32(1 << 30))
		}),
		pods: func(j *batchv1.Job) []*corev1.Pod {
			return []*corev1.Pod{
				newPod(j, "x-0", corev1.PodFailed, index(0), exitCode(1, time.Second)),
				newPod(j, "x-1", corev1.PodRunning, index(1)),
				newPod(j, "x-2", corev1.PodRunning, index(2)),
			}
		},
		want:   []string{"patch pods x-0", "update jobs/status", "update jobs/status"},
		failed: 1,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{tc.job}
			for _, p := range tc.pods(tc.job) {
				objs = append(objs, p)
			}
			f := newFixture(t, objs...)
			got := f.sync(tc.job.Name)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
			// Let the deleted pods go (kubelet) and sync until quiet.
			for range 3 {
				f.removeReleased()
				f.refeed()
				f.c.finished.Clear()
				f.sync(tc.job.Name)
			}
			j := f.job(tc.job.Name)
			if d := cmp.Diff(tc.conds, conds(j)); d != "" {
				t.Errorf("conditions (-want +got):\n%s", d)
			}
			if j.Status.Failed != tc.failed {
				t.Errorf("failed = %d, want %d", j.Status.Failed, tc.failed)
			}
			var warnings []string
			for _, e := range f.events() {
				if strings.HasPrefix(e, "Warning") {
					warnings = append(warnings, e)
				}
			}
			if d := cmp.Diff(tc.events, warnings); d != "" {
				t.Errorf("warning events (-want +got):\n%s", d)
			}
		})
	}
}

// removeReleased removes pods being deleted whose finalizers are gone, as
// the API server does.
func (f *fixture) removeReleased() {
	for _, p := range f.pods() {
		if p.DeletionTimestamp != nil && len(p.Finalizers) == 0 {
			_ = f.client.CoreV1().Pods("ns").Delete(context.Background(), p.Name, metav1.DeleteOptions{})
		}
	}
}

func TestBackoffBeforeReplacingFailedPods(t *testing.T) {
	j := newJob("r", 5, 1, started(time.Hour))
	j.Status.Failed = 2 // two earlier failures: 10 s, 20 s, now 40 s
	f := newFixture(t, j, newPod(j, "r-3", corev1.PodFailed, exitCode(1, 5*time.Second)))
	f.c.backoff.set("ns/r", backoffRecord{failuresAfterLastSuccess: 2, lastFailureTime: ptr.To(now.Add(-time.Minute))})
	if got := f.sync("r"); slicesContain(got, "create pods") {
		t.Fatalf("replaced at once: %v", got)
	}
	if f.job("r").Status.Failed != 3 {
		t.Fatalf("failed = %d", f.job("r").Status.Failed)
	}
	for _, step := range []struct {
		after  time.Duration
		create bool
	}{{30 * time.Second, false}, {6 * time.Second, true}} {
		f.clock.Step(step.after)
		f.refeed()
		got := f.sync("r")
		if slicesContain(got, "create pods") != step.create {
			t.Errorf("%v after the failure: actions %v, want create=%v", f.clock.Since(now.Add(-5*time.Second)), got, step.create)
		}
	}
}

func slicesContain(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestRemainingBackoff(t *testing.T) {
	last := now
	cases := []struct {
		failures int32
		elapsed  time.Duration
		want     time.Duration
	}{
		{0, 0, 0},
		{1, 0, 10 * time.Second},
		{1, 4 * time.Second, 6 * time.Second},
		{3, 0, 40 * time.Second},
		{7, 0, 10 * time.Minute}, // 640 s capped
		{20, time.Minute, 9 * time.Minute},
		{2, time.Hour, 0},
	}
	for _, tc := range cases {
		if got := remainingBackoff(now.Add(tc.elapsed), DefaultPodFailureBackoff, MaxPodFailureBackoff, tc.failures, &last); got != tc.want {
			t.Errorf("failures %d after %v: %v, want %v", tc.failures, tc.elapsed, got, tc.want)
		}
	}
}

func TestSuspendAndResume(t *testing.T) {
	j := newJob("s", 4, 2, started(time.Minute), func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) })
	j.Status.Active = 2
	f := newFixture(t, j, newPod(j, "s-1", corev1.PodRunning), newPod(j, "s-2", corev1.PodPending))
	got := f.sync("s")
	want := []string{"delete pods s-1", "delete pods s-2", "patch pods s-1", "patch pods s-2", "update jobs/status"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("actions (-want +got):\n%s", d)
	}
	js := f.job("s")
	if d := cmp.Diff([]string{"Suspended=True/JobSuspended"}, conds(js)); d != "" {
		t.Errorf("conditions (-want +got):\n%s", d)
	}
	if js.Status.Active != 0 || js.Status.Failed != 0 || js.Status.StartTime != nil {
		t.Errorf("suspended status: active %d failed %d start %v", js.Status.Active, js.Status.Failed, js.Status.StartTime)
	}
	f.removeReleased()
	js.Spec.Suspend = ptr.To(false)
	if _, err := f.client.BatchV1().Jobs("ns").Update(context.Background(), js, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.refeed()
	f.clock.Step(time.Minute)
	got = f.sync("s")
	if d := cmp.Diff([]string{"create pods", "create pods", "update jobs/status"}, got); d != "" {
		t.Errorf("resume actions (-want +got):\n%s", d)
	}
	js = f.job("s")
	if d := cmp.Diff([]string{"Suspended=False/JobResumed"}, conds(js)); d != "" {
		t.Errorf("conditions (-want +got):\n%s", d)
	}
	if !js.Status.StartTime.Time.Equal(f.clock.Now()) {
		t.Errorf("startTime %v, want the resume time", js.Status.StartTime)
	}
	ev := f.events()
	if !slicesContain(ev, "Normal Suspended Job suspended") || !slicesContain(ev, "Normal Resumed Job resumed") {
		t.Errorf("events %v", ev)
	}
}

func TestIndexedCompletion(t *testing.T) {
	t.Run("completed indexes and success", func(t *testing.T) {
		j := newJob("c", 5, 5, indexed, started(time.Minute))
		j.Status.CompletedIndexes = "0,1"
		j.Status.Succeeded = 2
		f := newFixture(t, j,
			newPod(j, "c-2", corev1.PodSucceeded, index(2)),
			newPod(j, "c-2b", corev1.PodSucceeded, index(2)), // a duplicate success counts once
			newPod(j, "c-4", corev1.PodSucceeded, index(4)),
			newPod(j, "c-3", corev1.PodRunning, index(3)))
		f.sync("c")
		js := f.job("c")
		if js.Status.CompletedIndexes != "0-2,4" || js.Status.Succeeded != 4 || js.Status.Active != 1 {
			t.Errorf("completedIndexes %q succeeded %d active %d", js.Status.CompletedIndexes, js.Status.Succeeded, js.Status.Active)
		}
		if len(conds(js)) != 0 {
			t.Errorf("conditions %v", conds(js))
		}
	})
	t.Run("success policy ends the job and deletes the rest", func(t *testing.T) {
		j := newJob("sp", 4, 4, indexed, started(time.Minute), func(j *batchv1.Job) {
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0")}}}
		})
		f := newFixture(t, j,
			newPod(j, "sp-0", corev1.PodSucceeded, index(0)),
			newPod(j, "sp-1", corev1.PodRunning, index(1)))
		got := f.sync("sp")
		if !slicesContain(got, "delete pods sp-1") {
			t.Errorf("actions %v: want sp-1 deleted", got)
		}
		for range 2 {
			f.removeReleased()
			f.refeed()
			f.c.finished.Clear()
			f.sync("sp")
		}
		js := f.job("sp")
		if d := cmp.Diff([]string{"SuccessCriteriaMet=True/SuccessPolicy", "Complete=True/SuccessPolicy"}, conds(js)); d != "" {
			t.Errorf("conditions (-want +got):\n%s", d)
		}
		if js.Status.CompletedIndexes != "0" || js.Status.Failed != 0 {
			t.Errorf("completedIndexes %q failed %d", js.Status.CompletedIndexes, js.Status.Failed)
		}
	})
}

func TestIndexSet(t *testing.T) {
	cases := []struct {
		in    string
		add   []int
		limit int
		want  string
		total int
	}{
		{"", []int{3, 1, 2}, 10, "1-3", 3},
		{"0,1", []int{2, 4}, 10, "0-2,4", 4},
		{"1,3-5,7", nil, 10, "1,3-5,7", 5},
		{"1,3-5,7", []int{6}, 10, "1,3-7", 6},
		{"1-9", nil, 5, "1-4", 4},
		{"x,2", []int{3}, 5, "2,3", 2},
	}
	for _, tc := range cases {
		s := parseIndexSet(tc.in, tc.limit).with(tc.add...)
		if s.String() != tc.want || s.total() != tc.total {
			t.Errorf("%q + %v = %q (%d), want %q (%d)", tc.in, tc.add, s.String(), s.total(), tc.want, tc.total)
		}
	}
}

func TestAdoptionAndOrphans(t *testing.T) {
	t.Run("a matching orphan is adopted with the tracking finalizer", func(t *testing.T) {
		j := newJob("a", 1, 1, started(time.Minute))
		orphan := newPod(j, "stray", corev1.PodRunning, func(p *corev1.Pod) { p.OwnerReferences = nil; p.Finalizers = nil })
		f := newFixture(t, j, orphan)
		got := f.sync("a")
		if d := cmp.Diff([]string{"get jobs", "patch pods stray", "update jobs/status"}, got); d != "" {
			t.Errorf("actions (-want +got):\n%s", d)
		}
		p := f.pods()[0]
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != j.UID || !hasTrackingFinalizer(&p) {
			t.Errorf("adopted pod: owners %v finalizers %v", p.OwnerReferences, p.Finalizers)
		}
		if f.job("a").Status.Active != 1 {
			t.Errorf("active = %d, want the adopted pod", f.job("a").Status.Active)
		}
	})
	t.Run("the finalizer of a pod whose Job is gone is removed", func(t *testing.T) {
		j := newJob("gone", 1, 1)
		p := newPod(j, "left", corev1.PodSucceeded)
		f := newFixture(t, p) // the Job itself is not there
		if err := f.c.syncOrphan(context.Background(), "pod:ns/left"); err != nil {
			t.Fatal(err)
		}
		if got := f.pods()[0]; hasTrackingFinalizer(&got) {
			t.Errorf("finalizers %v", got.Finalizers)
		}
	})
	t.Run("a running Job's pod keeps its finalizer", func(t *testing.T) {
		j := newJob("live", 1, 1)
		f := newFixture(t, j, newPod(j, "mine", corev1.PodRunning))
		if err := f.c.syncOrphan(context.Background(), "selector:ns/"+batchv1.ControllerUidLabel+"=uid-live"); err != nil {
			t.Fatal(err)
		}
		if got := f.pods()[0]; !hasTrackingFinalizer(&got) {
			t.Error("finalizer removed from a running Job's pod")
		}
	})
}

func TestPodReplacementPolicy(t *testing.T) {
	cases := []struct {
		policy      batchv1.PodReplacementPolicy
		replaced    bool
		failed      int32
		terminating int32
	}{
		// A terminating pod counts as failed at once, finished at its
		// deletion time less its grace period (31 s ago, past the 10 s
		// backoff), so it is replaced at once.
		{batchv1.TerminatingOrFailed, true, 1, 1},
		// It is neither failed nor replaced until it is Failed.
		{batchv1.Failed, false, 0, 1},
	}
	for _, tc := range cases {
		t.Run(string(tc.policy), func(t *testing.T) {
			j := newJob("r", 2, 1, started(time.Minute), func(j *batchv1.Job) { j.Spec.PodReplacementPolicy = ptr.To(tc.policy) })
			gone := newPod(j, "r-1", corev1.PodRunning, func(p *corev1.Pod) {
				p.DeletionTimestamp = ptr.To(metav1.NewTime(now.Add(-time.Second)))
				p.DeletionGracePeriodSeconds = ptr.To(int64(30))
			})
			f := newFixture(t, j, gone)
			got := f.sync("r")
			if slicesContain(got, "create pods") != tc.replaced {
				t.Errorf("actions %v, want replaced=%v", got, tc.replaced)
			}
			active := int32(0)
			if tc.replaced {
				active = 1
			}
			st := f.job("r").Status
			if st.Failed != tc.failed || ptr.Deref(st.Terminating, -1) != tc.terminating || st.Active != active {
				t.Errorf("failed %d terminating %v active %d; want %d, %d, %d", st.Failed, ptr.Deref(st.Terminating, -1), st.Active, tc.failed, tc.terminating, active)
			}
		})
	}
}
