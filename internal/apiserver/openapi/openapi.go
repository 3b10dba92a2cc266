// Package openapi builds and serves the API server's OpenAPI documents:
// /openapi/v2 (one Swagger 2.0 document, JSON or protobuf) and /openapi/v3
// (a discovery root and one OpenAPI 3.0 document per group version).
//
// The schemas are derived by reflection from the Go types of the served
// resources (k8s.io/api), named as upstream names them, described from the
// types' SwaggerDoc methods, and carry the extensions kubectl reads:
// x-kubernetes-group-version-kind, x-kubernetes-patch-strategy and
// x-kubernetes-patch-merge-key. The documents are built once by New and are
// immutable; their bytes and hashes are computed up front.
package openapi

//go:generate go run ./internal/markergen

import (
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	openapiv3 "github.com/google/gnostic-models/openapiv3"
	"github.com/munnerz/goautoneg"
	"google.golang.org/protobuf/proto"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Media types of the documents.
const (
	mediaJSON     = "application/json"
	mediaV2PB     = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
	mediaV2PBOld  = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	mediaV3PB     = "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"
	mediaV3PBOld  = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"
	v2Path        = "/openapi/v2"
	v3Path        = "/openapi/v3"
	v3GroupPrefix = "/openapi/v3/"
)

// document is one OpenAPI document. Only its JSON form is kept, and that
// gzipped (a tenth of its size): it is served as it is to clients that
// accept gzip (client-go, kubectl), decompressed for the others, and the
// protobuf form is made from it on its first request, then kept gzipped
// too. Most servers are never asked for most documents, and the JSON,
// protobuf and gzip forms of every one together were the largest part of
// an idle server's heap. The ETag is the SHA-512 of the JSON form, as
// upstream computes it.
type document struct {
	jsonGzip []byte
	etag     string

	toProto   func([]byte) ([]byte, error) // nil: no protobuf form
	protoOnce sync.Once
	protoGzip []byte
	protoErr  error
}

// json is the document's JSON form, decompressed.
func (d *document) json() ([]byte, error) { return gunzip(d.jsonGzip) }

// proto is the document's protobuf form, gzipped.
func (d *document) proto() ([]byte, error) {
	d.protoOnce.Do(func() {
		j, err := d.json()
		if err != nil {
			d.protoErr = err
			return
		}
		pb, err := d.toProto(j)
		if err != nil {
			d.protoErr = err
			return
		}
		d.protoGzip, d.protoErr = compress(pb)
	})
	return d.protoGzip, d.protoErr
}

// OpenAPI serves the documents. It is safe for concurrent use.
type OpenAPI struct {
	v2     *document
	v3     map[string]*document // by "api/v1", "apis/apps/v1"
	v3Root *document
	err    error
	// custom, when set, adds the custom resources (custom.go).
	custom atomic.Pointer[customDocs]
}

// New builds the documents of the given resources. version is the server
// version written in the documents' info. A resource whose Go types cannot
// be described is left out of the documents; Err reports why.
func New(resources []registry.Resource, version string) *OpenAPI {
	o := &OpenAPI{v3: map[string]*document{}}
	o.err = o.build(resources, version)
	return o
}

// Err reports the problems met while building the documents, if any.
func (o *OpenAPI) Err() error { return o.err }

// Handles says whether path is one of the OpenAPI endpoints.
func (o *OpenAPI) Handles(path string) bool {
	return path == v2Path || path == v3Path || strings.HasPrefix(path, v3GroupPrefix)
}

func (o *OpenAPI) build(resources []registry.Resource, version string) error {
	defs := newDefinitions()
	var errs []error
	addGVK := func(t reflect.Type, gvk schema.GroupVersionKind) (string, error) {
		name, err := defs.add(t)
		if err != nil {
			return "", err
		}
		defs.byName[name].gvks = append(defs.byName[name].gvks, gvk)
		return name, nil
	}
	typeOf := func(v any) reflect.Type { return reflect.TypeOf(v).Elem() }

	// Meta types every document refers to.
	metaNames := defNames{}
	var err error
	if metaNames.status, err = addGVK(typeOf(&metav1.Status{}), schema.GroupVersionKind{Version: "v1", Kind: "Status"}); err != nil {
		return fmt.Errorf("meta types: %w", err)
	}
	for _, t := range []struct {
		dst *string
		typ reflect.Type
	}{
		{&metaNames.deleteOptions, typeOf(&metav1.DeleteOptions{})},
		{&metaNames.patch, typeOf(&metav1.Patch{})},
		{&metaNames.scale, typeOf(&autoscalingv1.Scale{})},
		{&metaNames.binding, typeOf(&corev1.Binding{})},
	} {
		if *t.dst, err = defs.add(t.typ); err != nil {
			return fmt.Errorf("meta types: %w", err)
		}
	}
	watchEvent, err := defs.add(typeOf(&metav1.WatchEvent{}))
	if err != nil {
		return fmt.Errorf("meta types: %w", err)
	}

	// Group the resources and describe their kinds.
	seen := map[schema.GroupVersion]bool{}
	var gvs []schema.GroupVersion
	var items []pathItem
	v3Items := map[schema.GroupVersion][]pathItem{}
	v3Roots := map[schema.GroupVersion][]string{}
	for _, res := range resources {
		gv := res.GroupVersion
		names := metaNames
		kindName, err := addGVK(reflect.TypeOf(res.New()), gv.WithKind(res.Kind))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", gv, res.Resource, err))
			continue
		}
		listKind := res.ListKind
		if listKind == "" {
			listKind = res.Kind + "List"
		}
		listName := ""
		if res.NewList != nil { // create-only resources (reviews) have no list
			listName, err = addGVK(reflect.TypeOf(res.NewList()), gv.WithKind(listKind))
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", gv, res.Resource, err))
				continue
			}
		}
		names.kind, names.list = kindName, listName
		if !seen[gv] {
			seen[gv] = true
			gvs = append(gvs, gv)
		}
		paths := resourcePaths(res, names)
		items = append(items, paths...)
		v3Items[gv] = append(v3Items[gv], paths...)
		roots := []string{kindName}
		if listName != "" {
			roots = append(roots, listName)
		}
		if scaleSubresource(res) != "" {
			roots = append(roots, names.scale)
			defs.byName[names.scale].gvks = []schema.GroupVersionKind{scaleGVK}
		}
		if bindingSubresource(res) != "" {
			roots = append(roots, names.binding)
			defs.byName[names.binding].gvks = []schema.GroupVersionKind{bindingGVK}
		}
		v3Roots[gv] = append(v3Roots[gv], roots...)
	}
	sort.Slice(gvs, func(i, j int) bool { return gvPath(gvs[i]) < gvPath(gvs[j]) })
	for _, g := range gvs {
		for _, kind := range []string{"DeleteOptions", "WatchEvent"} {
			name := metaNames.deleteOptions
			if kind == "WatchEvent" {
				name = watchEvent
			}
			defs.byName[name].gvks = append(defs.byName[name].gvks, g.WithKind(kind))
		}
	}
	metaRoots := []string{metaNames.status, metaNames.deleteOptions, metaNames.patch, watchEvent}

	// Swagger 2.0: everything in one document.
	all := append([]string(nil), metaRoots...)
	for _, g := range gvs {
		all = append(all, v3Roots[g]...)
	}
	v2, err := encode(swaggerDocument(defs, defs.closure(all), items, version), openapiv2Proto)
	if err != nil {
		return fmt.Errorf("openapi v2: %w", err)
	}
	o.v2 = v2

	// OpenAPI 3.0: one document per group version, and the root listing them.
	root := map[string]any{}
	for _, g := range gvs {
		key := gvPath(g)
		roots := append(append([]string(nil), metaRoots...), v3Roots[g]...)
		doc, err := encode(openAPI3Document(defs, defs.closure(roots), v3Items[g], version), openapiv3Proto)
		if err != nil {
			return fmt.Errorf("openapi v3 %s: %w", key, err)
		}
		o.v3[key] = doc
		root[key] = map[string]any{"serverRelativeURL": serverRelativeURL(key, doc.etag)}
	}
	rootDoc, err := encode(map[string]any{"paths": root}, nil)
	if err != nil {
		return fmt.Errorf("openapi v3 root: %w", err)
	}
	o.v3Root = rootDoc
	return errors.Join(errs...)
}

