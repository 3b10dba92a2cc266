package crd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	celmodel "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	schemavalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	celcommon "k8s.io/apiserver/pkg/cel/common"
	"k8s.io/client-go/util/jsonpath"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Strategy holds the rules of one served version of a custom resource.
type Strategy struct {
	registry.DefaultStrategy
	gvk         schema.GroupVersionKind
	namespaced  bool
	schema      *versionSchema // nil: no schema (only for preserved fields)
	hasStatus   bool
	scale       *apiextensionsinternal.CustomResourceSubresourceScale
	columns     []column
	selectable  []selectable
	terminating func() bool
}

type column struct {
	def  metav1.TableColumnDefinition
	path *jsonpath.JSONPath
}

type selectable struct {
	name string // "spec.color"
	path *jsonpath.JSONPath
}

var (
	_ registry.Strategy      = (*Strategy)(nil)
	_ registry.Scaler        = (*Strategy)(nil)
	_ registry.BeforeCreater = (*Strategy)(nil)
	_ registry.FieldPruner   = (*Strategy)(nil)
)

func newStrategy(crd *apiextensionsv1.CustomResourceDefinition, in *apiextensionsinternal.CustomResourceDefinition, v *apiextensionsinternal.CustomResourceDefinitionVersion, terminating func() bool) (*Strategy, error) {
	s := &Strategy{
		gvk:         schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind},
		namespaced:  crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		terminating: terminating,
	}
	// The internal form keeps a field that all versions share at the top
	// of the spec (a CRD of one version always does), not in the version:
	// read each through upstream's per-version helpers.
	validation, err := apiextensionsinternal.GetSchemaForVersion(in, v.Name)
	if err != nil {
		return nil, err
	}
	if validation != nil && validation.OpenAPIV3Schema != nil {
		vs, err := newVersionSchema(validation.OpenAPIV3Schema)
		if err != nil {
			return nil, err
		}
		s.schema = vs
	}
	subresources, err := apiextensionsinternal.GetSubresourcesForVersion(in, v.Name)
	if err != nil {
		return nil, err
	}
	if subresources != nil {
		s.hasStatus = subresources.Status != nil
		s.scale = subresources.Scale
	}
	cols, err := apiextensionsinternal.GetColumnsForVersion(in, v.Name)
	if err != nil {
		return nil, err
	}
	selectableFields := v.SelectableFields
	if len(selectableFields) == 0 {
		selectableFields = in.Spec.SelectableFields
	}
	for _, c := range cols {
		p := jsonpath.New(c.Name)
		if err := p.Parse(fmt.Sprintf("{%s}", c.JSONPath)); err != nil {
			return nil, fmt.Errorf("printer column %q: %w", c.Name, err)
		}
		p.AllowMissingKeys(true)
		s.columns = append(s.columns, column{path: p, def: metav1.TableColumnDefinition{
			Name: c.Name, Type: c.Type, Format: c.Format, Description: c.Description, Priority: c.Priority}})
	}
	for _, f := range selectableFields {
		p := jsonpath.New(f.JSONPath)
		if err := p.Parse(fmt.Sprintf("{%s}", f.JSONPath)); err != nil {
			return nil, fmt.Errorf("selectable field %q: %w", f.JSONPath, err)
		}
		p.AllowMissingKeys(true)
		s.selectable = append(s.selectable, selectable{name: strings.TrimPrefix(f.JSONPath, "."), path: p})
	}
	return s, nil
}

func content(obj runtime.Object) map[string]interface{} {
	return obj.(*unstructured.Unstructured).UnstructuredContent()
}

// Prune drops the fields the schema does not declare (unless it preserves
// unknown fields there), coerces embedded ObjectMeta, and returns the
// dropped paths ("spec.foo"), as upstream's decoder does.
func (s *Strategy) Prune(obj runtime.Object) []string {
	cr, ok := obj.(*unstructured.Unstructured)
	if s.schema == nil || !ok { // e.g. a Scale decoded for /scale
		return nil
	}
	u := cr.Object
	unknown := pruning.PruneWithOptions(u, s.schema.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	_, dropped := schemaobjectmeta.CoerceWithOptions(nil, u, s.schema.structural, false, schemaobjectmeta.CoerceOptions{
		DropInvalidFields: true, ReturnUnknownFieldPaths: true})
	return append(unknown, dropped...)
}

// normalize prunes and defaults, the steps upstream's decoder takes on
// every body.
func (s *Strategy) normalize(obj runtime.Object) {
	if s.schema == nil {
		return
	}
	u := content(obj)
	pruning.Prune(u, s.schema.structural, true)
	defaulting.Default(u, s.schema.structural)
}

func (s *Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	u := obj.(*unstructured.Unstructured)
	if s.hasStatus {
		delete(u.Object, "status")
	}
	s.normalize(obj)
	u.SetGeneration(1)
}

func nonMetadata(m map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(m))
	for k, v := range m {
		if k != "metadata" {
			out[k] = v
		}
	}
	return out
}

