package event

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Field)
	}
	return out
}

func sample() *eventsv1.Event {
	ts := metav1.NewMicroTime(time.Unix(1700000000, 123000).UTC())
	return &eventsv1.Event{
		TypeMeta:                 metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"},
		ObjectMeta:               metav1.ObjectMeta{Name: "web.1", Namespace: "default", Labels: map[string]string{"a": "b"}},
		EventTime:                ts,
		Series:                   &eventsv1.EventSeries{Count: 2, LastObservedTime: ts},
		ReportingController:      "example.com/ctl",
		ReportingInstance:        "ctl-1",
		Action:                   "Reconcile",
		Reason:                   "Synced",
		Regarding:                corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web", UID: "u1"},
		Related:                  &corev1.ObjectReference{Kind: "Node", Name: "n1"},
		Note:                     "all good",
		Type:                     corev1.EventTypeNormal,
		DeprecatedSource:         corev1.EventSource{Component: "old", Host: "h"},
		DeprecatedFirstTimestamp: metav1.NewTime(time.Unix(1600000000, 0)),
		DeprecatedLastTimestamp:  metav1.NewTime(time.Unix(1600000100, 0)),
		DeprecatedCount:          3,
	}
}

func TestConversionRoundTrip(t *testing.T) {
	in := sample()
	core := ToCore(in)
	want := &corev1.Event{
		TypeMeta:            metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:          in.ObjectMeta,
		InvolvedObject:      in.Regarding,
		Reason:              "Synced",
		Message:             "all good",
		Source:              in.DeprecatedSource,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               3,
		Type:                "Normal",
		EventTime:           in.EventTime,
		Series:              &corev1.EventSeries{Count: 2, LastObservedTime: in.Series.LastObservedTime},
		Action:              "Reconcile",
		Related:             in.Related,
		ReportingController: "example.com/ctl",
		ReportingInstance:   "ctl-1",
	}
	if diff := cmp.Diff(want, core); diff != "" {
		t.Errorf("ToCore (-want +got):\n%s", diff)
	}
	core.Related.Name = "changed"
	if in.Related.Name != "n1" {
		t.Errorf("ToCore shares memory with its input")
	}
	core.Related.Name = "n1"
	if diff := cmp.Diff(in, FromCore(core)); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	ev := sample()
	got := errorStrings(Strategy{}.Validate(context.Background(), ev))
	want := []string{"FieldValueInvalid firstTimestamp", "FieldValueInvalid lastTimestamp", "FieldValueInvalid count", "FieldValueInvalid source"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	ev.DeprecatedSource, ev.DeprecatedFirstTimestamp, ev.DeprecatedLastTimestamp, ev.DeprecatedCount = corev1.EventSource{}, metav1.Time{}, metav1.Time{}, 0
	ev.ReportingController = ""
	got = errorStrings(Strategy{}.Validate(context.Background(), ev))
	want = []string{"FieldValueRequired reportingController", "FieldValueInvalid reportingController", "FieldValueInvalid reportingController"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if msgs := (Strategy{}).ValidateName("Web_1", false); len(msgs) == 0 {
		t.Errorf("non-DNS name accepted on events.k8s.io")
	}
}

func TestFieldSetAndTable(t *testing.T) {
	ev := sample()
	want := fields.Set{
		"regarding.kind": "Pod", "regarding.namespace": "default", "regarding.name": "web", "regarding.uid": "u1",
		"regarding.apiVersion": "", "regarding.resourceVersion": "", "regarding.fieldPath": "",
		"reason": "Synced", "reportingController": "example.com/ctl", "type": "Normal",
	}
	if diff := cmp.Diff(want, Strategy{}.FieldSet(ev)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	row, err := Strategy{}.TableRow(ev)
	if err != nil {
		t.Fatal(err)
	}
	if row[3] != "pod/web" || row[6] != "all good" || row[8] != int64(2) {
		t.Errorf("row %v", row)
	}
}
