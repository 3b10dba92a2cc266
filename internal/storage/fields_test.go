package storage

import (
	"testing"

	"k8s.io/apimachinery/pkg/fields"
)

// TestFieldValues: the cache's compact field values answer selectors as
// the fields.Set they came from, and objects with the same field names
// share one name list.
func TestFieldValues(t *testing.T) {
	var names fieldNames
	a := names.values(fields.Set{"metadata.name": "a", "spec.nodeName": "n1", "status.phase": ""})
	b := names.values(fields.Set{"status.phase": "Running", "metadata.name": "b", "spec.nodeName": "n2"})
	if &a.names[0] != &b.names[0] {
		t.Errorf("objects with the same field names keep separate name lists")
	}
	for _, tc := range []struct {
		sel  string
		want [2]bool
	}{
		{"spec.nodeName=n1", [2]bool{true, false}},
		{"status.phase=", [2]bool{true, false}},
		{"status.phase!=Running,metadata.name=a", [2]bool{true, false}},
		{"metadata.name!=a", [2]bool{false, true}},
		{"spec.unknown=x", [2]bool{false, false}},
		{"spec.unknown!=x", [2]bool{true, true}},
	} {
		sel, err := fields.ParseSelector(tc.sel)
		if err != nil {
			t.Fatal(err)
		}
		if got := [2]bool{sel.Matches(a), sel.Matches(b)}; got != tc.want {
			t.Errorf("%q matches %v, want %v", tc.sel, got, tc.want)
		}
	}
	c := names.values(fields.Set{"metadata.name": "c"})
	if !c.Has("metadata.name") || c.Has("spec.nodeName") || c.Get("metadata.name") != "c" {
		t.Errorf("other names: Has/Get wrong: %+v", c)
	}
	if empty := names.values(nil); empty.Has("metadata.name") {
		t.Errorf("no fields: Has(metadata.name) is true")
	}
}