func (s *Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	u, prev := obj.(*unstructured.Unstructured), old.(*unstructured.Unstructured)
	if s.hasStatus {
		if st, ok := prev.Object["status"]; ok {
			u.Object["status"] = st
		} else {
			delete(u.Object, "status")
		}
	}
	s.normalize(obj)
	if !apiequality.Semantic.DeepEqual(nonMetadata(u.Object), nonMetadata(prev.Object)) {
		u.SetGeneration(prev.GetGeneration() + 1)
	}
}

func (s *Strategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	u, prev := obj.(*unstructured.Unstructured), old.(*unstructured.Unstructured)
	status, ok := u.Object["status"]
	managed := u.GetManagedFields()
	next := prev.DeepCopy()
	next.SetManagedFields(managed)
	next.SetResourceVersion(u.GetResourceVersion())
	if ok {
		next.Object["status"] = status
	} else {
		delete(next.Object, "status")
	}
	*u = *next
	s.normalize(obj)
}

func (s *Strategy) typeMeta(u *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	if u.GetKind() != s.gvk.Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), u.GetKind(), "must be "+s.gvk.Kind))
	}
	if want := s.gvk.GroupVersion().String(); u.GetAPIVersion() != want {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), u.GetAPIVersion(), "must be "+want))
	}
	return errs
}

func (s *Strategy) validate(ctx context.Context, u, old *unstructured.Unstructured) field.ErrorList {
	if errs := s.typeMeta(u); len(errs) > 0 {
		return errs
	}
	// On an update, upstream's validation ratcheting (GA since 1.33): an
	// error in a part of the object the update left as it was (correlated
	// by the schema: map keys, list-type map keys, set elements) is not
	// reported, neither by the schema nor by a CEL rule without oldSelf, so
	// objects written before their CRD's schema was tightened can still
	// be updated (their finalizers removed, their status written).
	var correlated *celcommon.CorrelatedObject
	if old != nil && s.schema != nil {
		correlated = celcommon.NewCorrelatedObject(u.Object, old.Object, &celmodel.Structural{Structural: s.schema.structural})
	}
	var errs field.ErrorList
	if s.schema != nil {
		if old == nil {
			errs = append(errs, schemavalidation.ValidateCustomResource(nil, u.Object, s.schema.validator)...)
		} else {
			errs = append(errs, schemavalidation.ValidateCustomResourceUpdate(nil, u.Object, old.Object, s.schema.validator, schemavalidation.WithRatcheting(correlated))...)
		}
	}
	errs = append(errs, s.validateScale(u, true)...)
	errs = append(errs, s.validateScale(u, false)...)
	if s.schema != nil {
		errs = append(errs, schemaobjectmeta.Validate(ctx, nil, u.Object, s.schema.structural, false)...)
		if old == nil {
			errs = append(errs, listtype.ValidateListSetsAndMaps(nil, s.schema.structural, u.Object)...)
		} else if oldErrs := listtype.ValidateListSetsAndMaps(nil, s.schema.structural, old.Object); len(oldErrs) == 0 {
			errs = append(errs, listtype.ValidateListSetsAndMaps(nil, s.schema.structural, u.Object)...)
		}
		errs = append(errs, s.validateCEL(ctx, u, old, correlated, errs)...)
	}
	return errs
}

