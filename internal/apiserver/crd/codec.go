package crd

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// StorageCodec keeps custom resources in etcd as upstream does: JSON, in
// the storage version's apiVersion. Served versions differ from it only by
// apiVersion (conversion None), so reading rewrites it to Served.
type StorageCodec struct {
	Storage schema.GroupVersion
	Served  schema.GroupVersionKind
	// Convert converts between versions (nil: conversion None).
	Convert func(obj runtime.Object, to schema.GroupVersion) (runtime.Object, error)
	// FromStorage, when set, is applied to an object as it is read, in
	// the version it was stored in (before conversion), as upstream's
	// storage decoder does: fields its schema no longer declares are
	// pruned and defaults added since it was written are applied, without
	// rewriting it.
	FromStorage func(u *unstructured.Unstructured)
}

// convert brings u to version gv.
func (c StorageCodec) convert(u *unstructured.Unstructured, gv schema.GroupVersion) (*unstructured.Unstructured, error) {
	if c.Convert == nil || u.GetAPIVersion() == gv.String() {
		out := u.DeepCopy()
		out.SetAPIVersion(gv.String())
		return out, nil
	}
	obj, err := c.Convert(u, gv)
	if err != nil {
		return nil, err
	}
	return obj.(*unstructured.Unstructured), nil
}

func (c StorageCodec) Encode(obj runtime.Object) ([]byte, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("%T is not a custom resource", obj)
	}
	out, err := c.convert(u, c.Storage)
	if err != nil {
		return nil, err
	}
	out.SetResourceVersion("")
	return json.Marshal(out.Object)
}

func (c StorageCodec) Decode(data []byte, into runtime.Object) error {
	u, ok := into.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("%T is not a custom resource", into)
	}
	u.Object = nil
	if err := u.UnmarshalJSON(data); err != nil {
		return fmt.Errorf("decode %s: %w", c.Served.Kind, err)
	}
	if c.FromStorage != nil {
		c.FromStorage(u)
	}
	out, err := c.convert(u, c.Served.GroupVersion())
	if err != nil {
		return err
	}
	*u = *out
	u.SetKind(c.Served.Kind)
	return nil
}
