package openapi

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Custom is the published OpenAPI of one served version of a custom
// resource, as upstream's CRD OpenAPI builder makes it
// (k8s.io/apiextensions-apiserver's controller/openapi/builder).
type Custom struct {
	GroupVersion schema.GroupVersion
	// V2 is a Swagger 2.0 document (JSON) with the resource's paths and
	// definitions; V3 an OpenAPI 3.0 one.
	V2, V3 []byte
}

// customDocs are the documents served while custom resources exist: the
// built-in ones with the custom paths and definitions merged in.
type customDocs struct {
	items  []Custom
	v3     map[string]*document // the custom group versions only
	v3Root *document
	v2once sync.Once
	v2     *document
	v2err  error
}

// SetCustom replaces the custom resources' documents. The Swagger 2.0
// document, large, is rebuilt on its next request.
func (o *OpenAPI) SetCustom(items []Custom) error {
	if len(items) == 0 {
		o.custom.Store(nil)
		return nil
	}
	c := &customDocs{items: items, v3: map[string]*document{}}
	byGV := map[string][]map[string]any{}
	for _, it := range items {
		var doc map[string]any
		if err := json.Unmarshal(it.V3, &doc); err != nil {
			return fmt.Errorf("openapi v3 of %s: %w", it.GroupVersion, err)
		}
		key := gvPath(it.GroupVersion)
		byGV[key] = append(byGV[key], doc)
	}
	root := map[string]any{}
	for key, doc := range o.v3 {
		if _, custom := byGV[key]; !custom {
			root[key] = map[string]any{"serverRelativeURL": serverRelativeURL(key, doc.etag)}
		}
	}
	for key, docs := range byGV {
		merged := docs[0]
		for _, d := range docs[1:] {
			mergeSection(merged, d, "paths")
			mergeComponents(merged, d)
		}
		doc, err := encode(merged, openapiv3Proto)
		if err != nil {
			return fmt.Errorf("openapi v3 %s: %w", key, err)
		}
		c.v3[key] = doc
		root[key] = map[string]any{"serverRelativeURL": serverRelativeURL(key, doc.etag)}
	}
	rootDoc, err := encode(map[string]any{"paths": root}, nil)
	if err != nil {
		return fmt.Errorf("openapi v3 root: %w", err)
	}
	c.v3Root = rootDoc
	o.custom.Store(c)
	return nil
}

func mergeSection(dst, src map[string]any, key string) {
	d, _ := dst[key].(map[string]any)
	if d == nil {
		d = map[string]any{}
		dst[key] = d
	}
	s, _ := src[key].(map[string]any)
	for k, v := range s {
		d[k] = v
	}
}

func mergeComponents(dst, src map[string]any) {
	dc, _ := dst["components"].(map[string]any)
	if dc == nil {
		dc = map[string]any{}
		dst["components"] = dc
	}
	sc, _ := src["components"].(map[string]any)
	mergeSection(dc, sc, "schemas")
}

// v2Doc is the Swagger 2.0 document to serve.
func (o *OpenAPI) v2Doc() (*document, error) {
	c := o.custom.Load()
	if c == nil {
		return o.v2, nil
	}
	c.v2once.Do(func() {
		var doc map[string]any
		j, err := o.v2.json()
		if err != nil {
			c.v2err = err
			return
		}
		if c.v2err = json.Unmarshal(j, &doc); c.v2err != nil {
			return
		}
		sort.Slice(c.items, func(i, j int) bool { return gvPath(c.items[i].GroupVersion) < gvPath(c.items[j].GroupVersion) })
		for _, it := range c.items {
			var d map[string]any
			if c.v2err = json.Unmarshal(it.V2, &d); c.v2err != nil {
				return
			}
			mergeSection(doc, d, "paths")
			mergeSection(doc, d, "definitions")
		}
		c.v2, c.v2err = encode(doc, openapiv2Proto)
	})
	return c.v2, c.v2err
}

// v3Docs are the OpenAPI 3.0 root and the document of a group version.
func (o *OpenAPI) v3RootDoc() *document {
	if c := o.custom.Load(); c != nil {
		return c.v3Root
	}
	return o.v3Root
}

func (o *OpenAPI) v3Doc(key string) (*document, bool) {
	if c := o.custom.Load(); c != nil {
		if d, ok := c.v3[key]; ok {
			return d, true
		}
	}
	d, ok := o.v3[key]
	return d, ok
}