// validateCEL runs the x-kubernetes-validations rules, within upstream's
// runtime cost budget, unless errs already holds an error that makes the
// object unfit for them (a wrong type, a missing required field, a value
// not in its enum, too long or too many): then, as upstream, one error
// says the rules were not checked. correlated (updates) ratchets them.
func (s *Strategy) validateCEL(ctx context.Context, u, old *unstructured.Unstructured, correlated *celcommon.CorrelatedObject, errs field.ErrorList) field.ErrorList {
	if s.schema == nil || s.schema.cel == nil {
		return nil
	}
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.ErrorList{field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")}
		}
	}
	var oldObj interface{}
	var opts []cel.Option
	if old != nil {
		oldObj = old.Object
		opts = append(opts, cel.WithRatcheting(correlated))
	}
	celErrs, _ := s.schema.cel.Validate(ctx, nil, s.schema.structural, u.Object, oldObj, celconfig.RuntimeCELCostBudget, opts...)
	return celErrs
}

func (s *Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return s.validate(ctx, obj.(*unstructured.Unstructured), nil)
}

func (s *Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return s.validate(ctx, obj.(*unstructured.Unstructured), old.(*unstructured.Unstructured))
}

func (s *Strategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	u, prev := obj.(*unstructured.Unstructured), old.(*unstructured.Unstructured)
	if errs := s.typeMeta(u); len(errs) > 0 {
		return errs
	}
	var correlated *celcommon.CorrelatedObject
	if s.schema != nil {
		correlated = celcommon.NewCorrelatedObject(u.Object, prev.Object, &celmodel.Structural{Structural: s.schema.structural})
	}
	var errs field.ErrorList
	if status, ok := u.Object["status"]; ok && s.schema != nil && s.schema.status != nil {
		errs = append(errs, schemavalidation.ValidateCustomResourceUpdate(field.NewPath("status"), status, prev.Object["status"], s.schema.status, schemavalidation.WithRatcheting(correlated.Key("status")))...)
	}
	errs = append(errs, s.validateScale(u, false)...)
	if s.schema != nil {
		errs = append(errs, schemaobjectmeta.Validate(ctx, nil, u.Object, s.schema.structural, false)...)
		if oldErrs := listtype.ValidateListSetsAndMaps(nil, s.schema.structural, prev.Object); len(oldErrs) == 0 {
			errs = append(errs, listtype.ValidateListSetsAndMaps(nil, s.schema.structural, u.Object)...)
		}
		errs = append(errs, s.validateCEL(ctx, u, prev, correlated, errs)...)
	}
	return errs
}

// validateScale checks the replicas the scale subresource reads: the spec's
// (spec true) or the status's and the selector.
func (s *Strategy) validateScale(u *unstructured.Unstructured, spec bool) field.ErrorList {
	if s.scale == nil {
		return nil
	}
	p := s.scale.StatusReplicasPath
	if spec {
		p = s.scale.SpecReplicasPath
	}
	var errs field.ErrorList
	n, _, err := unstructured.NestedInt64(u.Object, splitPath(p)...)
	switch {
	case err != nil:
		errs = append(errs, field.Invalid(field.NewPath(p), n, err.Error()))
	case n < 0:
		errs = append(errs, field.Invalid(field.NewPath(p), n, "should be a non-negative integer"))
	case n > math.MaxInt32:
		errs = append(errs, field.Invalid(field.NewPath(p), n, fmt.Sprintf("should be less than or equal to %v", math.MaxInt32)))
	}
	if !spec && s.scale.LabelSelectorPath != nil {
		if sel, _, err := unstructured.NestedString(u.Object, splitPath(*s.scale.LabelSelectorPath)...); err != nil {
			errs = append(errs, field.Invalid(field.NewPath(*s.scale.LabelSelectorPath), sel, err.Error()))
		}
	}
	return errs
}

func splitPath(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }

// BeforeCreate refuses new objects while the CRD is being deleted, as
// upstream does.
func (s *Strategy) BeforeCreate(ctx context.Context, obj runtime.Object, dryRun bool) (func(), error) {
	if s.terminating != nil && s.terminating() {
		return nil, apierrors.NewMethodNotSupported(schema.GroupResource{Group: s.gvk.Group, Resource: strings.ToLower(s.gvk.Kind)}, "create")
	}
	return nil, nil
}

// FieldSet are the selectableFields of the version.
func (s *Strategy) FieldSet(obj runtime.Object) fields.Set {
	set := fields.Set{}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return set
	}
	for _, f := range s.selectable {
		if v, ok := findValue(f.path, u.Object); ok {
			set[f.name] = fmt.Sprint(v)
		} else {
			set[f.name] = ""
		}
	}
	return set
}

