package storage

import (
	goruntime "runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func withFields(name string, fieldsets ...string) *corev1.ConfigMap {
	o := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for i, f := range fieldsets {
		o.ManagedFields = append(o.ManagedFields, metav1.ManagedFieldsEntry{
			Manager: "m" + string(rune('a'+i)), Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(f)},
		})
	}
	return o
}

// TestCachedObjectsShareFieldsets: two cached objects whose managers own
// the same fields hold one copy of each fieldset; a different fieldset
// stays its own.
func TestCachedObjectsShareFieldsets(t *testing.T) {
	c := &cache{}
	spec, status := `{"f:data":{"f:k":{}}}`, `{"f:metadata":{"f:labels":{}}}`
	a, err := c.cachedObject("/a", withFields("a", spec, status), 1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.cachedObject("/b", withFields("b", spec, status), 2)
	other, _ := c.cachedObject("/c", withFields("c", `{"f:binaryData":{}}`), 3)
	fa := a.obj.(*corev1.ConfigMap).ManagedFields
	fb := b.obj.(*corev1.ConfigMap).ManagedFields
	fo := other.obj.(*corev1.ConfigMap).ManagedFields
	for i := range fa {
		if &fa[i].FieldsV1.Raw[0] != &fb[i].FieldsV1.Raw[0] {
			t.Errorf("entry %d: two copies of %s", i, fa[i].FieldsV1.Raw)
		}
		if cap(fb[i].FieldsV1.Raw) != len(fb[i].FieldsV1.Raw) {
			t.Errorf("entry %d: a shared fieldset has spare capacity (an append would write into it)", i)
		}
	}
	if string(fo[0].FieldsV1.Raw) != `{"f:binaryData":{}}` || &fo[0].FieldsV1.Raw[0] == &fa[0].FieldsV1.Raw[0] {
		t.Errorf("a different fieldset was changed or shared: %s", fo[0].FieldsV1.Raw)
	}
}

// TestInternerLetsGo: a copy nothing refers to any more leaves the table.
func TestInternerLetsGo(t *testing.T) {
	tab := newInterner()
	kept := tab.intern([]byte("kept: referred to until the end"))
	dropped := tab.intern([]byte("dropped: referred to by nobody"))
	if again := tab.intern([]byte("dropped: referred to by nobody")); &again[0] != &dropped[0] {
		t.Fatal("an equal slice got a copy of its own while the first was alive")
	}
	dropped = nil
	_ = dropped
	deadline := time.Now().Add(10 * time.Second)
	for tab.size() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the table holds %d copies, want 1 (the one still referred to)", tab.size())
		}
		goruntime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if again := tab.intern([]byte("kept: referred to until the end")); &again[0] != &kept[0] {
		t.Error("the copy still referred to is no longer shared")
	}
	goruntime.KeepAlive(kept)
}
