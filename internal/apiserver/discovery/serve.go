package discovery

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Handles reports whether path is a discovery path: /api, /api/<version>,
// /apis, /apis/<group>, /apis/<group>/<version> or /version. The main
// handler sends these here and everything deeper to the resource handlers.
func (d *Discovery) Handles(path string) bool {
	segs := splitPath(path)
	switch {
	case len(segs) == 1:
		return segs[0] == "api" || segs[0] == "apis" || segs[0] == "version"
	case len(segs) == 2:
		return segs[0] == "api" || segs[0] == "apis"
	case len(segs) == 3:
		return segs[0] == "apis"
	}
	return false
}

func splitPath(path string) []string {
	path = strings.Trim(path, "/")
	if path == "" {
		return nil
	}
	return strings.Split(path, "/")
}

// ServeHTTP serves the discovery paths (see Handles); other paths get a 404
// Status.
func (d *Discovery) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		d.writeError(w, r, apierrors.NewGenericServerResponse(http.StatusMethodNotAllowed, strings.ToLower(r.Method), schema.GroupResource{}, "", "", 0, false))
		return
	}
	docs := d.docs.Load()
	segs := splitPath(r.URL.Path)
	switch {
	case len(segs) == 1 && segs[0] == "version":
		d.serveVersion(w)
	case len(segs) == 1 && segs[0] == "api":
		d.serveCore(w, r, docs)
	case len(segs) == 2 && segs[0] == "api":
		list, ok := docs.resources[segs[1]]
		if !ok || !contains(docs.coreVersions, segs[1]) {
			d.writeNotFound(w, r)
			return
		}
		d.serveLegacy(w, r, list, "APIResourceList", false)
	case len(segs) == 1 && segs[0] == "apis":
		d.serveGroups(w, r, docs)
	case len(segs) == 2 && segs[0] == "apis":
		group, ok := findGroup(docs, segs[1])
		if !ok {
			d.writeNotFound(w, r)
			return
		}
		d.serveLegacy(w, r, &group, "APIGroup", true)
	case len(segs) == 3 && segs[0] == "apis":
		list, ok := docs.resources[segs[1]+"/"+segs[2]]
		if !ok {
			d.writeNotFound(w, r)
			return
		}
		d.serveLegacy(w, r, list, "APIResourceList", true)
	default:
		d.writeNotFound(w, r)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func findGroup(docs *documents, name string) (metav1.APIGroup, bool) {
	for _, g := range docs.groups {
		if g.Name == name {
			return g, true
		}
	}
	return metav1.APIGroup{}, false
}

func (d *Discovery) serveVersion(w http.ResponseWriter) {
	body, err := json.MarshalIndent(d.version, "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", mediaJSON)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// serveCore answers /api: the core group in aggregated form, or
// metav1.APIVersions.
func (d *Discovery) serveCore(w http.ResponseWriter, r *http.Request, docs *documents) {
	c, ok := negotiate(r.Header.Get("Accept"), true)
	if !ok {
		d.writeNotAcceptable(w, r)
		return
	}
	if c.aggregated {
		d.write(w, r, c, docs.aggregatedCore, http.StatusOK)
		return
	}
	versions := &metav1.APIVersions{Versions: append([]string{}, docs.coreVersions...)}
	if r.Host != "" {
		versions.ServerAddressByClientCIDRs = []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}}
	}
	d.serveLegacyChoice(w, r, c, versions, "APIVersions", false)
}

// serveGroups answers /apis: every non-core group in aggregated form, or
// metav1.APIGroupList.
func (d *Discovery) serveGroups(w http.ResponseWriter, r *http.Request, docs *documents) {
	c, ok := negotiate(r.Header.Get("Accept"), true)
	if !ok {
		d.writeNotAcceptable(w, r)
		return
	}
	if c.aggregated {
		d.write(w, r, c, docs.aggregatedAPIs, http.StatusOK)
		return
	}
	list := &metav1.APIGroupList{Groups: append([]metav1.APIGroup{}, docs.groups...)}
	d.serveLegacyChoice(w, r, c, list, "APIGroupList", true)
}

func (d *Discovery) serveLegacy(w http.ResponseWriter, r *http.Request, obj runtime.Object, kind string, withAPIVersion bool) {
	c, ok := negotiate(r.Header.Get("Accept"), false)
	if !ok {
		d.writeNotAcceptable(w, r)
		return
	}
	d.serveLegacyChoice(w, r, c, obj, kind, withAPIVersion)
}

// serveLegacyChoice writes a legacy document. It copies obj before setting
// its type: the snapshot is shared between requests. Upstream's JSON for /api
// and /api/v1 carries no apiVersion; protobuf always needs one.
func (d *Discovery) serveLegacyChoice(w http.ResponseWriter, r *http.Request, c choice, obj runtime.Object, kind string, withAPIVersion bool) {
	obj = obj.DeepCopyObject()
	tm := metav1.TypeMeta{Kind: kind}
	if withAPIVersion || c.mediaType == mediaProtobuf {
		tm.APIVersion = "v1"
	}
	obj.GetObjectKind().SetGroupVersionKind(tm.GroupVersionKind())
	d.write(w, r, c, obj, http.StatusOK)
}

// write encodes obj in c's format. Aggregated documents get an ETag and
// honour If-None-Match, as upstream's do.
func (d *Discovery) write(w http.ResponseWriter, r *http.Request, c choice, obj runtime.Object, code int) {
	info, ok := runtime.SerializerInfoForMediaType(d.codecs.SupportedMediaTypes(), c.mediaType)
	if !ok {
		http.Error(w, fmt.Sprintf("no serializer for %s", c.mediaType), http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := info.Serializer.Encode(obj, &buf); err != nil {
		http.Error(w, fmt.Sprintf("encode %s: %v", c.mediaType, err), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", c.contentType())
	h.Add("Vary", "Accept")
	if c.aggregated && code == http.StatusOK {
		sum := sha256.Sum256(buf.Bytes())
		etag := `"` + hex.EncodeToString(sum[:]) + `"`
		h.Set("ETag", etag)
		if match := r.Header.Get("If-None-Match"); match != "" && match == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

func (d *Discovery) writeNotFound(w http.ResponseWriter, r *http.Request) {
	d.writeError(w, r, apierrors.NewGenericServerResponse(http.StatusNotFound, "get", schema.GroupResource{}, "", "", 0, false))
}

func (d *Discovery) writeNotAcceptable(w http.ResponseWriter, r *http.Request) {
	err := apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "get", schema.GroupResource{}, "", "", 0, false)
	err.ErrStatus.Message = fmt.Sprintf("only the following media types are accepted: %s, %s, %s", mediaJSON, mediaYAML, mediaProtobuf)
	d.writeError(w, r, err)
}

// writeError writes a metav1.Status in the client's preferred legacy format
// (JSON when it accepts none).
func (d *Discovery) writeError(w http.ResponseWriter, r *http.Request, err *apierrors.StatusError) {
	c, ok := negotiate(r.Header.Get("Accept"), false)
	if !ok {
		c = choice{mediaType: mediaJSON}
	}
	status := err.Status()
	status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	d.write(w, r, c, &status, int(status.Code))
}
