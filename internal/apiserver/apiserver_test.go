package apiserver

import (
	"bufio"
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestParseRequestInfo(t *testing.T) {
	cases := []struct {
		method, url string
		want        RequestInfo
	}{
		{"GET", "/api/v1/namespaces/ns/pods", RequestInfo{IsResourceRequest: true, Verb: "list", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "pods"}},
		{"GET", "/api/v1/namespaces/ns/pods?watch=true", RequestInfo{IsResourceRequest: true, Verb: "watch", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "pods"}},
		{"GET", "/api/v1/namespaces/ns/pods/p", RequestInfo{IsResourceRequest: true, Verb: "get", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "pods", Name: "p"}},
		{"POST", "/api/v1/namespaces/ns/pods/p/binding", RequestInfo{IsResourceRequest: true, Verb: "create", APIPrefix: "api", APIVersion: "v1", Namespace: "ns", Resource: "pods", Name: "p", Subresource: "binding"}},
		{"PUT", "/api/v1/namespaces/ns/finalize", RequestInfo{IsResourceRequest: true, Verb: "update", APIPrefix: "api", APIVersion: "v1", Resource: "namespaces", Name: "ns", Subresource: "finalize"}},
		{"GET", "/api/v1/namespaces/ns", RequestInfo{IsResourceRequest: true, Verb: "get", APIPrefix: "api", APIVersion: "v1", Resource: "namespaces", Name: "ns"}},
		{"GET", "/api/v1/namespaces", RequestInfo{IsResourceRequest: true, Verb: "list", APIPrefix: "api", APIVersion: "v1", Resource: "namespaces"}},
		{"DELETE", "/apis/apps/v1/namespaces/ns/deployments", RequestInfo{IsResourceRequest: true, Verb: "deletecollection", APIPrefix: "apis", APIGroup: "apps", APIVersion: "v1", Namespace: "ns", Resource: "deployments"}},
		{"PATCH", "/apis/apps/v1/namespaces/ns/deployments/d/scale", RequestInfo{IsResourceRequest: true, Verb: "patch", APIPrefix: "apis", APIGroup: "apps", APIVersion: "v1", Namespace: "ns", Resource: "deployments", Name: "d", Subresource: "scale"}},
		{"GET", "/apis/apps/v1/deployments", RequestInfo{IsResourceRequest: true, Verb: "list", APIPrefix: "apis", APIGroup: "apps", APIVersion: "v1", Resource: "deployments"}},
		{"GET", "/apis/apps/v1", RequestInfo{Verb: "get", APIPrefix: "apis"}},
		{"GET", "/healthz", RequestInfo{Verb: "get"}},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.url, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.url, nil)
			got := parseRequestInfo(r)
			tc.want.Path = r.URL.Path
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestNegotiateOutput(t *testing.T) {
	cases := []struct {
		accept  string
		want    output
		wantErr bool
	}{
		{"", output{mediaType: mediaJSON}, false},
		{"application/json;as=Table;v=v1;g=meta.k8s.io,application/json", output{mediaType: mediaJSON, as: "Table"}, false},
		{"application/json;as=Table;v=v2;g=meta.k8s.io,application/json", output{mediaType: mediaJSON}, false},
		{"application/vnd.kubernetes.protobuf,application/json", output{mediaType: mediaProtobuf}, false},
		{"application/yaml", output{mediaType: mediaYAML}, false},
		{"application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", output{mediaType: mediaJSON, as: "PartialObjectMetadataList"}, false},
		{"*/*", output{mediaType: mediaJSON}, false},
		{"text/html", output{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.accept, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/api/v1/pods", nil)
			r.Header.Set("Accept", tc.accept)
			got, err := negotiateOutput(r)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil {
				if s := errorToStatus(err); s.Code != http.StatusNotAcceptable {
					t.Fatalf("code %d, want 406", s.Code)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(output{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestProtoListMatchesMarshal: the list written from per-item encodings
// decodes, with the protobuf serializer clients use, to the same list as
// marshalling the typed list.
func TestProtoListMatchesMarshal(t *testing.T) {
	c, err := newCodecs()
	if err != nil {
		t.Fatal(err)
	}
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Labels: map[string]string{"x": "y"}}, Spec: corev1.PodSpec{NodeName: "n1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
	}
	for _, n := range []int{0, 2} {
		var items [][]byte
		for i := 0; i < n; i++ {
			b, err := marshalProto(&pods[i])
			if err != nil {
				t.Fatal(err)
			}
			items = append(items, b)
		}
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		writeProtoList(w, "v1", "PodList", "42", items)
		w.Flush()
		got := &corev1.PodList{}
		if _, _, err := c.protobuf.Decode(buf.Bytes(), nil, got); err != nil {
			t.Fatalf("%d items: decode: %v", n, err)
		}
		want := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, ListMeta: metav1.ListMeta{ResourceVersion: "42"}, Items: pods[:n]}
		if n == 0 {
			want.Items = nil
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%d items (-want +got):\n%s", n, diff)
		}
	}
}

func TestCheckKind(t *testing.T) {
	want := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	cases := []struct {
		body string
		yaml bool
		ok   bool
	}{
		{`{"apiVersion":"v1","kind":"ConfigMap"}`, false, true},
		{`{"metadata":{"name":"x"}}`, false, true},
		{`{"apiVersion":"v1","kind":"Secret"}`, false, false},
		{`{"apiVersion":"apps/v1","kind":"ConfigMap"}`, false, false},
		{"apiVersion: v1\nkind: Secret\n", true, false},
		{`{"apiVersion":`, false, false},
	}
	for _, tc := range cases {
		err := checkKind([]byte(tc.body), tc.yaml, want)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok=%v", tc.body, err, tc.ok)
		}
		if err != nil && !apierrors.IsBadRequest(err) {
			t.Errorf("%s: got %v, want 400", tc.body, err)
		}
	}
}

func TestApplyPatchErrors(t *testing.T) {
	cur := []byte(`{"metadata":{"name":"x"},"data":{"a":"1"}}`)
	cases := []struct {
		name  string
		pt    types.PatchType
		patch string
		code  int32
	}{
		{"json patch test fails", types.JSONPatchType, `[{"op":"test","path":"/data/a","value":"2"}]`, http.StatusUnprocessableEntity},
		{"json patch malformed", types.JSONPatchType, `[{"op":`, http.StatusBadRequest},
		{"merge patch malformed", types.MergePatchType, `{"data":`, http.StatusBadRequest},
		{"strategic patch malformed", types.StrategicMergePatchType, `{"data":`, http.StatusBadRequest},
		{"json patch ok", types.JSONPatchType, `[{"op":"replace","path":"/data/a","value":"2"}]`, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := applyPatch(tc.pt, cur, []byte(tc.patch), &corev1.ConfigMap{})
			var code int32
			if err != nil {
				code = errorToStatus(err).Code
			}
			if code != tc.code {
				t.Fatalf("code %d (%v), want %d", code, err, tc.code)
			}
		})
	}
}

func TestWrongTarget(t *testing.T) {
	cases := []struct {
		info RequestInfo
		want bool
	}{
		{RequestInfo{Verb: "create"}, false},
		{RequestInfo{Verb: "create", Name: "x"}, true},
		{RequestInfo{Verb: "create", Name: "x", Subresource: "binding"}, false},
		{RequestInfo{Verb: "update"}, true},
		{RequestInfo{Verb: "patch", Name: "x"}, false},
	}
	for _, tc := range cases {
		if got := wrongTarget(tc.info); got != tc.want {
			t.Errorf("%+v: got %v, want %v", tc.info, got, tc.want)
		}
	}
}
