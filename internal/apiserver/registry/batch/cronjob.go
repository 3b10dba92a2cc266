package batch

import (
	"context"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // timeZone is checked against the IANA database whatever the host has

	batchv1 "k8s.io/api/batch/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/pod"
)

// maxCronJobNameLength leaves room for the 11-character suffix of the
// jobs a cronjob creates within a 63-character label value.
const maxCronJobNameLength = 52

// CronJobResource describes batch/v1 cronjobs.
func CronJobResource() registry.Resource {
	return registry.Resource{
		GroupVersion:  batchv1.SchemeGroupVersion,
		Resource:      "cronjobs",
		Kind:          "CronJob",
		ListKind:      "CronJobList",
		SingularName:  "cronjob",
		ShortNames:    []string{"cj"},
		Categories:    []string{"all"},
		Namespaced:    true,
		StoragePrefix: "cronjobs",
		New:           func() runtime.Object { return &batchv1.CronJob{} },
		NewList:       func() runtime.Object { return &batchv1.CronJobList{} },
		Strategy:      CronJobStrategy{},
		Subresources:  map[string]registry.Subresource{"status": registry.StatusSubresource()},
	}
}

// CronJobStrategy is the cronjobs strategy.
type CronJobStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = CronJobStrategy{}

// DefaultCronJob applies upstream's batch/v1 defaults; the job template's
// own spec gets only its pod spec's defaults, as upstream.
func DefaultCronJob(cj *batchv1.CronJob) {
	spec := &cj.Spec
	if spec.ConcurrencyPolicy == "" {
		spec.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	if spec.Suspend == nil {
		spec.Suspend = newPtr(false)
	}
	if spec.SuccessfulJobsHistoryLimit == nil {
		spec.SuccessfulJobsHistoryLimit = newPtr(int32(3))
	}
	if spec.FailedJobsHistoryLimit == nil {
		spec.FailedJobsHistoryLimit = newPtr(int32(1))
	}
	pod.DefaultPodSpec(&spec.JobTemplate.Spec.Template.Spec)
}

// PrepareForCreate clears status, sets generation 1 and applies defaults.
func (CronJobStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	cj := obj.(*batchv1.CronJob)
	cj.Status = batchv1.CronJobStatus{}
	cj.Generation = 1
	DefaultCronJob(cj)
}

// PrepareForUpdate keeps the status, applies defaults and bumps generation
// when the spec changed.
func (CronJobStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	cj, o := obj.(*batchv1.CronJob), old.(*batchv1.CronJob)
	cj.Status = o.Status
	DefaultCronJob(cj)
	cj.Generation = o.Generation
	if !apiequality.Semantic.DeepEqual(cj.Spec, o.Spec) {
		cj.Generation = o.Generation + 1
	}
}

// PrepareForStatusUpdate keeps the spec.
func (CronJobStrategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*batchv1.CronJob).Spec = old.(*batchv1.CronJob).Spec
}

// Validate checks a new cronjob.
func (CronJobStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validateCronJob(obj.(*batchv1.CronJob))
}

// ValidateUpdate checks the new cronjob (its whole spec may change).
func (CronJobStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validateCronJob(obj.(*batchv1.CronJob))
}

func validateCronJob(cj *batchv1.CronJob) field.ErrorList {
	var errs field.ErrorList
	if len(cj.Name) > maxCronJobNameLength {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), cj.Name, fmt.Sprintf("must be no more than %d characters", maxCronJobNameLength)))
	}
	return append(errs, ValidateCronJobSpec(&cj.Spec, field.NewPath("spec"))...)
}

