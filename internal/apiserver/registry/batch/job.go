package batch

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/pod"
)

// Labels a job's generated selector uses: the batch.kubernetes.io ones and
// their legacy unprefixed twins.
const (
	ControllerUIDLabel       = batchv1.ControllerUidLabel // "batch.kubernetes.io/controller-uid"
	JobNameLabel             = batchv1.JobNameLabel       // "batch.kubernetes.io/job-name"
	LegacyControllerUIDLabel = "controller-uid"
	LegacyJobNameLabel       = "job-name"
)

// maxIndexedCompletions is upstream's limit on completions and
// parallelism of an Indexed job without backoffLimitPerIndex.
const maxIndexedCompletions = 100000

// JobResource describes batch/v1 jobs.
func JobResource() registry.Resource {
	return registry.Resource{
		GroupVersion:  batchv1.SchemeGroupVersion,
		Resource:      "jobs",
		Kind:          "Job",
		ListKind:      "JobList",
		SingularName:  "job",
		Categories:    []string{"all"},
		Namespaced:    true,
		StoragePrefix: "jobs",
		New:           func() runtime.Object { return &batchv1.Job{} },
		NewList:       func() runtime.Object { return &batchv1.JobList{} },
		Strategy:      JobStrategy{},
		Subresources:  map[string]registry.Subresource{"status": registry.StatusSubresource()},
	}
}

// JobStrategy is the jobs strategy.
type JobStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = JobStrategy{}

// DefaultJob applies upstream's batch/v1 defaults.
func DefaultJob(j *batchv1.Job) {
	spec := &j.Spec
	if spec.Completions == nil && spec.Parallelism == nil {
		spec.Completions = newPtr(int32(1))
		spec.Parallelism = newPtr(int32(1))
	}
	if spec.Parallelism == nil {
		spec.Parallelism = newPtr(int32(1))
	}
	if spec.BackoffLimit == nil {
		if spec.BackoffLimitPerIndex != nil {
			spec.BackoffLimit = newPtr(int32(math.MaxInt32))
		} else {
			spec.BackoffLimit = newPtr(int32(6))
		}
	}
	if len(j.Labels) == 0 && spec.Template.Labels != nil {
		j.Labels = copyMap(spec.Template.Labels)
	}
	if spec.CompletionMode == nil {
		m := batchv1.NonIndexedCompletion
		spec.CompletionMode = &m
	}
	if spec.Suspend == nil {
		spec.Suspend = newPtr(false)
	}
	if spec.ManualSelector == nil {
		spec.ManualSelector = newPtr(false)
	}
	if pfp := spec.PodFailurePolicy; pfp != nil {
		for i := range pfp.Rules {
			for k := range pfp.Rules[i].OnPodConditions {
				if pfp.Rules[i].OnPodConditions[k].Status == "" {
					pfp.Rules[i].OnPodConditions[k].Status = corev1.ConditionTrue
				}
			}
		}
	}
	if spec.PodReplacementPolicy == nil {
		p := batchv1.TerminatingOrFailed
		if spec.PodFailurePolicy != nil {
			p = batchv1.Failed
		}
		spec.PodReplacementPolicy = &p
	}
	pod.DefaultPodSpec(&spec.Template.Spec)
}

func newPtr[T any](v T) *T { return &v }

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func manual(j *batchv1.Job) bool {
	return j.Spec.ManualSelector != nil && *j.Spec.ManualSelector
}

// GenerateSelector does what upstream does for a job without
// manualSelector: it adds the controller-uid and job-name labels (both
// batch.kubernetes.io and legacy) to the pod template, unless already set,
// and selects on batch.kubernetes.io/controller-uid=<uid>. The UID must
// already be set.
func GenerateSelector(j *batchv1.Job) {
	if manual(j) || j.UID == "" {
		return
	}
	uid := string(j.UID)
	if j.Spec.Template.Labels == nil {
		j.Spec.Template.Labels = map[string]string{}
	}
	for k, v := range map[string]string{
		LegacyControllerUIDLabel: uid, LegacyJobNameLabel: j.Name,
		ControllerUIDLabel: uid, JobNameLabel: j.Name,
	} {
		if _, ok := j.Spec.Template.Labels[k]; !ok {
			j.Spec.Template.Labels[k] = v
		}
	}
	if j.Spec.Selector == nil {
		j.Spec.Selector = &metav1.LabelSelector{}
	}
	if j.Spec.Selector.MatchLabels == nil {
		j.Spec.Selector.MatchLabels = map[string]string{}
	}
	if _, ok := j.Spec.Selector.MatchLabels[ControllerUIDLabel]; !ok {
		j.Spec.Selector.MatchLabels[ControllerUIDLabel] = uid
	}
}

