package admission

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// objects is an in-memory registry.Reader: objects by resource,
// namespace and name. live records the names read with live set.
type objects struct {
	byGVR map[schema.GroupVersionResource][]runtime.Object
	live  []string
}

func newObjects(gvr schema.GroupVersionResource, objs ...runtime.Object) *objects {
	return &objects{byGVR: map[schema.GroupVersionResource][]runtime.Object{gvr: objs}}
}

func (o *objects) List(ctx context.Context, gvr schema.GroupVersionResource, ns string, latest bool, into runtime.Object) error {
	var items []runtime.Object
	for _, obj := range o.byGVR[gvr] {
		m, _ := meta.Accessor(obj)
		if ns == "" || m.GetNamespace() == ns {
			items = append(items, obj.DeepCopyObject())
		}
	}
	return meta.SetList(into, items)
}

func (o *objects) Get(ctx context.Context, gvr schema.GroupVersionResource, ns, name string, live bool, into runtime.Object) error {
	if live {
		o.live = append(o.live, name)
	}
	for _, obj := range o.byGVR[gvr] {
		m, _ := meta.Accessor(obj)
		if m.GetNamespace() == ns && m.GetName() == name {
			return runtime.DefaultUnstructuredConverter.FromUnstructured(mustUnstructured(obj), into)
		}
	}
	return apierrors.NewNotFound(gvr.GroupResource(), name)
}

func mustUnstructured(obj runtime.Object) map[string]any {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(err)
	}
	return u
}

// recorder is a plugin that records the calls of each phase.
type recorder struct {
	name  string
	calls *[]string
	fail  bool
}

func (r recorder) Name() string           { return r.name }
func (r recorder) Handles(Operation) bool { return true }
func (r recorder) Admit(ctx context.Context, a *Attributes) error {
	*r.calls = append(*r.calls, "admit "+r.name)
	if r.fail {
		return errors.New(r.name + " refused")
	}
	return nil
}
func (r recorder) Validate(ctx context.Context, a *Attributes) error {
	*r.calls = append(*r.calls, "validate "+r.name)
	return nil
}

type neither struct{ name string }

func (n neither) Name() string           { return n.name }
func (n neither) Handles(Operation) bool { return true }

func TestChainOrder(t *testing.T) {
	var calls []string
	rec := func(name string) recorder { return recorder{name: name, calls: &calls} }
	// Given out of order; the chain must run them in upstream's order,
	// every mutating phase before any validating one.
	chain, err := NewChain(rec("ValidatingAdmissionWebhook"), rec("Priority"), rec("NamespaceLifecycle"), rec("ServiceAccount"))
	if err != nil {
		t.Fatal(err)
	}
	if err := chain.Run(context.Background(), &Attributes{Operation: Create}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"admit NamespaceLifecycle", "admit ServiceAccount", "admit Priority", "admit ValidatingAdmissionWebhook",
		"validate NamespaceLifecycle", "validate ServiceAccount", "validate Priority", "validate ValidatingAdmissionWebhook",
	}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestChainStopsAtFirstRefusal(t *testing.T) {
	var calls []string
	chain, err := NewChain(recorder{name: "NamespaceLifecycle", calls: &calls, fail: true}, recorder{name: "Priority", calls: &calls})
	if err != nil {
		t.Fatal(err)
	}
	if err := chain.Run(context.Background(), &Attributes{Operation: Create}); err == nil {
		t.Fatal("want the refusal")
	}
	if diff := cmp.Diff([]string{"admit NamespaceLifecycle"}, calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestNewChainRefuses(t *testing.T) {
	var calls []string
	tests := []struct {
		name    string
		plugins []Plugin
	}{
		{"a plugin without a place in the order", []Plugin{recorder{name: "MadeUp", calls: &calls}}},
		{"a plugin given twice", []Plugin{recorder{name: "Priority", calls: &calls}, recorder{name: "Priority", calls: &calls}}},
		{"a plugin of neither phase", []Plugin{neither{name: "Priority"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewChain(tc.plugins...); err == nil {
				t.Error("NewChain accepted it")
			}
		})
	}
}

func TestNilChainAdmitsEverything(t *testing.T) {
	var c *Chain
	if err := c.Run(context.Background(), &Attributes{Operation: Create}); err != nil {
		t.Fatal(err)
	}
}