// ValidateCronJobSpec checks a (defaulted) cronjob spec.
func ValidateCronJobSpec(spec *batchv1.CronJobSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	sp := path.Child("schedule")
	switch {
	case spec.Schedule == "":
		errs = append(errs, field.Required(sp, ""))
	case strings.Contains(spec.Schedule, "TZ"):
		errs = append(errs, field.Invalid(sp, spec.Schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
	default:
		if err := ParseSchedule(spec.Schedule); err != nil {
			errs = append(errs, field.Invalid(sp, spec.Schedule, err.Error()))
		}
	}
	if tz := spec.TimeZone; tz != nil {
		tzp := path.Child("timeZone")
		if strings.EqualFold(*tz, "local") {
			errs = append(errs, field.Invalid(tzp, *tz, "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"))
		} else if _, err := time.LoadLocation(*tz); err != nil || *tz == "" {
			msg := "unknown time zone " + *tz
			if err != nil {
				msg = err.Error()
			}
			errs = append(errs, field.Invalid(tzp, *tz, msg))
		}
	}
	switch spec.ConcurrencyPolicy {
	case batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent:
	case "":
		errs = append(errs, field.Required(path.Child("concurrencyPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(path.Child("concurrencyPolicy"), spec.ConcurrencyPolicy,
			[]batchv1.ConcurrencyPolicy{batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent}))
	}
	if spec.StartingDeadlineSeconds != nil {
		errs = append(errs, nonNegative(*spec.StartingDeadlineSeconds, path.Child("startingDeadlineSeconds"))...)
	}
	errs = append(errs, nonNegative32(spec.SuccessfulJobsHistoryLimit, path.Child("successfulJobsHistoryLimit"))...)
	errs = append(errs, nonNegative32(spec.FailedJobsHistoryLimit, path.Child("failedJobsHistoryLimit"))...)
	errs = append(errs, validateJobTemplate(&spec.JobTemplate, path.Child("jobTemplate"))...)
	return errs
}

// validateJobTemplate checks a cronjob's job template: a job spec whose
// selector will be generated for each job.
func validateJobTemplate(t *batchv1.JobTemplateSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, metav1validation.ValidateLabels(t.Labels, path.Child("metadata", "labels"))...)
	specPath := path.Child("spec")
	errs = append(errs, validateJobSpecCommon(&t.Spec, specPath)...)
	if t.Spec.Selector != nil {
		errs = append(errs, field.Invalid(specPath.Child("selector"), t.Spec.Selector, "`selector` will be auto-generated"))
	}
	if t.Spec.ManualSelector != nil && *t.Spec.ManualSelector {
		errs = append(errs, field.NotSupported(specPath.Child("manualSelector"), t.Spec.ManualSelector, []string{"nil", "false"}))
	}
	return errs
}

// TableColumns are kubectl's columns for cronjobs.
func (CronJobStrategy) TableColumns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	spec := batchv1.CronJobSpec{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Schedule", Type: "string", Description: spec["schedule"]},
		{Name: "Timezone", Type: "string", Description: spec["timeZone"]},
		{Name: "Suspend", Type: "boolean", Description: spec["suspend"]},
		{Name: "Active", Type: "integer", Description: batchv1.CronJobStatus{}.SwaggerDoc()["active"]},
		{Name: "Last Schedule", Type: "string", Description: batchv1.CronJobStatus{}.SwaggerDoc()["lastScheduleTime"]},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
		{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
		{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
		{Name: "Selector", Type: "string", Priority: 1, Description: batchv1.JobSpec{}.SwaggerDoc()["selector"]},
	}
}

// TableRow renders one cronjob.
func (CronJobStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	cj, ok := obj.(*batchv1.CronJob)
	if !ok {
		return nil, fmt.Errorf("cronjob table: unexpected object %T", obj)
	}
	last := "<none>"
	if cj.Status.LastScheduleTime != nil {
		last = registry.Age(*cj.Status.LastScheduleTime)
	}
	tz := "<none>"
	if cj.Spec.TimeZone != nil {
		tz = *cj.Spec.TimeZone
	}
	suspend := "<unset>"
	if cj.Spec.Suspend != nil {
		suspend = "False"
		if *cj.Spec.Suspend {
			suspend = "True"
		}
	}
	containers, images := containerCells(&cj.Spec.JobTemplate.Spec.Template.Spec)
	return []interface{}{
		cj.Name, cj.Spec.Schedule, tz, suspend, int64(len(cj.Status.Active)), last,
		registry.Age(cj.CreationTimestamp), containers, images, selectorString(cj.Spec.JobTemplate.Spec.Selector),
	}, nil
}