// PrepareForCreate clears status, sets generation 1, generates the
// selector from the UID the handler has set, then applies defaults (so a
// job without labels takes its template's, generated ones included, as
// upstream's read-back shows).
// DefaultPropagation: deleting a batch/v1 Job orphans its pods unless the
// client asks otherwise, as upstream keeps for compatibility.
func (JobStrategy) DefaultPropagation() metav1.DeletionPropagation {
	return metav1.DeletePropagationOrphan
}

func (JobStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	j := obj.(*batchv1.Job)
	j.Status = batchv1.JobStatus{}
	j.Generation = 1
	GenerateSelector(j)
	DefaultJob(j)
}

// PrepareForUpdate keeps the status, applies defaults and bumps generation
// when the spec changed.
func (JobStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	j, o := obj.(*batchv1.Job), old.(*batchv1.Job)
	j.Status = o.Status
	DefaultJob(j)
	j.Generation = o.Generation
	if !apiequality.Semantic.DeepEqual(j.Spec, o.Spec) {
		j.Generation = o.Generation + 1
	}
}

// PrepareForStatusUpdate keeps the spec.
func (JobStrategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*batchv1.Job).Spec = old.(*batchv1.Job).Spec
}

// Validate checks a new job, including that a generated selector and
// labels are intact.
func (JobStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	j := obj.(*batchv1.Job)
	errs := ValidateJobSpec(&j.Spec, field.NewPath("spec"))
	return append(errs, validateGeneratedSelector(j)...)
}

func validateGeneratedSelector(j *batchv1.Job) field.ErrorList {
	if manual(j) || j.UID == "" {
		return nil
	}
	var errs field.ErrorList
	lp := field.NewPath("spec", "template", "metadata", "labels")
	for _, want := range []struct{ key, value string }{
		{LegacyControllerUIDLabel, string(j.UID)}, {LegacyJobNameLabel, j.Name},
		{ControllerUIDLabel, string(j.UID)}, {JobNameLabel, j.Name},
	} {
		got, ok := j.Spec.Template.Labels[want.key]
		switch {
		case !ok:
			errs = append(errs, field.Required(lp.Key(want.key), ""))
		case got != want.value:
			errs = append(errs, field.Invalid(lp.Key(want.key), got, "must be '"+want.value+"'"))
		}
	}
	if sel, err := metav1.LabelSelectorAsSelector(j.Spec.Selector); err == nil {
		if !sel.Matches(labels.Set{ControllerUIDLabel: string(j.UID)}) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "selector"), j.Spec.Selector, "`selector` not auto-generated"))
		}
	}
	return errs
}

// ValidateUpdate checks the new spec and upstream's immutable fields:
// selector, completionMode, podFailurePolicy, backoffLimitPerIndex, and the
// pod template (except scheduling directives while a never-started job is
// suspended). completions may change only together with parallelism on an
// Indexed job (elastic indexed jobs).
func (JobStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	j, o := obj.(*batchv1.Job), old.(*batchv1.Job)
	spec := field.NewPath("spec")
	errs := ValidateJobSpec(&j.Spec, spec)
	immutable := func(a, b interface{}, p *field.Path) {
		if !apiequality.Semantic.DeepEqual(a, b) {
			errs = append(errs, field.Invalid(p, a, msgImmutable))
		}
	}
	immutable(j.Spec.Selector, o.Spec.Selector, spec.Child("selector"))
	immutable(j.Spec.CompletionMode, o.Spec.CompletionMode, spec.Child("completionMode"))
	immutable(j.Spec.PodFailurePolicy, o.Spec.PodFailurePolicy, spec.Child("podFailurePolicy"))
	immutable(j.Spec.BackoffLimitPerIndex, o.Spec.BackoffLimitPerIndex, spec.Child("backoffLimitPerIndex"))
	elastic := j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion &&
		j.Spec.Completions != nil && j.Spec.Parallelism != nil && *j.Spec.Completions == *j.Spec.Parallelism
	if !elastic {
		immutable(j.Spec.Completions, o.Spec.Completions, spec.Child("completions"))
	}
	errs = append(errs, validateTemplateUpdate(j, o)...)
	return errs
}

