// Package event holds the registry rules of events.k8s.io/v1 events.
//
// Upstream stores these in the same etcd keys as core/v1 events
// (/registry/events/<namespace>/<name>), encoded as core/v1 Events, so that
// both APIs see the same objects. This package gives the resource the same
// StoragePrefix and exports ToCore and FromCore, the field mapping between
// the two versions, for the API server to store one format. Validation runs
// on the core/v1 form with upstream's strict rules for this API.
package event

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	coreevent "github.com/skiff-sh/skiff/internal/apiserver/registry/core/event"
)

// Resource describes events.k8s.io/v1 events.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:  eventsv1.SchemeGroupVersion,
		Resource:      "events",
		Kind:          "Event",
		ListKind:      "EventList",
		SingularName:  "event",
		ShortNames:    []string{"ev"},
		Namespaced:    true,
		StoragePrefix: "events",
		New:           func() runtime.Object { return &eventsv1.Event{} },
		NewList:       func() runtime.Object { return &eventsv1.EventList{} },
		Strategy:      Strategy{},
	}
}

// Strategy is the registry strategy of events.k8s.io/v1 events. It accepts
// *eventsv1.Event objects (and, for reads of what core/v1 wrote, also
// *corev1.Event in FieldSet and TableRow).
type Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = Strategy{}

// Validate checks a new event with upstream's strict events.k8s.io rules.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return coreevent.ValidateStrictCreate(toCore(obj))
}

// ValidateUpdate checks an update: only the series and metadata may change.
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return coreevent.ValidateStrictUpdate(toCore(obj), toCore(old))
}

func toCore(obj runtime.Object) *corev1.Event {
	switch ev := obj.(type) {
	case *eventsv1.Event:
		return ToCore(ev)
	case *corev1.Event:
		return ev
	default:
		panic(fmt.Sprintf("events.k8s.io strategy: unexpected object %T", obj))
	}
}

// FieldSet returns the fields a field selector may name on events.k8s.io/v1
// events: upstream maps them onto the core/v1 ones.
func (Strategy) FieldSet(obj runtime.Object) fields.Set {
	ev := toCore(obj)
	return fields.Set{
		"regarding.kind":            ev.InvolvedObject.Kind,
		"regarding.namespace":       ev.InvolvedObject.Namespace,
		"regarding.name":            ev.InvolvedObject.Name,
		"regarding.uid":             string(ev.InvolvedObject.UID),
		"regarding.apiVersion":      ev.InvolvedObject.APIVersion,
		"regarding.resourceVersion": ev.InvolvedObject.ResourceVersion,
		"regarding.fieldPath":       ev.InvolvedObject.FieldPath,
		"reason":                    ev.Reason,
		"reportingController":       ev.ReportingController,
		"type":                      ev.Type,
	}
}

// TableColumns are the same as core/v1 events.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	return coreevent.Columns()
}

// TableRow renders an event like core/v1 does.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	switch obj.(type) {
	case *eventsv1.Event, *corev1.Event:
		return coreevent.Row(toCore(obj)), nil
	default:
		return nil, fmt.Errorf("event table: unexpected object %T", obj)
	}
}

// ToCore converts an events.k8s.io/v1 Event into the core/v1 Event it is
// stored as. The result shares no memory with ev.
func ToCore(ev *eventsv1.Event) *corev1.Event {
	ev = ev.DeepCopy()
	out := &corev1.Event{
		TypeMeta:            metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:          ev.ObjectMeta,
		InvolvedObject:      ev.Regarding,
		Reason:              ev.Reason,
		Message:             ev.Note,
		Source:              ev.DeprecatedSource,
		FirstTimestamp:      ev.DeprecatedFirstTimestamp,
		LastTimestamp:       ev.DeprecatedLastTimestamp,
		Count:               ev.DeprecatedCount,
		Type:                ev.Type,
		EventTime:           ev.EventTime,
		Action:              ev.Action,
		Related:             ev.Related,
		ReportingController: ev.ReportingController,
		ReportingInstance:   ev.ReportingInstance,
	}
	if ev.Series != nil {
		out.Series = &corev1.EventSeries{Count: ev.Series.Count, LastObservedTime: ev.Series.LastObservedTime}
	}
	return out
}

// FromCore converts a stored core/v1 Event into its events.k8s.io/v1 form.
// The result shares no memory with ev.
func FromCore(ev *corev1.Event) *eventsv1.Event {
	out := &eventsv1.Event{}
	MoveFromCore(ev.DeepCopy(), out)
	return out
}

// MoveFromCore converts a core/v1 Event into its events.k8s.io/v1 form in
// into, which takes over ev's memory (its metadata, references and
// strings): for an Event just decoded and no longer needed, such as the
// stored form the storage codec reads, it saves copying it.
func MoveFromCore(ev *corev1.Event, into *eventsv1.Event) {
	*into = eventsv1.Event{
		TypeMeta:                 metav1.TypeMeta{APIVersion: eventsv1.SchemeGroupVersion.String(), Kind: "Event"},
		ObjectMeta:               ev.ObjectMeta,
		EventTime:                ev.EventTime,
		ReportingController:      ev.ReportingController,
		ReportingInstance:        ev.ReportingInstance,
		Action:                   ev.Action,
		Reason:                   ev.Reason,
		Regarding:                ev.InvolvedObject,
		Related:                  ev.Related,
		Note:                     ev.Message,
		Type:                     ev.Type,
		DeprecatedSource:         ev.Source,
		DeprecatedFirstTimestamp: ev.FirstTimestamp,
		DeprecatedLastTimestamp:  ev.LastTimestamp,
		DeprecatedCount:          ev.Count,
	}
	if ev.Series != nil {
		into.Series = &eventsv1.EventSeries{Count: ev.Series.Count, LastObservedTime: ev.Series.LastObservedTime}
	}
}
