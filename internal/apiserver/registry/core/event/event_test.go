package event

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
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

func legacyEvent() *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web.17a8c9b3f2e1d4c5", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"},
		Reason:         "Scheduled",
		Message:        "Successfully assigned default/web to n1",
		Source:         corev1.EventSource{Component: "default-scheduler"},
		Type:           corev1.EventTypeNormal,
	}
}

func newStyleEvent() *corev1.Event {
	return &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "web.1", Namespace: "default"},
		InvolvedObject:      corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"},
		Reason:              "Scheduled",
		Action:              "Binding",
		Type:                corev1.EventTypeNormal,
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: "default-scheduler",
		ReportingInstance:   "default-scheduler-n1",
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		ev     *corev1.Event
		mutate func(*corev1.Event)
		want   []string
	}{
		{name: "legacy valid", ev: legacyEvent(), mutate: func(*corev1.Event) {}},
		{name: "legacy namespace mismatch", ev: legacyEvent(), mutate: func(e *corev1.Event) { e.InvolvedObject.Namespace = "other" },
			want: []string{"FieldValueInvalid involvedObject.namespace"}},
		{name: "legacy cluster object in default", ev: legacyEvent(), mutate: func(e *corev1.Event) { e.InvolvedObject = corev1.ObjectReference{Kind: "Node", Name: "n1"} }},
		{name: "new style valid", ev: newStyleEvent(), mutate: func(*corev1.Event) {}},
		{name: "new style missing fields", ev: newStyleEvent(), mutate: func(e *corev1.Event) {
			e.ReportingController, e.ReportingInstance, e.Action, e.Reason = "", "", "", ""
			e.Message = strings.Repeat("x", NoteLengthLimit+1)
		}, want: []string{"FieldValueRequired reportingComponent", "FieldValueInvalid reportingComponent", "FieldValueInvalid reportingComponent", "FieldValueRequired reportingInstance",
			"FieldValueRequired action", "FieldValueRequired reason", "FieldValueInvalid message"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.mutate(tc.ev)
			got := errorStrings(Strategy{}.Validate(context.Background(), tc.ev))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateStrict(t *testing.T) {
	ev := newStyleEvent()
	ev.Type = "Info"
	ev.Count = 3
	ev.Source.Component = "x"
	ev.Series = &corev1.EventSeries{Count: 1}
	want := []string{"FieldValueInvalid series.count", "FieldValueRequired series.lastObservedTime", "FieldValueInvalid type", "FieldValueInvalid count", "FieldValueInvalid source"}
	if diff := cmp.Diff(want, errorStrings(ValidateStrictCreate(ev))); diff != "" {
		t.Errorf("create (-want +got):\n%s", diff)
	}

	old := newStyleEvent()
	upd := old.DeepCopy()
	upd.Series = &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(time.Now())}
	if errs := ValidateStrictUpdate(upd, old); len(errs) != 0 {
		t.Errorf("series update refused: %v", errs)
	}
	upd.Reason = "Other"
	if diff := cmp.Diff([]string{"FieldValueInvalid reason"}, errorStrings(ValidateStrictUpdate(upd, old))); diff != "" {
		t.Errorf("update (-want +got):\n%s", diff)
	}
}

func TestValidateName(t *testing.T) {
	if msgs := (Strategy{}).ValidateName("Pod.Web_1", false); len(msgs) != 0 {
		t.Errorf("path-segment name refused: %v", msgs)
	}
	if msgs := (Strategy{}).ValidateName("a/b", false); len(msgs) == 0 {
		t.Errorf("name with slash accepted")
	}
}

func TestFieldSet(t *testing.T) {
	ev := newStyleEvent()
	ev.InvolvedObject.UID = "u1"
	want := fields.Set{
		"involvedObject.kind": "Pod", "involvedObject.namespace": "default", "involvedObject.name": "web",
		"involvedObject.uid": "u1", "involvedObject.apiVersion": "", "involvedObject.resourceVersion": "",
		"involvedObject.fieldPath": "", "reason": "Scheduled", "reportingComponent": "default-scheduler",
		"source": "default-scheduler", "type": "Normal",
	}
	if diff := cmp.Diff(want, Strategy{}.FieldSet(ev)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestTableRow(t *testing.T) {
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(time.Now().Add(-d)) }
	tests := []struct {
		name   string
		mutate func(*corev1.Event)
		want   []interface{}
	}{
		{name: "legacy repeated", mutate: func(e *corev1.Event) {
			e.FirstTimestamp, e.LastTimestamp, e.Count = ago(10*time.Minute), ago(time.Minute), 4
			e.InvolvedObject.FieldPath = "spec.containers{app}"
			e.Source.Host = "n1"
			e.Message += "\n"
		}, want: []interface{}{"60s", "Normal", "Scheduled", "pod/web", "spec.containers{app}", "default-scheduler, n1", "Successfully assigned default/web to n1", "10m", int64(4), "web.17a8c9b3f2e1d4c5"}},
		{name: "new style series", mutate: func(e *corev1.Event) {
			e.Source = corev1.EventSource{}
			e.EventTime = metav1.NewMicroTime(time.Now().Add(-5 * time.Minute))
			e.ReportingController, e.ReportingInstance = "kubelet", "n2"
			e.Series = &corev1.EventSeries{Count: 7, LastObservedTime: metav1.NewMicroTime(time.Now().Add(-2 * time.Minute))}
			e.InvolvedObject = corev1.ObjectReference{Kind: "Node"}
		}, want: []interface{}{"2m", "Normal", "Scheduled", "node", "", "kubelet, n2", "Successfully assigned default/web to n1", "5m", int64(7), "web.17a8c9b3f2e1d4c5"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := legacyEvent()
			tc.mutate(ev)
			got, err := Strategy{}.TableRow(ev)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if len(got) != len(Columns()) {
				t.Errorf("%d cells for %d columns", len(got), len(Columns()))
			}
		})
	}
}
