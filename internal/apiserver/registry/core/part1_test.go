package core

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestCoreResourcesPart1 checks that every resource is complete and that
// its strategy accepts the objects its New makes.
func TestCoreResourcesPart1(t *testing.T) {
	seen := map[schema.GroupVersionResource]bool{}
	for _, r := range CoreResourcesPart1() {
		gvr := r.GroupVersion.WithResource(r.Resource)
		t.Run(gvr.String(), func(t *testing.T) {
			if seen[gvr] {
				t.Fatalf("listed twice")
			}
			seen[gvr] = true
			if r.Kind == "" || r.ListKind != r.Kind+"List" || r.SingularName == "" || r.StoragePrefix == "" || r.Strategy == nil {
				t.Fatalf("incomplete: %+v", r)
			}
			obj, list := r.New(), r.NewList()
			if obj == nil || list == nil {
				t.Fatal("New or NewList returned nil")
			}
			ctx := context.Background()
			r.Strategy.PrepareForCreate(ctx, obj)
			_ = r.Strategy.Validate(ctx, obj)
			_ = r.Strategy.FieldSet(obj)
			row, err := r.Strategy.TableRow(obj)
			if err != nil {
				t.Fatal(err)
			}
			cols := r.Strategy.TableColumns()
			if len(cols) != len(row) {
				t.Errorf("%d columns, %d cells", len(cols), len(row))
			}
			for _, c := range cols {
				if c.Name == "Name" && c.Priority == 0 && c.Format != "name" {
					t.Errorf("Name column without format name")
				}
			}
		})
	}
}
