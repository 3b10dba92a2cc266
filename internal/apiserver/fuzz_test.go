package apiserver

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// FuzzApplyPatch: every patch type on a config map either applies or is
// refused with an API status (400, 413, 415 or 422); never a panic, never a
// 500, and never more than the copy limit of growth.
func FuzzApplyPatch(f *testing.F) {
	cur := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","labels":{"a":"b"}},"data":{"a":"1","b":"2"}}`
	seeds := []struct {
		pt    string
		patch string
	}{
		{"json", `[{"op":"replace","path":"/data/a","value":"2"}]`},
		{"json", `[{"op":"copy","from":"/data","path":"/metadata/annotations"}]`},
		{"json", `[{"op":"move","from":"/data/a","path":"/data/c"},{"op":"test","path":"/data/c","value":"1"}]`},
		{"json", `[{"op":"remove","path":"/metadata/labels"}]`},
		{"merge", `{"data":{"a":null,"z":"9"}}`},
		{"merge", `{"metadata":{"labels":null}}`},
		{"strategic", `{"data":{"a":"3"},"metadata":{"$patch":"replace"}}`},
		{"strategic", `{"$retainKeys":["data"]}`},
		{"json", `[`}, {"merge", `"x"`}, {"strategic", `[]`},
	}
	for _, s := range seeds {
		f.Add(s.pt, s.patch)
	}
	types := map[string]types.PatchType{"json": types.JSONPatchType, "merge": types.MergePatchType, "strategic": types.StrategicMergePatchType}
	f.Fuzz(func(t *testing.T, kind, patch string) {
		pt, ok := types[kind]
		if !ok {
			return
		}
		out, err := applyPatch(pt, []byte(cur), []byte(patch), &corev1.ConfigMap{})
		if err != nil {
			if code := errorToStatus(err).Code; code >= 500 {
				t.Fatalf("%s patch %q: %d %v", kind, patch, code, err)
			}
			return
		}
		if len(out) > len(cur)+len(patch)+maxJSONPatchCopyBytes+1024 {
			t.Fatalf("%s patch %q grew the object to %d bytes", kind, patch, len(out))
		}
	})
}

// FuzzDecodeBody: a request body in JSON, YAML or protobuf either decodes
// into a config map or is refused with a 4xx; never a panic.
func FuzzDecodeBody(f *testing.F) {
	c, err := newCodecs()
	if err != nil {
		f.Fatal(err)
	}
	f.Add("application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"k":"v"}}`)
	f.Add("application/yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  k: v\n")
	f.Add("application/vnd.kubernetes.protobuf", "k8s\x00\n\x0f\n\x02v1\x12\tConfigMap\x12\x05\n\x03\n\x01x")
	f.Add("application/json", `{"apiVersion":"v1","kind":"Secret"}`)
	f.Add("application/json", `{"metadata":{"name":1}}`)
	f.Add("application/yaml", "a: &a [*a]")
	gvk := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	f.Fuzz(func(t *testing.T, contentType, body string) {
		if contentType != "application/json" && contentType != "application/yaml" && contentType != "application/vnd.kubernetes.protobuf" {
			return
		}
		r := httptest.NewRequest("POST", "/api/v1/namespaces/a/configmaps?fieldValidation=Strict", strings.NewReader(body))
		r.Header.Set("Content-Type", contentType)
		_, err := c.decodeBody(r, []byte(body), &corev1.ConfigMap{}, gvk)
		if err != nil {
			if code := errorToStatus(err).Code; code >= 500 {
				t.Fatalf("%s %q: %d %v", contentType, body, code, err)
			}
		}
	})
}

// FuzzListParams: label and field selectors, resourceVersion, limit,
// continue and the watch options either parse or are a 400; never a panic.
func FuzzListParams(f *testing.F) {
	for _, q := range []string{
		"labelSelector=app%3Dx%2Ctier+in+(a,b),!legacy", "fieldSelector=metadata.name%3Dx", "fieldSelector=spec.nodeName!%3D",
		"resourceVersion=10&resourceVersionMatch=NotOlderThan", "limit=5&continue=abc", "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
		"labelSelector=a+in+(", "timeoutSeconds=-1", "labelSelector=x%3D%3Dy,z+notin+()",
	} {
		f.Add(q)
	}
	fields := map[string]bool{"metadata.name": true, "metadata.namespace": true, "spec.nodeName": true}
	f.Fuzz(func(t *testing.T, rawQuery string) {
		q, err := url.ParseQuery(rawQuery)
		if err != nil {
			return
		}
		if _, err := parseListParams(q, fields); err != nil {
			if code := errorToStatus(err).Code; code != 400 {
				t.Fatalf("%q: %d %v, want 400", rawQuery, code, err)
			}
		}
	})
}

// TestJSONPatchValues: an operation that needs a value and has none is a
// 400 naming it; "value": null is a value.
func TestJSONPatchValues(t *testing.T) {
	cur := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","labels":{"a":"b"}}}`)
	for _, patch := range []string{`[{"op":"test","path":""}]`, `[{"op":"add","path":"/data"}]`, `[{"op":"replace","path":"/metadata/labels"}]`} {
		_, err := applyPatch(types.JSONPatchType, cur, []byte(patch), &corev1.ConfigMap{})
		if st := errorToStatus(err); st.Code != 400 || !strings.Contains(st.Message, "value") {
			t.Errorf("patch %s: %v, want 400 naming the missing value", patch, err)
		}
	}
	out, err := applyPatch(types.JSONPatchType, cur, []byte(`[{"op":"replace","path":"/metadata/labels","value":null}]`), &corev1.ConfigMap{})
	if err != nil || !strings.Contains(string(out), `"labels":null`) {
		t.Errorf("replace with null: %s, %v", out, err)
	}
}
