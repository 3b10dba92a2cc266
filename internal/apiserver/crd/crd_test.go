package crd

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com, uid: u1, generation: 1}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.size, statusReplicasPath: .status.size}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Color, type: string, jsonPath: .spec.color, priority: 1}
    selectableFields:
    - jsonPath: .spec.color
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - {rule: "self.size <= 5 || self.color == 'red'", message: "big widgets are red"}
            properties:
              size: {type: integer, default: 1, minimum: 0}
              color: {type: string, enum: [red, blue]}
          status:
            type: object
            properties:
              size: {type: integer}
  - name: v1beta1
    served: false
    storage: false
`

func widget(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(widgetCRD), crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

func strategyOf(t *testing.T) *Strategy {
	t.Helper()
	rs, err := Resources(widget(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 {
		t.Fatalf("%d resources, want the one served version", len(rs))
	}
	r := rs[0]
	if r.GroupVersion != (schema.GroupVersion{Group: "example.com", Version: "v1"}) || r.StoragePrefix != "example.com/widgets" ||
		!r.Namespaced || r.Custom == nil || r.Custom.FieldManager == nil || len(r.Subresources) != 2 {
		t.Errorf("resource = %+v", r)
	}
	return r.Strategy.(*Strategy)
}

func obj(spec map[string]interface{}) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]interface{}{"name": "w", "namespace": "ns"},
		"spec":     spec,
	}}
}

func TestStrategyValidate(t *testing.T) {
	s := strategyOf(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		spec map[string]interface{}
		want []string
	}{
		{"valid, defaulted", map[string]interface{}{"color": "blue"}, nil},
		// A value outside its enum keeps the CEL rules from running, as
		// upstream: one error says so instead.
		{"enum", map[string]interface{}{"color": "green"}, []string{"Unsupported value spec.color", "Invalid value <nil>"}},
		{"minimum", map[string]interface{}{"size": int64(-1)}, []string{"Invalid value spec.size", "Invalid value .spec.size"}}, // the second: the scale check, named by its path as upstream
		{"cel", map[string]interface{}{"size": int64(6), "color": "blue"}, []string{"Invalid value spec"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := obj(tc.spec)
			s.PrepareForCreate(ctx, o)
			var got []string
			for _, e := range s.Validate(ctx, o) {
				got = append(got, e.Type.String()+" "+e.Field)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStrategyRatcheting: upstream's validation ratcheting. An object
// stored before its schema was tightened may be updated as long as the
// invalid parts stay as they were; changing them, or a part a CEL rule
// covers, is validated in full.
func TestStrategyRatcheting(t *testing.T) {
	s := strategyOf(t)
	ctx := context.Background()
	// Stored under an older schema: a color the enum no longer has, and a
	// big blue widget the CEL rule forbids.
	stored := obj(map[string]interface{}{"color": "green", "size": int64(6)})
	stored.Object["status"] = map[string]interface{}{"size": int64(1)}
	errs := func(l field.ErrorList) []string {
		var got []string
		for _, e := range l {
			got = append(got, e.Type.String()+" "+e.Field)
		}
		return got
	}
	for _, tc := range []struct {
		name   string
		change func(u *unstructured.Unstructured)
		status bool
		want   []string
	}{
		{"labels only", func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"a": "b"}) }, false, nil},
		{"finalizer removed", func(u *unstructured.Unstructured) { u.SetFinalizers(nil) }, false, nil},
		{"status written", func(u *unstructured.Unstructured) { u.Object["status"] = map[string]interface{}{"size": int64(2)} }, true, nil},
		{"invalid color changed", func(u *unstructured.Unstructured) { u.Object["spec"].(map[string]interface{})["color"] = "purple" },
			false, []string{"Unsupported value spec.color", "Invalid value <nil>"}},
		// The enum error on the unchanged color is ratcheted; the CEL rule
		// on spec runs because spec changed, and fails.
		{"size changed", func(u *unstructured.Unstructured) { u.Object["spec"].(map[string]interface{})["size"] = int64(7) },
			false, []string{"Invalid value spec"}},
		{"made valid", func(u *unstructured.Unstructured) {
			u.Object["spec"] = map[string]interface{}{"color": "red", "size": int64(7)}
		}, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := stored.DeepCopy()
			old.SetFinalizers([]string{"example.com/keep"})
			next := old.DeepCopy()
			tc.change(next)
			var got field.ErrorList
			if tc.status {
				s.PrepareForStatusUpdate(ctx, next, old)
				got = s.ValidateStatusUpdate(ctx, next, old)
			} else {
				s.PrepareForUpdate(ctx, next, old)
				got = s.ValidateUpdate(ctx, next, old)
			}
			if diff := cmp.Diff(tc.want, errs(got)); diff != "" {
				t.Errorf("errors (-want +got):\n%s\n%v", diff, got)
			}
		})
	}
	// A create is never ratcheted.
	o := stored.DeepCopy()
	s.PrepareForCreate(ctx, o)
	if diff := cmp.Diff([]string{"Unsupported value spec.color", "Invalid value <nil>"}, errs(s.Validate(ctx, o))); diff != "" {
		t.Errorf("create errors (-want +got):\n%s", diff)
	}
}

func TestStrategyPruneDefaultStatus(t *testing.T) {
	s := strategyOf(t)
	ctx := context.Background()
	o := obj(map[string]interface{}{"color": "red", "shape": "round"})
	o.Object["status"] = map[string]interface{}{"size": int64(3)}
	o.Object["extra"] = true
	if diff := cmp.Diff([]string{"extra", "spec.shape"}, sorted(s.Prune(o))); diff != "" {
		t.Errorf("pruned (-want +got):\n%s", diff)
	}
	s.PrepareForCreate(ctx, o)
	want := map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]interface{}{"name": "w", "namespace": "ns", "generation": int64(1)},
		"spec":     map[string]interface{}{"color": "red", "size": int64(1)},
	}
	if diff := cmp.Diff(want, o.Object); diff != "" {
		t.Errorf("after create (-want +got):\n%s", diff)
	}

	// Updates keep the status; status updates keep the rest.
	next := o.DeepCopy()
	next.Object["spec"].(map[string]interface{})["size"] = int64(2)
	next.Object["status"] = map[string]interface{}{"size": int64(9)}
	s.PrepareForUpdate(ctx, next, o)
	if _, ok := next.Object["status"]; ok || next.GetGeneration() != 2 {
		t.Errorf("update: status %v generation %d", next.Object["status"], next.GetGeneration())
	}
	st := next.DeepCopy()
	st.Object["spec"] = map[string]interface{}{"size": int64(4)}
	st.Object["status"] = map[string]interface{}{"size": int64(2)}
	s.PrepareForStatusUpdate(ctx, st, next)
	if diff := cmp.Diff(next.Object["spec"], st.Object["spec"]); diff != "" || st.Object["status"] == nil {
		t.Errorf("status update changed spec (-want +got):\n%s status %v", diff, st.Object["status"])
	}

	scale, err := s.ScaleOf(st)
	if err != nil || scale.Spec.Replicas != 2 || scale.Status.Replicas != 2 {
		t.Errorf("scale = %+v, %v", scale, err)
	}
	scale.Spec.Replicas = 4
	if err := s.ApplyScale(st, scale); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(st.Object, "spec", "size"); n != 4 {
		t.Errorf("spec.size after ApplyScale = %d", n)
	}
	if got := s.FieldSet(st); got["spec.color"] != "red" {
		t.Errorf("selectable fields = %v", got)
	}
}

func TestTable(t *testing.T) {
	s := strategyOf(t)
	var names []string
	for _, c := range s.TableColumns() {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"Name", "Size", "Color"}, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	row, err := s.TableRow(obj(map[string]interface{}{"size": int64(3)}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]interface{}{"w", int64(3), nil}, row); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	if got := cell("date", metav1.NewTime(time.Now().Add(-2*time.Hour)).UTC().Format(time.RFC3339)); got != "120m" {
		t.Errorf("date cell = %v, want 120m", got)
	}
	if got := cell("number", int64(2)); got != float64(2) {
		t.Errorf("number cell = %v", got)
	}
}

func TestStatusNames(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	other := widget(t)
	other.Name, other.UID = "gadgets.example.com", "u2"
	other.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList", ShortNames: []string{"wd"}}
	other.Status.AcceptedNames = other.Spec.Names
	for _, tc := range []struct {
		name     string
		others   []*apiextensionsv1.CustomResourceDefinition
		deleting bool
		want     map[apiextensionsv1.CustomResourceDefinitionConditionType]string
		plural   string
	}{
		{"alone", nil, false, map[apiextensionsv1.CustomResourceDefinitionConditionType]string{
			"NamesAccepted": "True NoConflicts", "Established": "True InitialNamesAccepted"}, "widgets"},
		{"short name taken", []*apiextensionsv1.CustomResourceDefinition{other}, false, map[apiextensionsv1.CustomResourceDefinitionConditionType]string{
			"NamesAccepted": `False NameConflict "wd" is already in use`, "Established": "False NotAccepted"}, ""},
		{"deleting", nil, true, map[apiextensionsv1.CustomResourceDefinitionConditionType]string{
			"NamesAccepted": "True NoConflicts", "Established": "True InitialNamesAccepted", "Terminating": "True InstanceDeletionInProgress"}, "widgets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crd := widget(t)
			if tc.deleting {
				crd.DeletionTimestamp = &now
			}
			st := Status(crd, append(tc.others, crd), now)
			got := map[apiextensionsv1.CustomResourceDefinitionConditionType]string{}
			for _, c := range st.Conditions {
				s := string(c.Status) + " " + c.Reason
				if c.Status == apiextensionsv1.ConditionFalse && c.Type == apiextensionsv1.NamesAccepted {
					s += " " + c.Message
				}
				got[c.Type] = s
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if st.AcceptedNames.Plural != tc.plural {
				t.Errorf("accepted plural %q, want %q", st.AcceptedNames.Plural, tc.plural)
			}
		})
	}
}

func TestStorageCodec(t *testing.T) {
	c := StorageCodec{Storage: schema.GroupVersion{Group: "example.com", Version: "v1"}, Served: schema.GroupVersionKind{Group: "example.com", Version: "v1beta1", Kind: "Widget"}}
	o := obj(map[string]interface{}{"size": int64(1)})
	o.SetResourceVersion("42")
	data, err := c.Encode(o)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns"},"spec":{"size":1}}`; string(data) != want {
		t.Errorf("stored %s, want %s", data, want)
	}
	out := &unstructured.Unstructured{}
	if err := c.Decode(data, out); err != nil {
		t.Fatal(err)
	}
	if out.GetAPIVersion() != "example.com/v1beta1" || o.GetResourceVersion() != "42" {
		t.Errorf("decoded apiVersion %s; the encoded object's resourceVersion %s", out.GetAPIVersion(), o.GetResourceVersion())
	}
}

