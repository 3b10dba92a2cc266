package apiserver

import (
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func metaOf(obj runtime.Object) (metav1.Object, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return m, nil
}

func partialMetadata(obj runtime.Object) (*metav1.PartialObjectMetadata, error) {
	if u, ok := obj.(runtime.Unstructured); ok { // custom resources
		pm := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"}}
		md, _ := u.UnstructuredContent()["metadata"].(map[string]interface{})
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(md, &pm.ObjectMeta); err != nil {
			return nil, fmt.Errorf("metadata of %T: %w", obj, err)
		}
		return pm, nil
	}
	mo, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return nil, fmt.Errorf("unexpected object type %T", obj)
	}
	om, ok := mo.GetObjectMeta().(*metav1.ObjectMeta)
	if !ok {
		return nil, fmt.Errorf("unexpected metadata type %T", mo.GetObjectMeta())
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"},
		ObjectMeta: *om,
	}, nil
}

// tableRow makes one row; the row's object is what includeObject asks
// for (Metadata by default).
func (h *resourceHandler) tableRow(obj runtime.Object, include string) (metav1.TableRow, error) {
	cells, err := h.res.Strategy.TableRow(obj)
	if err != nil {
		return metav1.TableRow{}, err
	}
	row := metav1.TableRow{Cells: cells}
	switch include {
	case "None":
	case "Object":
		h.codecs.ensureKind(obj)
		raw, err := json.Marshal(obj)
		if err != nil {
			return row, err
		}
		row.Object.Raw = raw
	default:
		pm, err := partialMetadata(obj)
		if err != nil {
			return row, err
		}
		raw, err := json.Marshal(pm)
		if err != nil {
			return row, err
		}
		row.Object.Raw = raw
	}
	return row, nil
}

func (h *resourceHandler) table(objs []runtime.Object, include string, withColumns bool) (*metav1.Table, error) {
	t := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"}}
	if withColumns {
		t.ColumnDefinitions = h.res.Strategy.TableColumns()
	}
	t.Rows = make([]metav1.TableRow, 0, len(objs))
	for _, o := range objs {
		row, err := h.tableRow(o, include)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		t.Rows = append(t.Rows, row)
	}
	return t, nil
}

// asList turns a list into the representation the client asked for.
func (h *resourceHandler) asList(list runtime.Object, out output, p listParams) (runtime.Object, error) {
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	lm, _ := meta.ListAccessor(list)
	switch out.as {
	case "Table":
		t, err := h.table(items, p.IncludeObject, true)
		if err != nil {
			return nil, err
		}
		t.ResourceVersion = lm.GetResourceVersion()
		t.Continue = lm.GetContinue()
		t.RemainingItemCount = lm.GetRemainingItemCount()
		return t, nil
	case "PartialObjectMetadataList", "PartialObjectMetadata":
		pl := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadataList", APIVersion: "meta.k8s.io/v1"}}
		pl.ResourceVersion = lm.GetResourceVersion()
		pl.Continue = lm.GetContinue()
		for _, it := range items {
			pm, err := partialMetadata(it)
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			pl.Items = append(pl.Items, *pm)
		}
		return pl, nil
	}
	return list, nil
}

// asObject turns a single object into the representation asked for.
func (h *resourceHandler) asObject(obj runtime.Object, out output) (runtime.Object, error) {
	if _, isStatus := obj.(*metav1.Status); isStatus {
		return obj, nil
	}
	if !meta.IsListType(obj) {
		switch out.as {
		case "Table":
			return h.table([]runtime.Object{obj}, "", true)
		case "PartialObjectMetadata":
			pm, err := partialMetadata(obj)
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			return pm, nil
		case "PartialObjectMetadataList":
			return nil, apierrors.NewBadRequest("a single object cannot be returned as a PartialObjectMetadataList")
		}
		return obj, nil
	}
	return h.asList(obj, out, listParams{})
}