func validateTemplateUpdate(j, o *batchv1.Job) field.ErrorList {
	if apiequality.Semantic.DeepEqual(j.Spec.Template, o.Spec.Template) {
		return nil
	}
	suspendedNeverStarted := o.Spec.Suspend != nil && *o.Spec.Suspend && o.Status.StartTime == nil
	if suspendedNeverStarted {
		// Scheduling directives and template metadata may change.
		t := o.Spec.Template.DeepCopy()
		t.Labels, t.Annotations = j.Spec.Template.Labels, j.Spec.Template.Annotations
		t.Spec.NodeSelector = j.Spec.Template.Spec.NodeSelector
		t.Spec.Tolerations = j.Spec.Template.Spec.Tolerations
		t.Spec.Affinity = j.Spec.Template.Spec.Affinity
		t.Spec.SchedulingGates = j.Spec.Template.Spec.SchedulingGates
		if apiequality.Semantic.DeepEqual(*t, j.Spec.Template) {
			return nil
		}
	}
	return field.ErrorList{field.Invalid(field.NewPath("spec", "template"), j.Spec.Template, msgImmutable)}
}

// ValidateStatusUpdate checks the counters.
func (JobStrategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateJobStatus(&obj.(*batchv1.Job).Status, field.NewPath("status"))
}

// ValidateJobSpec checks a (defaulted) job spec; the selector is required
// (generated for jobs without manualSelector).
func ValidateJobSpec(spec *batchv1.JobSpec, path *field.Path) field.ErrorList {
	errs := validateJobSpecCommon(spec, path)
	if spec.Selector == nil {
		return append(errs, field.Required(path.Child("selector"), ""))
	}
	errs = append(errs, metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, path.Child("selector"))...)
	if sel, err := metav1.LabelSelectorAsSelector(spec.Selector); err == nil && !sel.Matches(labels.Set(spec.Template.Labels)) {
		errs = append(errs, field.Invalid(path.Child("template", "metadata", "labels"), spec.Template.Labels, "`selector` does not match template `labels`"))
	}
	return errs
}

// validateJobSpecCommon checks what jobs and cronjob job templates share.
func validateJobSpecCommon(spec *batchv1.JobSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, nonNegative32(spec.Parallelism, path.Child("parallelism"))...)
	errs = append(errs, nonNegative32(spec.Completions, path.Child("completions"))...)
	if spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, nonNegative(*spec.ActiveDeadlineSeconds, path.Child("activeDeadlineSeconds"))...)
	}
	errs = append(errs, nonNegative32(spec.BackoffLimit, path.Child("backoffLimit"))...)
	errs = append(errs, nonNegative32(spec.TTLSecondsAfterFinished, path.Child("ttlSecondsAfterFinished"))...)
	errs = append(errs, nonNegative32(spec.BackoffLimitPerIndex, path.Child("backoffLimitPerIndex"))...)
	if spec.CompletionMode != nil {
		switch *spec.CompletionMode {
		case batchv1.NonIndexedCompletion:
			if spec.BackoffLimitPerIndex != nil {
				errs = append(errs, field.Invalid(path.Child("backoffLimitPerIndex"), *spec.BackoffLimitPerIndex,
					"requires indexed completion mode"))
			}
		case batchv1.IndexedCompletion:
			if spec.Completions == nil {
				errs = append(errs, field.Required(path.Child("completions"), fmt.Sprintf("when completion mode is %s", batchv1.IndexedCompletion)))
			} else if spec.BackoffLimitPerIndex == nil && *spec.Completions > maxIndexedCompletions {
				errs = append(errs, field.Invalid(path.Child("completions"), *spec.Completions,
					fmt.Sprintf("must be less than or equal to %d when completion mode is %s", maxIndexedCompletions, batchv1.IndexedCompletion)))
			}
			if spec.Parallelism != nil && spec.BackoffLimitPerIndex == nil && *spec.Parallelism > maxIndexedCompletions {
				errs = append(errs, field.Invalid(path.Child("parallelism"), *spec.Parallelism,
					fmt.Sprintf("must be less than or equal to %d when completion mode is %s", maxIndexedCompletions, batchv1.IndexedCompletion)))
			}
		default:
			errs = append(errs, field.NotSupported(path.Child("completionMode"), *spec.CompletionMode,
				[]batchv1.CompletionMode{batchv1.NonIndexedCompletion, batchv1.IndexedCompletion}))
		}
	}
	if p := spec.PodReplacementPolicy; p != nil {
		valid := []batchv1.PodReplacementPolicy{batchv1.TerminatingOrFailed, batchv1.Failed}
		if spec.PodFailurePolicy != nil {
			valid = []batchv1.PodReplacementPolicy{batchv1.Failed}
		}
		ok := false
		for _, v := range valid {
			ok = ok || *p == v
		}
		if !ok {
			errs = append(errs, field.NotSupported(path.Child("podReplacementPolicy"), *p, valid))
		}
	}
	tPath := path.Child("template")
	errs = append(errs, pod.ValidatePodTemplateSpec(&spec.Template, tPath)...)
	rp := spec.Template.Spec.RestartPolicy
	if rp != corev1.RestartPolicyOnFailure && rp != corev1.RestartPolicyNever {
		errs = append(errs, field.NotSupported(tPath.Child("spec", "restartPolicy"), rp,
			[]corev1.RestartPolicy{corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}))
	} else if spec.PodFailurePolicy != nil && rp != corev1.RestartPolicyNever {
		errs = append(errs, field.Invalid(tPath.Child("spec", "restartPolicy"), rp,
			fmt.Sprintf("only %q is supported when podFailurePolicy is specified", corev1.RestartPolicyNever)))
	}
	return errs
}