func serverRelativeURL(key, etag string) string {
	return v3GroupPrefix + key + "?" + url.Values{"hash": {etag}}.Encode()
}

func renderDefinitions(defs *definitions, names []string, v3 bool) map[string]any {
	out := make(map[string]any, len(names))
	for _, n := range names {
		out[n] = defs.byName[n].render(v3)
	}
	return out
}

func renderPaths(items []pathItem, v3 bool) map[string]any {
	out := make(map[string]any, len(items))
	for _, p := range items {
		out[p.path] = p.render(v3)
	}
	return out
}

func swaggerDocument(defs *definitions, names []string, items []pathItem, version string) map[string]any {
	return map[string]any{
		"swagger":     "2.0",
		"info":        map[string]any{"title": "Kubernetes", "version": version},
		"paths":       renderPaths(items, false),
		"definitions": renderDefinitions(defs, names, false),
		"securityDefinitions": map[string]any{
			"BearerToken": map[string]any{"type": "apiKey", "name": "authorization", "in": "header",
				"description": "Bearer token authentication"},
		},
		"security": []any{map[string]any{"BearerToken": []any{}}},
	}
}

func openAPI3Document(defs *definitions, names []string, items []pathItem, version string) map[string]any {
	return map[string]any{
		"openapi": "3.0.0",
		"info":    map[string]any{"title": "Kubernetes", "version": version},
		"paths":   renderPaths(items, true),
		"components": map[string]any{
			"schemas": renderDefinitions(defs, names, true),
			"securitySchemes": map[string]any{
				"BearerToken": map[string]any{"type": "apiKey", "name": "authorization", "in": "header",
					"description": "Bearer token authentication"},
			},
		},
		"security": []any{map[string]any{"BearerToken": []any{}}},
	}
}

