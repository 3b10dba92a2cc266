// Package event holds the registry rules of core/v1 events: upstream's
// legacy event validation (and the strict one that events.k8s.io/v1 uses,
// exported for that package), field selectors and the table kubectl prints.
package event

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Length limits of event fields.
const (
	ReportingInstanceLengthLimit = 128
	ActionLengthLimit            = 128
	ReasonLengthLimit            = 128
	NoteLengthLimit              = 1024
)

// TTLSeconds is how long upstream keeps an event in etcd (the API server's
// --event-ttl default of one hour). Events are written with a lease of
// this length.
const TTLSeconds = 3600

// Resource describes core/v1 events.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:  corev1.SchemeGroupVersion,
		Resource:      "events",
		Kind:          "Event",
		ListKind:      "EventList",
		SingularName:  "event",
		ShortNames:    []string{"ev"},
		Namespaced:    true,
		StoragePrefix: "events",
		TTLSeconds:    TTLSeconds,
		New:           func() runtime.Object { return &corev1.Event{} },
		NewList:       func() runtime.Object { return &corev1.EventList{} },
		Strategy:      Strategy{},
	}
}

// Strategy is the registry strategy of core/v1 events.
type Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = Strategy{}

// ValidateName accepts any name that is a valid path segment: core/v1
// events keep upstream's lax naming (e.g. "pod.17a8c9b3f2e1d4c5").
func (Strategy) ValidateName(name string, prefix bool) []string {
	return path.ValidatePathSegmentName(name, prefix)
}

// Validate checks a new core/v1 event with the legacy rules.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateLegacy(obj.(*corev1.Event), "reportingComponent")
}

// ValidateUpdate checks an update like a create: core/v1 events are
// mutable (the count and timestamps of a repeated event change).
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateLegacy(obj.(*corev1.Event), "reportingComponent")
}

// ValidateLegacy applies the rules every event must pass, whatever API
// version wrote it. reportingField names the reporting controller field in
// the caller's API version ("reportingComponent" in core/v1,
// "reportingController" in events.k8s.io/v1).
func ValidateLegacy(ev *corev1.Event, reportingField string) field.ErrorList {
	var errs field.ErrorList
	nsPath := field.NewPath("involvedObject", "namespace")
	if ev.EventTime.IsZero() {
		// Old-style event: its namespace must match the involved object's.
		if ev.InvolvedObject.Namespace == "" {
			if ev.Namespace != metav1.NamespaceNone && ev.Namespace != metav1.NamespaceDefault {
				errs = append(errs, field.Invalid(nsPath, ev.InvolvedObject.Namespace, "does not match event.namespace"))
			}
		} else if ev.Namespace != ev.InvolvedObject.Namespace {
			errs = append(errs, field.Invalid(nsPath, ev.InvolvedObject.Namespace, "does not match event.namespace"))
		}
	} else {
		if ev.InvolvedObject.Namespace == "" && ev.Namespace != metav1.NamespaceDefault && ev.Namespace != metav1.NamespaceSystem {
			errs = append(errs, field.Invalid(nsPath, ev.InvolvedObject.Namespace, "does not match event.namespace"))
		}
		rcPath := field.NewPath(reportingField)
		if ev.ReportingController == "" {
			errs = append(errs, field.Required(rcPath, ""))
		}
		for _, msg := range validation.IsQualifiedName(ev.ReportingController) {
			errs = append(errs, field.Invalid(rcPath, ev.ReportingController, msg))
		}
		errs = append(errs, requiredWithLimit(ev.ReportingInstance, ReportingInstanceLengthLimit, field.NewPath("reportingInstance"))...)
		errs = append(errs, requiredWithLimit(ev.Action, ActionLengthLimit, field.NewPath("action"))...)
		errs = append(errs, requiredWithLimit(ev.Reason, ReasonLengthLimit, field.NewPath("reason"))...)
		if len(ev.Message) > NoteLengthLimit {
			errs = append(errs, field.Invalid(field.NewPath("message"), "", fmt.Sprintf("can have at most %v characters", NoteLengthLimit)))
		}
	}
	for _, msg := range validation.IsDNS1123Subdomain(ev.Namespace) {
		errs = append(errs, field.Invalid(field.NewPath("namespace"), ev.Namespace, msg))
	}
	return errs
}

func requiredWithLimit(value string, limit int, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if value == "" {
		errs = append(errs, field.Required(p, ""))
	}
	if len(value) > limit {
		errs = append(errs, field.Invalid(p, "", fmt.Sprintf("can have at most %v characters", limit)))
	}
	return errs
}

// ValidateStrictCreate applies the extra rules of a create through
// events.k8s.io/v1 (on the event converted to core/v1): eventTime is
// required, the type is Normal or Warning, the deprecated fields must be
// unset and a series must be well formed. Field paths are in core/v1 terms,
// as upstream reports them.
func ValidateStrictCreate(ev *corev1.Event) field.ErrorList {
	errs := ValidateLegacy(ev, "reportingController")
	if ev.Series != nil {
		if ev.Series.Count < 2 {
			errs = append(errs, field.Invalid(field.NewPath("series", "count"), "", "should be at least 2"))
		}
		if ev.Series.LastObservedTime.IsZero() {
			errs = append(errs, field.Required(field.NewPath("series", "lastObservedTime"), ""))
		}
	}
	if ev.EventTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
	}
	if ev.Type != corev1.EventTypeNormal && ev.Type != corev1.EventTypeWarning {
		errs = append(errs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", ev.Type)))
	}
	if !ev.FirstTimestamp.IsZero() {
		errs = append(errs, field.Invalid(field.NewPath("firstTimestamp"), "", "needs to be unset"))
	}
	if !ev.LastTimestamp.IsZero() {
		errs = append(errs, field.Invalid(field.NewPath("lastTimestamp"), "", "needs to be unset"))
	}
	if ev.Count != 0 {
		errs = append(errs, field.Invalid(field.NewPath("count"), "", "needs to be unset"))
	}
	if ev.Source.Component != "" || ev.Source.Host != "" {
		errs = append(errs, field.Invalid(field.NewPath("source"), "", "needs to be unset"))
	}
	return errs
}

