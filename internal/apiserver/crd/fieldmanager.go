package crd

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// fieldManagerFunc builds server-side apply's managedFields tracking for one
// served version: types from the version's schema (list and map types
// decide how lists merge), the meta types from static.
func fieldManagerFunc(crd *apiextensionsv1.CustomResourceDefinition, version string, hasStatus bool, static map[string]*spec.Schema) (func(sub string) (*managedfields.FieldManager, error), error) {
	doc, err := builder.BuildOpenAPIV3(crd, version, builder.Options{V2: false, StripValueValidation: true, StripNullable: true})
	if err != nil {
		return nil, fmt.Errorf("openapi for apply: %w", err)
	}
	models := make(map[string]*spec.Schema, len(static)+4)
	for k, v := range static {
		models[k] = v
	}
	if doc.Components != nil {
		for k, v := range doc.Components.Schemas {
			models[k] = v
		}
	}
	tc, err := managedfields.NewTypeConverter(models, crd.Spec.PreserveUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("type converter: %w", err)
	}
	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.Kind}
	conv := unstructuredConvertor{}
	return func(sub string) (*managedfields.FieldManager, error) {
		var reset map[fieldpath.APIVersion]fieldpath.Filter
		if hasStatus {
			p := fieldpath.NewSet(fieldpath.MakePathOrDie("status"))
			if sub == "status" {
				p = fieldpath.NewSet(fieldpath.MakePathOrDie("metadata"), fieldpath.MakePathOrDie("spec"))
			}
			reset = map[fieldpath.APIVersion]fieldpath.Filter{fieldpath.APIVersion(gvk.GroupVersion().String()): fieldpath.NewExcludeSetFilter(p)}
		}
		return managedfields.NewDefaultFieldManager(tc, conv, conv, conv, gvk, gvk.GroupVersion(), sub, reset)
	}, nil
}

// unstructuredConvertor converts custom resources between versions whose
// conversion is None (only apiVersion changes), creates empty ones and
// defaults nothing, for the field manager.
type unstructuredConvertor struct{}

func (unstructuredConvertor) Convert(in, out, context interface{}) error {
	u, ok := in.(*unstructured.Unstructured)
	o, ok2 := out.(*unstructured.Unstructured)
	if !ok || !ok2 {
		return fmt.Errorf("cannot convert %T to %T", in, out)
	}
	o.Object = u.DeepCopy().Object
	return nil
}

func (unstructuredConvertor) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("%T is not a custom resource", in)
	}
	target, ok := gv.KindForGroupVersionKinds([]schema.GroupVersionKind{u.GroupVersionKind()})
	if !ok {
		return nil, fmt.Errorf("cannot convert %s to %v", u.GroupVersionKind(), gv)
	}
	out := u.DeepCopy()
	out.SetGroupVersionKind(target)
	return out, nil
}

func (unstructuredConvertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

func (unstructuredConvertor) Default(runtime.Object) {}

func (unstructuredConvertor) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, nil
}