// ValidateJobStatus checks the counters are non-negative.
func ValidateJobStatus(st *batchv1.JobStatus, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, nonNegative(int64(st.Active), path.Child("active"))...)
	errs = append(errs, nonNegative(int64(st.Succeeded), path.Child("succeeded"))...)
	errs = append(errs, nonNegative(int64(st.Failed), path.Child("failed"))...)
	errs = append(errs, nonNegative32(st.Ready, path.Child("ready"))...)
	errs = append(errs, nonNegative32(st.Terminating, path.Child("terminating"))...)
	if st.StartTime != nil && st.CompletionTime != nil && st.CompletionTime.Before(st.StartTime) {
		errs = append(errs, field.Invalid(path.Child("completionTime"), st.CompletionTime, "completionTime cannot be set before startTime"))
	}
	return errs
}

// FieldSet offers status.successful to field selectors, as upstream does.
func (JobStrategy) FieldSet(obj runtime.Object) fields.Set {
	return fields.Set{"status.successful": strconv.Itoa(int(obj.(*batchv1.Job).Status.Succeeded))}
}

// TableColumns are kubectl's columns for jobs.
func (JobStrategy) TableColumns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Status", Type: "string", Description: "Status of the job."},
		{Name: "Completions", Type: "string", Description: batchv1.JobStatus{}.SwaggerDoc()["succeeded"]},
		{Name: "Duration", Type: "string", Description: "Time required to complete the job."},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
		{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
		{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
		{Name: "Selector", Type: "string", Priority: 1, Description: batchv1.JobSpec{}.SwaggerDoc()["selector"]},
	}
}

// JobStatusCell is kubectl's STATUS column of a job: Complete, Failed,
// Terminating, Suspended, FailureTarget, SuccessCriteriaMet or Running.
func JobStatusCell(j *batchv1.Job) string {
	has := func(t batchv1.JobConditionType) bool {
		for _, c := range j.Status.Conditions {
			if c.Type == t && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	}
	switch {
	case has(batchv1.JobComplete):
		return "Complete"
	case has(batchv1.JobFailed):
		return "Failed"
	case j.DeletionTimestamp != nil:
		return "Terminating"
	case has(batchv1.JobSuspended):
		return "Suspended"
	case has(batchv1.JobFailureTarget):
		return "FailureTarget"
	case has(batchv1.JobSuccessCriteriaMet):
		return "SuccessCriteriaMet"
	default:
		return "Running"
	}
}

// TableRow renders one job.
func (JobStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return nil, fmt.Errorf("job table: unexpected object %T", obj)
	}
	var completions string
	switch {
	case j.Spec.Completions != nil:
		completions = fmt.Sprintf("%d/%d", j.Status.Succeeded, *j.Spec.Completions)
	case j.Spec.Parallelism != nil && *j.Spec.Parallelism > 1:
		completions = fmt.Sprintf("%d/1 of %d", j.Status.Succeeded, *j.Spec.Parallelism)
	default:
		completions = fmt.Sprintf("%d/1", j.Status.Succeeded)
	}
	var dur string
	switch {
	case j.Status.StartTime == nil:
	case j.Status.CompletionTime == nil:
		dur = duration.HumanDuration(time.Since(j.Status.StartTime.Time))
	default:
		dur = duration.HumanDuration(j.Status.CompletionTime.Sub(j.Status.StartTime.Time))
	}
	containers, images := containerCells(&j.Spec.Template.Spec)
	return []interface{}{
		j.Name, JobStatusCell(j), completions, dur, registry.Age(j.CreationTimestamp),
		containers, images, selectorString(j.Spec.Selector),
	}, nil
}
