package more

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

func TestIssueThreeResourcesA(t *testing.T) {
	want := map[string]struct {
		prefix     string
		short      string
		all        bool
		namespaced bool
		subs       string
	}{
		"apps/v1/daemonsets":                      {"daemonsets", "ds", true, true, "status"},
		"apps/v1/statefulsets":                    {"statefulsets", "sts", true, true, "scale,status"},
		"apps/v1/controllerrevisions":             {"controllerrevisions", "", false, true, ""},
		"batch/v1/jobs":                           {"jobs", "", true, true, "status"},
		"batch/v1/cronjobs":                       {"cronjobs", "cj", true, true, "status"},
		"autoscaling/v2/horizontalpodautoscalers": {"horizontalpodautoscalers", "hpa", true, true, "status"},
		"autoscaling/v1/horizontalpodautoscalers": {"horizontalpodautoscalers", "hpa", true, true, "status"},
		"policy/v1/poddisruptionbudgets":          {"poddisruptionbudgets", "pdb", false, true, "status"},
		"/v1/persistentvolumes":                   {"persistentvolumes", "pv", false, false, "status"},
		"/v1/persistentvolumeclaims":              {"persistentvolumeclaims", "pvc", false, true, "status"},
		"/v1/limitranges":                         {"limitranges", "limits", false, true, ""},
		"/v1/resourcequotas":                      {"resourcequotas", "quota", false, true, "status"},
		"/v1/podtemplates":                        {"podtemplates", "", false, true, ""},
		"/v1/replicationcontrollers":              {"controllers", "rc", true, true, "scale,status"},
		"/v1/componentstatuses":                   {"componentstatuses", "cs", false, false, ""},
	}
	got := map[string]bool{}
	for _, r := range IssueThreeResourcesA() {
		key := r.GroupVersion.String() + "/" + r.Resource
		if r.GroupVersion.Group == "" {
			key = "/" + key
		}
		got[key] = true
		t.Run(key, func(t *testing.T) {
			w, ok := want[key]
			if !ok {
				t.Fatalf("unexpected resource %s", key)
			}
			var subs []string
			for _, s := range []string{"scale", "status"} {
				if r.Subresources[s] {
					subs = append(subs, s)
				}
			}
			gotShape := []string{r.StoragePrefix, strings.Join(r.ShortNames, ","), strings.Join(r.Categories, ","), strings.Join(subs, ",")}
			cat := ""
			if w.all {
				cat = "all"
			}
			if diff := cmp.Diff([]string{w.prefix, w.short, cat, w.subs}, gotShape); diff != "" {
				t.Errorf("prefix, shortnames, categories, subresources (-want +got):\n%s", diff)
			}
			if r.Namespaced != w.namespaced {
				t.Errorf("namespaced = %v, want %v", r.Namespaced, w.namespaced)
			}
			obj := r.New()
			if kind := kindOf(t, obj); kind != r.GroupVersion.WithKind(r.Kind) {
				t.Errorf("New() is %v, want kind %s", kind, r.Kind)
			}
			if _, err := meta.ListAccessor(r.NewList()); err != nil {
				t.Errorf("NewList() is not a list: %v", err)
			}
			if r.ListKind != r.Kind+"List" {
				t.Errorf("ListKind = %s", r.ListKind)
			}
			// A zero object must render a row as wide as the columns.
			row, err := r.Strategy.TableRow(obj)
			if err != nil {
				t.Fatalf("TableRow(zero): %v", err)
			}
			if len(row) != len(r.Strategy.TableColumns()) {
				t.Errorf("row has %d cells for %d columns", len(row), len(r.Strategy.TableColumns()))
			}
			if r.Subresources["scale"] {
				if _, ok := r.Strategy.(registry.Scaler); !ok {
					t.Errorf("scale subresource without a Scaler strategy")
				}
			}
			// Zero objects go through the rules without panicking.
			ctx := context.Background()
			r.Strategy.PrepareForCreate(ctx, obj)
			r.Strategy.Validate(ctx, obj)
		})
	}
	for k := range want {
		if !got[k] {
			t.Errorf("missing resource %s", k)
		}
	}
}

func kindOf(t *testing.T, obj runtime.Object) schema.GroupVersionKind {
	t.Helper()
	kinds, _, err := scheme.Scheme.ObjectKinds(obj)
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