// ValidateStrictUpdate applies the rules of an update through
// events.k8s.io/v1: everything but the series (and metadata) is immutable.
func ValidateStrictUpdate(ev, old *corev1.Event) field.ErrorList {
	errs := ValidateLegacy(ev, "reportingController")
	for _, f := range []struct {
		name     string
		new, old interface{}
	}{
		{"involvedObject", ev.InvolvedObject, old.InvolvedObject},
		{"reason", ev.Reason, old.Reason},
		{"message", ev.Message, old.Message},
		{"source", ev.Source, old.Source},
		{"firstTimestamp", ev.FirstTimestamp, old.FirstTimestamp},
		{"lastTimestamp", ev.LastTimestamp, old.LastTimestamp},
		{"count", ev.Count, old.Count},
		{"type", ev.Type, old.Type},
		{"eventTime", ev.EventTime.UTC().UnixMicro(), old.EventTime.UTC().UnixMicro()},
		{"action", ev.Action, old.Action},
		{"related", ev.Related, old.Related},
		{"reportingController", ev.ReportingController, old.ReportingController},
		{"reportingInstance", ev.ReportingInstance, old.ReportingInstance},
	} {
		errs = append(errs, apivalidation.ValidateImmutableField(f.new, f.old, field.NewPath(f.name))...)
	}
	return errs
}

// FieldSet returns the fields upstream lets a field selector name on
// core/v1 events.
func (Strategy) FieldSet(obj runtime.Object) fields.Set {
	return SelectableFields(obj.(*corev1.Event))
}

// SelectableFields returns the field-selector fields of an event, in
// core/v1 names.
func SelectableFields(ev *corev1.Event) fields.Set {
	source := ev.Source.Component
	if source == "" {
		source = ev.ReportingController
	}
	return fields.Set{
		"involvedObject.kind":            ev.InvolvedObject.Kind,
		"involvedObject.namespace":       ev.InvolvedObject.Namespace,
		"involvedObject.name":            ev.InvolvedObject.Name,
		"involvedObject.uid":             string(ev.InvolvedObject.UID),
		"involvedObject.apiVersion":      ev.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": ev.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       ev.InvolvedObject.FieldPath,
		"reason":                         ev.Reason,
		"reportingComponent":             ev.ReportingController,
		"source":                         source,
		"type":                           ev.Type,
	}
}

// TableColumns are the columns of `kubectl get events`.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	return Columns()
}

// Columns are the event table columns, shared with events.k8s.io/v1.
func Columns() []metav1.TableColumnDefinition {
	doc := corev1.Event{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Last Seen", Type: "string", Description: doc["lastTimestamp"]},
		{Name: "Type", Type: "string", Description: doc["type"]},
		{Name: "Reason", Type: "string", Description: doc["reason"]},
		{Name: "Object", Type: "string", Description: doc["involvedObject"]},
		{Name: "Subobject", Type: "string", Priority: 1, Description: corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]},
		{Name: "Source", Type: "string", Priority: 1, Description: doc["source"]},
		{Name: "Message", Type: "string", Description: doc["message"]},
		{Name: "First Seen", Type: "string", Priority: 1, Description: doc["firstTimestamp"]},
		{Name: "Count", Type: "string", Priority: 1, Description: doc["count"]},
		{Name: "Name", Type: "string", Priority: 1, Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	}
}

// TableRow renders one event.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	ev, ok := obj.(*corev1.Event)
	if !ok {
		return nil, fmt.Errorf("event table: unexpected object %T", obj)
	}
	return Row(ev), nil
}

// Row renders an event the way kubectl shows it, shared with
// events.k8s.io/v1.
func Row(ev *corev1.Event) []interface{} {
	first := registry.Age(ev.FirstTimestamp)
	if ev.FirstTimestamp.IsZero() {
		first = microAge(ev.EventTime)
	}
	last := registry.Age(ev.LastTimestamp)
	if ev.LastTimestamp.IsZero() {
		last = first
	}
	count := ev.Count
	if ev.Series != nil {
		last = microAge(ev.Series.LastObservedTime)
		count = ev.Series.Count
	} else if count == 0 {
		count = 1
	}
	target := strings.ToLower(ev.InvolvedObject.Kind)
	if ev.InvolvedObject.Name != "" {
		target += "/" + ev.InvolvedObject.Name
	}
	return []interface{}{
		last,
		ev.Type,
		ev.Reason,
		target,
		ev.InvolvedObject.FieldPath,
		source(ev),
		strings.TrimSpace(ev.Message),
		first,
		int64(count),
		ev.Name,
	}
}

func microAge(t metav1.MicroTime) string {
	if t.IsZero() {
		return registry.Age(metav1.Time{})
	}
	return registry.Age(metav1.NewTime(t.Time))
}

// source renders the SOURCE column, "component, host", each part taken
// from the legacy source or else from the reporting fields.
func source(ev *corev1.Event) string {
	component, host := ev.Source.Component, ev.Source.Host
	if component == "" {
		component = ev.ReportingController
	}
	if host == "" {
		host = ev.ReportingInstance
	}
	if host == "" {
		return component
	}
	return component + ", " + host
}
