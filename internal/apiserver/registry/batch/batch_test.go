package batch

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ptr "k8s.io/utils/ptr"
)

var ctx = context.Background()

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Type.String())
	}
	return out
}

func job(mutate ...func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "default", UID: "uid-1"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "pi", Image: "perl"}},
		}}},
	}
	for _, m := range mutate {
		m(j)
	}
	return j
}

func TestJobCreateGeneratesSelectorAndDefaults(t *testing.T) {
	j := job()
	j.Status.Active = 4
	JobStrategy{}.PrepareForCreate(ctx, j)
	wantLabels := map[string]string{
		"batch.kubernetes.io/controller-uid": "uid-1", "batch.kubernetes.io/job-name": "pi",
		"controller-uid": "uid-1", "job-name": "pi",
	}
	if diff := cmp.Diff(wantLabels, j.Spec.Template.Labels); diff != "" {
		t.Errorf("template labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantLabels, j.Labels); diff != "" {
		t.Errorf("job labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "uid-1"}}, j.Spec.Selector); diff != "" {
		t.Errorf("selector (-want +got):\n%s", diff)
	}
	nonIndexed, replace := batchv1.NonIndexedCompletion, batchv1.TerminatingOrFailed
	want := batchv1.JobSpec{
		Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](6),
		CompletionMode: &nonIndexed, Suspend: ptr.To(false), ManualSelector: ptr.To(false), PodReplacementPolicy: &replace,
	}
	got := j.Spec
	got.Selector, got.Template = nil, corev1.PodTemplateSpec{}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if j.Generation != 1 || j.Status.Active != 0 {
		t.Errorf("generation %d status %+v", j.Generation, j.Status)
	}
	if errs := (JobStrategy{}).Validate(ctx, j); len(errs) > 0 {
		t.Errorf("generated job invalid: %v", errs)
	}
}

func TestJobValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*batchv1.Job)
		want   []string
	}{
		{name: "valid"},
		{name: "restart always", mutate: func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways },
			want: []string{"spec.template.spec.restartPolicy: Unsupported value"}},
		{name: "negative parallelism", mutate: func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](-1) },
			want: []string{"spec.parallelism: Invalid value"}},
		{name: "indexed without completions", mutate: func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
			j.Spec.Completions = nil
		}, want: []string{"spec.completions: Required value"}},
		{name: "tampered uid label", mutate: func(j *batchv1.Job) { j.Spec.Template.Labels["controller-uid"] = "other" },
			want: []string{"spec.template.metadata.labels[controller-uid]: Invalid value"}},
		{name: "selector not generated", mutate: func(j *batchv1.Job) {
			j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"job-name": "pi"}}
		}, want: []string{"spec.selector: Invalid value"}},
		{name: "manual selector mismatch", mutate: func(j *batchv1.Job) {
			j.Spec.ManualSelector = ptr.To(true)
			j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
		}, want: []string{"spec.template.metadata.labels: Invalid value"}},
		{name: "pod failure policy needs Never", mutate: func(j *batchv1.Job) {
			j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{}
			j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
		}, want: []string{"spec.template.spec.restartPolicy: Invalid value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := job()
			JobStrategy{}.PrepareForCreate(ctx, j)
			if tc.mutate != nil {
				tc.mutate(j)
			}
			if diff := cmp.Diff(tc.want, errStrings(JobStrategy{}.Validate(ctx, j))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestJobUpdate(t *testing.T) {
	old := job()
	JobStrategy{}.PrepareForCreate(ctx, old)
	old.Status.Succeeded = 1
	tests := []struct {
		name    string
		old     func(*batchv1.Job)
		mutate  func(*batchv1.Job)
		want    []string
		wantGen int64
	}{
		{name: "suspend may change", mutate: func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }, wantGen: 2},
		{name: "template is immutable", mutate: func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "x" },
			want: []string{"spec.template: Invalid value"}, wantGen: 2},
		{name: "suspended job may move", old: func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) },
			mutate: func(j *batchv1.Job) { j.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "a"} }, wantGen: 2},
		{name: "completions immutable", mutate: func(j *batchv1.Job) { j.Spec.Completions = ptr.To[int32](3) },
			want: []string{"spec.completions: Invalid value"}, wantGen: 2},
		{name: "selector immutable", mutate: func(j *batchv1.Job) { j.Spec.Selector.MatchLabels["job-name"] = "pi" },
			want: []string{"spec.selector: Invalid value"}, wantGen: 2},
		{name: "metadata only", mutate: func(j *batchv1.Job) { j.Annotations = map[string]string{"a": "b"} }, wantGen: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := old.DeepCopy()
			if tc.old != nil {
				tc.old(o)
			}
			j := o.DeepCopy()
			j.Status = batchv1.JobStatus{}
			tc.mutate(j)
			JobStrategy{}.PrepareForUpdate(ctx, j, o)
			if diff := cmp.Diff(tc.want, errStrings(JobStrategy{}.ValidateUpdate(ctx, j, o))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if j.Generation != tc.wantGen || j.Status.Succeeded != 1 {
				t.Errorf("generation %d (want %d), status %+v", j.Generation, tc.wantGen, j.Status)
			}
		})
	}
}

