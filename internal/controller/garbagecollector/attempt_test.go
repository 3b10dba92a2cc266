package garbagecollector

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestDecide(t *testing.T) {
	item := func(finalizers []string, owners ...types.UID) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "d", Finalizers: finalizers}}
		for _, u := range owners {
			m.OwnerReferences = append(m.OwnerReferences, metav1.OwnerReference{UID: u, Name: string(u)})
		}
		return m
	}
	tests := []struct {
		name   string
		item   *metav1.PartialObjectMetadata
		states map[types.UID]ownerState
		deps   dependentsState
		want   action
	}{
		{name: "solid owner keeps", item: item(nil, "a"), states: map[types.UID]ownerState{"a": solid}, want: action{kind: keep}},
		{name: "gone owner deletes in background", item: item(nil, "a"), states: map[types.UID]ownerState{"a": dangling},
			want: action{kind: deleteItem, policy: metav1.DeletePropagationBackground}},
		{name: "one of two owners gone drops its reference", item: item(nil, "a", "b"), states: map[types.UID]ownerState{"a": dangling, "b": solid},
			want: action{kind: removeOwnerRefs, remove: []types.UID{"a"}}},
		{name: "waiting owner with a solid one drops the waiting reference", item: item(nil, "a", "b"), states: map[types.UID]ownerState{"a": waiting, "b": solid},
			want: action{kind: removeOwnerRefs, remove: []types.UID{"a"}}},
		{name: "waiting owner and own dependents cascade in the foreground", item: item(nil, "a"), states: map[types.UID]ownerState{"a": waiting}, deps: dependentsState{any: true},
			want: action{kind: deleteItem, policy: metav1.DeletePropagationForeground}},
		{name: "waiting owner and a dependent waiting too unblock the owner references first", item: item(nil, "a"), states: map[types.UID]ownerState{"a": waiting},
			deps: dependentsState{any: true, deleting: true},
			want: action{kind: deleteItem, policy: metav1.DeletePropagationForeground, unblock: true}},
		{name: "waiting owner without own dependents deletes in background", item: item(nil, "a"), states: map[types.UID]ownerState{"a": waiting},
			want: action{kind: deleteItem, policy: metav1.DeletePropagationBackground}},
		{name: "item's orphan finalizer is honoured", item: item([]string{metav1.FinalizerOrphanDependents}, "a"), states: map[types.UID]ownerState{"a": dangling},
			want: action{kind: deleteItem, policy: metav1.DeletePropagationOrphan}},
		{name: "item's foreground finalizer is honoured", item: item([]string{metav1.FinalizerDeleteDependents}, "a"), states: map[types.UID]ownerState{"a": dangling},
			want: action{kind: deleteItem, policy: metav1.DeletePropagationForeground}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := decide(tc.item, tc.states, tc.deps)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(action{})); diff != "" {
				t.Errorf("decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRemoveOwnersAndFinalizer(t *testing.T) {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		OwnerReferences: []metav1.OwnerReference{{UID: "a"}, {UID: "b"}},
		Finalizers:      []string{"x", metav1.FinalizerOrphanDependents},
	}}
	if !removeOwners(m, map[types.UID]bool{"a": true}) || removeOwners(m, map[types.UID]bool{"a": true}) {
		t.Error("removeOwners: want a change, then none")
	}
	if diff := cmp.Diff([]metav1.OwnerReference{{UID: "b"}}, m.OwnerReferences); diff != "" {
		t.Errorf("owners (-want +got):\n%s", diff)
	}
	if !removeFinalizer(m, metav1.FinalizerOrphanDependents) || removeFinalizer(m, metav1.FinalizerOrphanDependents) {
		t.Error("removeFinalizer: want a change, then none")
	}
	if diff := cmp.Diff([]string{"x"}, m.Finalizers); diff != "" {
		t.Errorf("finalizers (-want +got):\n%s", diff)
	}
}
