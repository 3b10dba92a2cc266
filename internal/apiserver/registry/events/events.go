// Package events lists the events.k8s.io/v1 resources. Their rules live in
// events/event; this package declares how they are kept: in the keys of
// core/v1 Events and in that format, as upstream stores them.
package events

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	coreevent "github.com/skiff-sh/skiff/internal/apiserver/registry/core/event"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/events/event"
)

// Resources lists the events.k8s.io/v1 resources: events, stored as core/v1
// Events and, like them, kept for coreevent.TTLSeconds.
func Resources(registry.Deps) []registry.Resource {
	r := event.Resource()
	r.Stored = storedAsCore
	r.TTLSeconds = coreevent.TTLSeconds
	return []registry.Resource{r}
}

// storedAsCore keeps events.k8s.io/v1 Events as core/v1 Events.
var storedAsCore = &registry.StoredVersion{
	GVK: corev1.SchemeGroupVersion.WithKind("Event"),
	New: func() runtime.Object { return &corev1.Event{} },
	ToStored: func(o runtime.Object) (runtime.Object, error) {
		ev, ok := o.(*eventsv1.Event)
		if !ok {
			return nil, fmt.Errorf("expected events.k8s.io/v1 Event, got %T", o)
		}
		return event.ToCore(ev), nil
	},
	// The storage codec decodes into a fresh core/v1 Event for each read,
	// so the served form takes over its memory rather than copying it.
	FromStored: func(stored, into runtime.Object) error {
		core, ok := stored.(*corev1.Event)
		if !ok {
			return fmt.Errorf("expected a stored core/v1 Event, got %T", stored)
		}
		event.MoveFromCore(core, into.(*eventsv1.Event))
		return nil
	},
	// event.Strategy.FieldSet's names, as core/v1's (coreevent.SelectableFields).
	FieldLabels: map[string]string{
		"regarding.kind":            "involvedObject.kind",
		"regarding.namespace":       "involvedObject.namespace",
		"regarding.name":            "involvedObject.name",
		"regarding.uid":             "involvedObject.uid",
		"regarding.apiVersion":      "involvedObject.apiVersion",
		"regarding.resourceVersion": "involvedObject.resourceVersion",
		"regarding.fieldPath":       "involvedObject.fieldPath",
		"reportingController":       "reportingComponent",
	},
}
