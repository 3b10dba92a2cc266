// Package crd turns a CustomResourceDefinition into served resources: one
// registry.Resource a served version, whose strategy validates, defaults
// and prunes custom resources with upstream's structural-schema packages
// (k8s.io/apiextensions-apiserver, used as a library), evaluates
// x-kubernetes-validations CEL rules, prints additionalPrinterColumns and
// serves the status and scale subresources. It also holds the pure
// decisions of the CRD controller (names accepted, established).
package crd

import (
	"fmt"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	schemavalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/apiextensions"
)

// Options are what Resources needs beside the CRD.
type Options struct {
	// Terminating reports whether the CRD is being deleted (creates are
	// then refused).
	Terminating func() bool
	// Definitions, when set, are added to the apply type converter's
	// models. Upstream's CRD OpenAPI builder already includes the meta
	// types it refers to, so the server passes none.
	Definitions map[string]*spec.Schema
	// Services dials conversion webhooks given as a service reference
	// (nil: such a CRD is refused).
	Services ServiceDialer
}

// Resources builds the served resources of crd: one a served version, all
// kept under one etcd prefix in the storage version's format.
func Resources(crd *apiextensionsv1.CustomResourceDefinition, opts Options) ([]registry.Resource, error) {
	in, err := apiextensions.Internal(crd)
	if err != nil {
		return nil, err
	}
	storage := ""
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			storage = v.Name
		}
	}
	if storage == "" {
		return nil, fmt.Errorf("%s has no storage version", crd.Name)
	}
	conv, err := newConverter(crd, opts.Services)
	if err != nil {
		return nil, err
	}
	convert := func(obj runtime.Object, to schema.GroupVersion) (runtime.Object, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil, fmt.Errorf("%T is not a custom resource", obj)
		}
		return conv.Convert(u, to)
	}
	fromStorage, err := storedReader(crd, in)
	if err != nil {
		return nil, err
	}
	var out []registry.Resource
	for i, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		st, err := newStrategy(crd, in, &in.Spec.Versions[i], opts.Terminating)
		if err != nil {
			return nil, fmt.Errorf("%s version %s: %w", crd.Name, v.Name, err)
		}
		gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
		kind, listKind := crd.Spec.Names.Kind, crd.Spec.Names.ListKind
		res := registry.Resource{
			GroupVersion:  gv,
			Resource:      crd.Spec.Names.Plural,
			Kind:          kind,
			ListKind:      listKind,
			SingularName:  crd.Spec.Names.Singular,
			ShortNames:    crd.Spec.Names.ShortNames,
			Categories:    crd.Spec.Names.Categories,
			Namespaced:    crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			StoragePrefix: crd.Spec.Group + "/" + crd.Spec.Names.Plural,
			New: func() runtime.Object {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(gv.WithKind(kind))
				return u
			},
			NewList: func() runtime.Object {
				u := &unstructured.UnstructuredList{}
				u.SetGroupVersionKind(gv.WithKind(listKind))
				return u
			},
			Strategy: st,
			Custom:   &registry.CustomStorage{StorageVersion: schema.GroupVersion{Group: crd.Spec.Group, Version: storage}, Convert: convert, FromStorage: fromStorage},
		}
		if res.Custom.FieldManager, err = fieldManagerFunc(crd, v.Name, st.hasStatus, opts.Definitions); err != nil {
			return nil, fmt.Errorf("%s version %s: %w", crd.Name, v.Name, err)
		}
		if v.Subresources != nil {
			res.Subresources = map[string]registry.Subresource{}
			if v.Subresources.Status != nil {
				res.Subresources["status"] = registry.StatusSubresource()
			}
			if v.Subresources.Scale != nil {
				res.Subresources["scale"] = registry.ScaleSubresource()
			}
		}
		out = append(out, res)
	}
	return out, nil
}

// storedReader returns what is applied to an object read from etcd, with
// the schema of the version it was stored in, as upstream's storage
// decoder: fields the schema does not declare are pruned (a CRD whose
// schema dropped a field stops showing it, though etcd still holds it),
// nulls of non-nullable fields without a default are dropped, and the
// schema's defaults are applied (an object stored before a default was
// added shows it). Nil when no version has a schema.
func storedReader(crd *apiextensionsv1.CustomResourceDefinition, in *apiextensionsinternal.CustomResourceDefinition) (func(runtime.Object), error) {
	type read struct {
		schema   *structuralschema.Structural
		defaults bool
	}
	byAPIVersion := map[string]read{}
	for _, v := range crd.Spec.Versions {
		validation, err := apiextensionsinternal.GetSchemaForVersion(in, v.Name)
		if err != nil {
			return nil, err
		}
		if validation == nil || validation.OpenAPIV3Schema == nil {
			continue
		}
		s, err := structuralschema.NewStructural(validation.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("%s version %s: structural schema: %w", crd.Name, v.Name, err)
		}
		byAPIVersion[crd.Spec.Group+"/"+v.Name] = read{s, hasDefaults(s)}
	}
	if len(byAPIVersion) == 0 {
		return nil, nil
	}
	return func(obj runtime.Object) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		r, ok := byAPIVersion[u.GetAPIVersion()]
		if !ok {
			return
		}
		pruning.PruneWithOptions(u.Object, r.schema, true, structuralschema.UnknownFieldPathOptions{})
		defaulting.PruneNonNullableNullsWithoutDefaults(u.Object, r.schema)
		if r.defaults {
			defaulting.Default(u.Object, r.schema)
		}
	}, nil
}

// hasDefaults reports whether s or any schema under it has a default.
func hasDefaults(s *structuralschema.Structural) bool {
	if s == nil {
		return false
	}
	if s.Default.Object != nil {
		return true
	}
	for _, p := range s.Properties {
		if hasDefaults(&p) {
			return true
		}
	}
	if s.AdditionalProperties != nil && hasDefaults(s.AdditionalProperties.Structural) {
		return true
	}
	return hasDefaults(s.Items)
}

// versionSchema is the structural schema of one version, and what is
// derived from it.
type versionSchema struct {
	structural *structuralschema.Structural
	validator  schemavalidation.SchemaValidator
	status     schemavalidation.SchemaValidator // of .status, when it has a schema
	cel        *cel.Validator
}

func newVersionSchema(props *apiextensionsinternal.JSONSchemaProps) (*versionSchema, error) {
	if props == nil {
		return nil, nil
	}
	s, err := structuralschema.NewStructural(props)
	if err != nil {
		return nil, fmt.Errorf("structural schema: %w", err)
	}
	val, _, err := schemavalidation.NewSchemaValidator(props)
	if err != nil {
		return nil, fmt.Errorf("schema validator: %w", err)
	}
	vs := &versionSchema{structural: s, validator: val, cel: cel.NewValidator(s, true, celconfig.PerCallLimit)}
	if st, ok := props.Properties["status"]; ok {
		if vs.status, _, err = schemavalidation.NewSchemaValidator(&st); err != nil {
			return nil, fmt.Errorf("status schema validator: %w", err)
		}
	}
	return vs, nil
}