func findValue(p *jsonpath.JSONPath, obj map[string]interface{}) (interface{}, bool) {
	results, err := p.FindResults(obj)
	if err != nil || len(results) == 0 || len(results[0]) == 0 {
		return nil, false
	}
	v := results[0][0]
	if !v.IsValid() || (v.Kind() == reflect.Interface && v.IsNil()) {
		return nil, false
	}
	return v.Interface(), true
}

// TableColumns are Name and the version's additionalPrinterColumns (Age
// when it declares none), as upstream.
func (s *Strategy) TableColumns() []metav1.TableColumnDefinition {
	cols := []metav1.TableColumnDefinition{{Name: "Name", Type: "string", Format: "name", Description: "Name must be unique within a namespace."}}
	for _, c := range s.columns {
		cols = append(cols, c.def)
	}
	return cols
}

func (s *Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("%T is not a custom resource", obj)
	}
	cells := []interface{}{u.GetName()}
	var buf bytes.Buffer
	for _, c := range s.columns {
		v, ok := findValue(c.path, u.Object)
		if !ok {
			cells = append(cells, nil)
			continue
		}
		if c.def.Type == "string" {
			buf.Reset()
			if err := c.path.PrintResults(&buf, []reflect.Value{reflect.ValueOf(v)}); err != nil {
				cells = append(cells, nil)
				continue
			}
			cells = append(cells, buf.String())
			continue
		}
		cells = append(cells, cell(c.def.Type, v))
	}
	return cells, nil
}

// cell renders a value as a column of its type shows it (upstream's
// rules: dates as ages, numbers as numbers, anything else that does not
// fit as empty).
func cell(typ string, v interface{}) interface{} {
	switch typ {
	case "integer":
		switch n := v.(type) {
		case int64:
			return n
		case float64:
			return int64(n)
		case json.Number:
			if i, err := n.Int64(); err == nil {
				return i
			}
		}
	case "number":
		switch n := v.(type) {
		case int64:
			return float64(n)
		case float64:
			return n
		case json.Number:
			if f, err := n.Float64(); err == nil {
				return f
			}
		}
	case "boolean":
		if b, ok := v.(bool); ok {
			return b
		}
	case "date":
		if str, ok := v.(string); ok {
			var t metav1.Time
			if err := t.UnmarshalQueryParameter(str); err != nil {
				return "<invalid>"
			}
			if t.IsZero() {
				return "<unknown>"
			}
			return duration.HumanDuration(metav1.Now().Sub(t.Time))
		}
	}
	return nil
}

// ScaleOf reads the scale subresource's replicas and selector.
func (s *Strategy) ScaleOf(obj runtime.Object) (*autoscalingv1.Scale, error) {
	if s.scale == nil {
		return nil, fmt.Errorf("%s has no scale subresource", s.gvk.Kind)
	}
	u := obj.(*unstructured.Unstructured)
	spec, _, err := unstructured.NestedInt64(u.Object, splitPath(s.scale.SpecReplicasPath)...)
	if err != nil {
		return nil, err
	}
	status, _, err := unstructured.NestedInt64(u.Object, splitPath(s.scale.StatusReplicasPath)...)
	if err != nil {
		return nil, err
	}
	sel := ""
	if s.scale.LabelSelectorPath != nil {
		if sel, _, err = unstructured.NestedString(u.Object, splitPath(*s.scale.LabelSelectorPath)...); err != nil {
			return nil, err
		}
	}
	return &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(),
			ResourceVersion: u.GetResourceVersion(), CreationTimestamp: u.GetCreationTimestamp()},
		Spec:   autoscalingv1.ScaleSpec{Replicas: int32(spec)},
		Status: autoscalingv1.ScaleStatus{Replicas: int32(status), Selector: sel},
	}, nil
}

// ApplyScale writes the scale's replicas at specReplicasPath.
func (s *Strategy) ApplyScale(obj runtime.Object, scale *autoscalingv1.Scale) error {
	if s.scale == nil {
		return fmt.Errorf("%s has no scale subresource", s.gvk.Kind)
	}
	if scale.Spec.Replicas < 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: "autoscaling", Kind: "Scale"}, scale.Name,
			field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), scale.Spec.Replicas, "must be greater than or equal to 0")})
	}
	return unstructured.SetNestedField(obj.(*unstructured.Unstructured).Object, int64(scale.Spec.Replicas), splitPath(s.scale.SpecReplicasPath)...)
}