func sorted(ss []string) []string {
	out := append([]string(nil), ss...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestFromStorage: objects read from etcd are pruned with, and get the
// defaults of, the schema of the version they were stored in, as
// upstream's storage decoder: a field the schema dropped after the object
// was written is gone, a default added since is there. A CRD with no
// schema has nothing to apply.
func TestFromStorage(t *testing.T) {
	rs, err := Resources(widget(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := StorageCodec{Storage: schema.GroupVersion{Group: "example.com", Version: "v1"}, Served: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"},
		FromStorage: func(u *unstructured.Unstructured) { rs[0].Custom.FromStorage(u) }}
	out := &unstructured.Unstructured{}
	stored := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","labels":{"a":"b"}},"spec":{"shape":"round","color":null},"status":{"size":2,"old":true},"extra":1}`
	if err := c.Decode([]byte(stored), out); err != nil {
		t.Fatal(err)
	}
	want := map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]interface{}{"name": "w", "labels": map[string]interface{}{"a": "b"}},
		"spec":     map[string]interface{}{"size": int64(1)},
		"status":   map[string]interface{}{"size": int64(2)},
	}
	if diff := cmp.Diff(want, out.Object); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
	bare := widget(t)
	for i := range bare.Spec.Versions {
		bare.Spec.Versions[i].Schema = nil
	}
	bare.Spec.PreserveUnknownFields = false
	bare.Spec.Versions[0].Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTo(true)}}
	if rs, err = Resources(bare, Options{}); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := (StorageCodec{Storage: c.Storage, Served: c.Served, FromStorage: func(x *unstructured.Unstructured) {
		if f := rs[0].Custom.FromStorage; f != nil {
			f(x)
		}
	}}).Decode([]byte(stored), u); err != nil {
		t.Fatal(err)
	}
	if _, ok := u.Object["extra"]; !ok {
		t.Errorf("a schema preserving unknown fields pruned %v", u.Object)
	}
}

func ptrTo[T any](v T) *T { return &v }