func TestJobStatusUpdate(t *testing.T) {
	old := job()
	JobStrategy{}.PrepareForCreate(ctx, old)
	j := old.DeepCopy()
	j.Spec.Parallelism = ptr.To[int32](9)
	j.Status.Failed = -1
	JobStrategy{}.PrepareForStatusUpdate(ctx, j, old)
	if *j.Spec.Parallelism != 1 {
		t.Errorf("status update changed the spec")
	}
	if diff := cmp.Diff([]string{"status.failed: Invalid value"}, errStrings(JobStrategy{}.ValidateStatusUpdate(ctx, j, old))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := (JobStrategy{}).FieldSet(&batchv1.Job{Status: batchv1.JobStatus{Succeeded: 2}}); got["status.successful"] != "2" {
		t.Errorf("field set %v", got)
	}
}

func TestJobTable(t *testing.T) {
	start := metav1.Now()
	end := metav1.NewTime(start.Add(90e9))
	tests := []struct {
		name string
		j    *batchv1.Job
		want []interface{}
	}{
		{name: "complete", j: job(func(j *batchv1.Job) {
			j.Spec.Completions = ptr.To[int32](1)
			j.Status = batchv1.JobStatus{Succeeded: 1, StartTime: &start, CompletionTime: &end,
				Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}
		}), want: []interface{}{"pi", "Complete", "1/1", "90s"}},
		{name: "parallel running", j: job(func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](3) }),
			want: []interface{}{"pi", "Running", "0/1 of 3", ""}},
		{name: "suspended", j: job(func(j *batchv1.Job) {
			j.Spec.Completions = ptr.To[int32](2)
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue}}
		}), want: []interface{}{"pi", "Suspended", "0/2", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			row, err := JobStrategy{}.TableRow(tc.j)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, row[:4]); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func cronJob(mutate ...func(*batchv1.CronJob)) *batchv1.CronJob {
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "default"},
		Spec: batchv1.CronJobSpec{
			Schedule:    "0 3 * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: job().Spec},
		},
	}
	for _, m := range mutate {
		m(cj)
	}
	return cj
}

