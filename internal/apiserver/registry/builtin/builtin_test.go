package builtin

import (
	"context"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// TestResourcesAreComplete checks every built-in resource the way the
// server will use it: names and kinds filled in, New and NewList of the
// declared kinds, tables as wide as their columns, declared subresources
// backed by the strategy, and no two resources sharing keys unless one is
// stored as the other.
func TestResourcesAreComplete(t *testing.T) {
	rs := Resources(registry.Deps{})
	seen := map[schema.GroupVersionResource]bool{}
	prefixes := map[string]schema.GroupResource{}
	for _, r := range rs {
		gvr := r.GroupVersion.WithResource(r.Resource)
		t.Run(gvr.String(), func(t *testing.T) {
			if seen[gvr] {
				t.Fatalf("listed twice")
			}
			seen[gvr] = true
			if r.Kind == "" || r.SingularName == "" || r.New == nil || r.Strategy == nil {
				t.Fatalf("incomplete: %+v", r)
			}
			obj := r.New()
			if got := kindOf(t, obj); got != r.GroupVersion.WithKind(r.Kind) {
				t.Errorf("New() is %v, want %s", got, r.Kind)
			}
			if _, ok := r.Strategy.(registry.VirtualCreater); ok {
				return // create-only reviews: no list, no storage
			}
			if r.NewList == nil || r.ListKind != r.Kind+"List" {
				t.Fatalf("no list kind: %+v", r)
			}
			if _, err := meta.ListAccessor(r.NewList()); err != nil {
				t.Errorf("NewList() is not a list: %v", err)
			}
			ctx := context.Background()
			r.Strategy.PrepareForCreate(ctx, obj)
			_ = r.Strategy.Validate(ctx, obj)
			row, err := r.Strategy.TableRow(obj)
			if err != nil {
				t.Fatalf("TableRow(zero): %v", err)
			}
			cols := r.Strategy.TableColumns()
			if len(row) != len(cols) {
				t.Errorf("%d cells for %d columns", len(row), len(cols))
			}
			for _, c := range cols {
				if c.Name == "Name" && c.Priority == 0 && c.Format != "name" {
					t.Errorf("Name column without format name")
				}
			}
			for name, sub := range r.Subresources {
				if len(sub.Verbs) == 0 {
					t.Errorf("subresource %s serves no verb", name)
				}
				switch sub.Handler {
				case registry.HandleScale:
					if _, ok := r.Strategy.(registry.Scaler); !ok {
						t.Errorf("%s: scale subresource without a Scaler strategy", name)
					}
				case registry.HandleFinalize:
					if _, ok := r.Strategy.(registry.SpecFinalizer); !ok {
						t.Errorf("%s: finalize subresource without a SpecFinalizer strategy", name)
					}
				case "":
					t.Errorf("subresource %s has no handler", name)
				}
			}
			if registry.IsVirtual(r) {
				return
			}
			gr := gvr.GroupResource()
			if other, dup := prefixes[r.StoragePrefix]; dup && other != gr && r.Stored == nil {
				t.Errorf("shares storage prefix %q with %s", r.StoragePrefix, other)
			}
			if r.Stored == nil {
				prefixes[r.StoragePrefix] = gr
			}
		})
	}
}

func kindOf(t *testing.T, obj runtime.Object) schema.GroupVersionKind {
	t.Helper()
	s := runtime.NewScheme()
	if err := scheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := apiregv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	kinds, _, err := s.ObjectKinds(obj)
	if err != nil {
		t.Fatalf("kind of %T: %v", obj, err)
	}
	for _, k := range kinds {
		if k.Version != runtime.APIVersionInternal {
			return k
		}
	}
	return schema.GroupVersionKind{}
}