func openapiv2Proto(j []byte) ([]byte, error) {
	doc, err := openapiv2.ParseDocument(j)
	if err != nil {
		return nil, fmt.Errorf("parse swagger document: %w", err)
	}
	return proto.Marshal(doc)
}

func openapiv3Proto(j []byte) ([]byte, error) {
	doc, err := openapiv3.ParseDocument(j)
	if err != nil {
		return nil, fmt.Errorf("parse openapi 3 document: %w", err)
	}
	return proto.Marshal(doc)
}

// encode renders a document to JSON (keys sorted, so deterministic) and
// keeps it gzipped; toProto, when given, makes its protobuf form on
// demand.
func encode(doc map[string]any, toProto func([]byte) ([]byte, error)) (*document, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode json: %w", err)
	}
	j := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	d := &document{etag: fmt.Sprintf("%X", sha512.Sum512(j)), toProto: toProto}
	var err error
	if d.jsonGzip, err = compress(j); err != nil {
		return nil, err
	}
	return d, nil
}

func compress(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	if _, err := zw.Write(b); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return bytes.Clone(buf.Bytes()), nil
}

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	return io.ReadAll(zr)
}

// ServeHTTP answers the OpenAPI endpoints; other paths get 404.
func (o *OpenAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch {
	case r.URL.Path == v2Path:
		o.serveV2(w, r)
	case r.URL.Path == v3Path || r.URL.Path == v3Path+"/":
		w.Header().Set("Content-Type", mediaJSON)
		root := o.v3RootDoc()
		serveBytes(w, r, root.etag, root.jsonGzip)
	case strings.HasPrefix(r.URL.Path, v3GroupPrefix):
		o.serveV3Group(w, r, strings.TrimPrefix(r.URL.Path, v3GroupPrefix))
	default:
		http.NotFound(w, r)
	}
}

// negotiate picks the first offered media type the Accept header allows,
// in the header's order of preference.
func negotiate(r *http.Request, offers []string) (string, bool) {
	accept := r.Header.Get("Accept")
	if accept == "" {
		accept = "*/*"
	}
	for _, clause := range goautoneg.ParseAccept(accept) {
		if clause.Q <= 0 {
			continue
		}
		for _, offer := range offers {
			typ, sub, _ := strings.Cut(offer, "/")
			if (clause.Type == typ || clause.Type == "*") && (clause.SubType == sub || clause.SubType == "*") {
				return offer, true
			}
		}
	}
	return "", false
}

func (o *OpenAPI) serveV2(w http.ResponseWriter, r *http.Request) {
	w.Header().Add("Vary", "Accept")
	media, ok := negotiate(r, []string{mediaJSON, mediaV2PBOld, mediaV2PB})
	if !ok {
		http.Error(w, "no acceptable media type: the OpenAPI v2 document is served as "+mediaJSON+" or "+mediaV2PB, http.StatusNotAcceptable)
		return
	}
	v2, err := o.v2Doc()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	body := v2.jsonGzip
	if media != mediaJSON {
		media = mediaV2PB
		if body, err = v2.proto(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	w.Header().Set("Content-Type", media)
	serveBytes(w, r, v2.etag, body)
}

func (o *OpenAPI) serveV3Group(w http.ResponseWriter, r *http.Request, key string) {
	doc, ok := o.v3Doc(key)
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Add("Vary", "Accept")
	media, ok := negotiate(r, []string{mediaJSON, mediaV3PB, mediaV3PBOld})
	if !ok {
		http.Error(w, "no acceptable media type: OpenAPI v3 documents are served as "+mediaJSON+" or "+mediaV3PB, http.StatusNotAcceptable)
		return
	}
	body := doc.jsonGzip
	if media != mediaJSON {
		media = mediaV3PB
		var err error
		if body, err = doc.proto(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	if hash := r.URL.Query().Get("hash"); hash != "" {
		if hash != doc.etag {
			http.Redirect(w, r, serverRelativeURL(key, doc.etag), http.StatusMovedPermanently)
			return
		}
		// The hash names this exact content: it never changes.
		w.Header().Set("Cache-Control", "public, immutable")
		w.Header().Set("Expires", time.Now().AddDate(1, 0, 0).UTC().Format(http.TimeFormat))
	}
	w.Header().Set("Content-Type", media)
	serveBytes(w, r, doc.etag, body)
}

// serveBytes writes a gzipped document with its ETag, answering
// conditional requests, decompressed for clients that do not accept gzip.
func serveBytes(w http.ResponseWriter, r *http.Request, etag string, gz []byte) {
	w.Header().Set("Etag", strconv.Quote(etag))
	w.Header().Add("Vary", "Accept-Encoding")
	body := gz
	if acceptsGzip(r) {
		w.Header().Set("Content-Encoding", "gzip")
	} else {
		var err error
		if body, err = gunzip(gz); err != nil {
			w.Header().Del("Etag")
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		q, found := strings.CutPrefix(strings.TrimSpace(params), "q=")
		if !found {
			return true
		}
		v, err := strconv.ParseFloat(q, 64)
		return err == nil && v > 0
	}
	return false
}