func TestCronJobDefaultsAndValidate(t *testing.T) {
	cj := cronJob()
	CronJobStrategy{}.PrepareForCreate(ctx, cj)
	want := []interface{}{batchv1.AllowConcurrent, false, int32(3), int32(1), int64(1)}
	got := []interface{}{cj.Spec.ConcurrencyPolicy, *cj.Spec.Suspend, *cj.Spec.SuccessfulJobsHistoryLimit, *cj.Spec.FailedJobsHistoryLimit, cj.Generation}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if cj.Spec.JobTemplate.Spec.BackoffLimit != nil {
		t.Errorf("job template spec was defaulted like a job")
	}
	tests := []struct {
		name   string
		mutate func(*batchv1.CronJob)
		want   []string
	}{
		{name: "valid"},
		{name: "descriptor", mutate: func(c *batchv1.CronJob) { c.Spec.Schedule = "@hourly" }},
		{name: "steps and names", mutate: func(c *batchv1.CronJob) { c.Spec.Schedule = "*/15 9-17 * jan-jun mon-fri" }},
		{name: "empty schedule", mutate: func(c *batchv1.CronJob) { c.Spec.Schedule = "" }, want: []string{"spec.schedule: Required value"}},
		{name: "four fields", mutate: func(c *batchv1.CronJob) { c.Spec.Schedule = "0 3 * *" }, want: []string{"spec.schedule: Invalid value"}},
		{name: "minute out of range", mutate: func(c *batchv1.CronJob) { c.Spec.Schedule = "61 * * * *" }, want: []string{"spec.schedule: Invalid value"}},
		{name: "TZ in schedule", mutate: func(c *batchv1.CronJob) { c.Spec.Schedule = "TZ=UTC 0 3 * * *" }, want: []string{"spec.schedule: Invalid value"}},
		{name: "time zone", mutate: func(c *batchv1.CronJob) { c.Spec.TimeZone = ptr.To("Europe/Berlin") }},
		{name: "bad time zone", mutate: func(c *batchv1.CronJob) { c.Spec.TimeZone = ptr.To("Mars/Olympus") }, want: []string{"spec.timeZone: Invalid value"}},
		{name: "bad concurrency", mutate: func(c *batchv1.CronJob) { c.Spec.ConcurrencyPolicy = "Sometimes" },
			want: []string{"spec.concurrencyPolicy: Unsupported value"}},
		{name: "selector in template", mutate: func(c *batchv1.CronJob) {
			c.Spec.JobTemplate.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		}, want: []string{"spec.jobTemplate.spec.selector: Invalid value"}},
		{name: "long name", mutate: func(c *batchv1.CronJob) { c.Name = "a23456789012345678901234567890123456789012345678901234" },
			want: []string{"metadata.name: Invalid value"}},
		{name: "restart always", mutate: func(c *batchv1.CronJob) {
			c.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		}, want: []string{"spec.jobTemplate.spec.template.spec.restartPolicy: Unsupported value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cj.DeepCopy()
			if tc.mutate != nil {
				tc.mutate(c)
			}
			if diff := cmp.Diff(tc.want, errStrings(CronJobStrategy{}.Validate(ctx, c))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCronJobStatusAndTable(t *testing.T) {
	old := cronJob()
	CronJobStrategy{}.PrepareForCreate(ctx, old)
	upd := old.DeepCopy()
	upd.Spec.Schedule = "*/5 * * * *"
	upd.Status.Active = []corev1.ObjectReference{{Name: "x"}}
	CronJobStrategy{}.PrepareForUpdate(ctx, upd, old)
	if upd.Generation != 2 || len(upd.Status.Active) != 0 {
		t.Errorf("update: generation %d, status %+v", upd.Generation, upd.Status)
	}
	st := old.DeepCopy()
	st.Spec.Schedule = "evil"
	st.Status.Active = []corev1.ObjectReference{{Name: "nightly-1"}}
	CronJobStrategy{}.PrepareForStatusUpdate(ctx, st, old)
	if st.Spec.Schedule != "0 3 * * *" {
		t.Errorf("status update changed the schedule")
	}
	row, err := CronJobStrategy{}.TableRow(st)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]interface{}{"nightly", "0 3 * * *", "<none>", "False", int64(1), "<none>"}, row[:6]); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	var _ runtime.Object = st
}
