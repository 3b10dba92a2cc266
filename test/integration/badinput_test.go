package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testBadInput: malformed, oversized, mistyped and invalid requests get
// the upstream status code and reason as a metav1.Status, and write
// nothing.
func testBadInput(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 30*time.Second)
	existing, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "existing"}, Data: map[string]string{"k": "v1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	staleRV := existing.ResourceVersion
	existing.Data["k"] = "v2"
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, existing, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update: %v", err)
	}

	cmPath := "/api/v1/namespaces/" + ns + "/configmaps"
	podPath := "/api/v1/namespaces/" + ns + "/pods"
	big := strings.Repeat("x", 3<<20+1024)
	cm := func(name, extra string) string {
		return fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q%s},"data":{"k":"v"}}`, name, extra)
	}
	tests := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        string
		wantCode    int
		wantReason  metav1.StatusReason
		wantCauses  []string // field paths, for 422
	}{
		{name: "malformed json", method: http.MethodPost, path: cmPath, contentType: "application/json",
			body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"`, wantCode: 400, wantReason: metav1.StatusReasonBadRequest},
		{name: "body over 3 MiB", method: http.MethodPost, path: cmPath, contentType: "application/json",
			body:     fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"k":%q}}`, big),
			wantCode: 413, wantReason: metav1.StatusReasonRequestEntityTooLarge},
		{name: "unsupported content type", method: http.MethodPost, path: cmPath, contentType: "text/plain",
			body: cm("plain", ""), wantCode: 415, wantReason: metav1.StatusReasonUnsupportedMediaType},
		{name: "invalid name", method: http.MethodPost, path: cmPath, contentType: "application/json",
			body: cm("Foo_Bar", ""), wantCode: 422, wantReason: metav1.StatusReasonInvalid, wantCauses: []string{"metadata.name"}},
		{name: "pod without containers", method: http.MethodPost, path: podPath, contentType: "application/json",
			body:     `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"empty"},"spec":{"containers":[]}}`,
			wantCode: 422, wantReason: metav1.StatusReasonInvalid, wantCauses: []string{"spec.containers"}},
		{name: "pod with a bad container name and no image", method: http.MethodPost, path: podPath, contentType: "application/json",
			body:     `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bad"},"spec":{"containers":[{"name":"Bad_Name"}]}}`,
			wantCode: 422, wantReason: metav1.StatusReasonInvalid, wantCauses: []string{"spec.containers[0].image", "spec.containers[0].name"}},
		{name: "bad label value", method: http.MethodPost, path: cmPath, contentType: "application/json",
			body: cm("labelled", `,"labels":{"k":"-not valid-"}`), wantCode: 422, wantReason: metav1.StatusReasonInvalid, wantCauses: []string{"metadata.labels"}},
		{name: "stale resourceVersion", method: http.MethodPut, path: cmPath + "/existing", contentType: "application/json",
			body: cm("existing", fmt.Sprintf(`,"resourceVersion":%q`, staleRV)), wantCode: 409, wantReason: metav1.StatusReasonConflict},
		{name: "already exists", method: http.MethodPost, path: cmPath, contentType: "application/json",
			body: cm("existing", ""), wantCode: 409, wantReason: metav1.StatusReasonAlreadyExists},
		{name: "name differs from URL", method: http.MethodPut, path: cmPath + "/existing", contentType: "application/json",
			body: cm("other", ""), wantCode: 400, wantReason: metav1.StatusReasonBadRequest},
		{name: "namespace differs from URL", method: http.MethodPost, path: cmPath, contentType: "application/json",
			body: cm("elsewhere", `,"namespace":"kube-system"`), wantCode: 400, wantReason: metav1.StatusReasonBadRequest},
		{name: "kind differs from resource", method: http.MethodPost, path: cmPath, contentType: "application/json",
			body:     `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}`,
			wantCode: 400, wantReason: metav1.StatusReasonBadRequest},
		{name: "unknown resource", method: http.MethodGet, path: "/api/v1/namespaces/" + ns + "/frobs",
			wantCode: 404, wantReason: metav1.StatusReasonNotFound},
		{name: "unknown group", method: http.MethodGet, path: "/apis/nope.example.com/v1/things",
			wantCode: 404, wantReason: metav1.StatusReasonNotFound},
		{name: "missing object", method: http.MethodGet, path: cmPath + "/missing",
			wantCode: 404, wantReason: metav1.StatusReasonNotFound},
		{name: "update of a missing object", method: http.MethodPut, path: cmPath + "/missing", contentType: "application/json",
			body: cm("missing", ""), wantCode: 404, wantReason: metav1.StatusReasonNotFound},
		{name: "missing namespace", method: http.MethodPost, path: "/api/v1/namespaces/nowhere/configmaps", contentType: "application/json",
			body: cm("x", ""), wantCode: 404, wantReason: metav1.StatusReasonNotFound},
		{name: "method not allowed", method: http.MethodPut, path: cmPath, contentType: "application/json",
			body: cm("x", ""), wantCode: 405, wantReason: metav1.StatusReasonMethodNotAllowed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := nsSnapshot(t, c, ns)
			h := http.Header{"Accept": {"application/json"}}
			if tc.contentType != "" {
				h.Set("Content-Type", tc.contentType)
			}
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			resp := rawDo(t, c, true, tc.method, tc.path, h, body)
			if resp.Code != tc.wantCode {
				t.Errorf("code %d, want %d: %.300s", resp.Code, tc.wantCode, resp.Body)
			}
			st := resp.Status(t)
			if st.Status != metav1.StatusFailure || st.Reason != tc.wantReason || st.Code != int32(tc.wantCode) {
				t.Errorf("status %s reason %q code %d, want Failure %q %d (message %q)", st.Status, st.Reason, st.Code, tc.wantReason, tc.wantCode, st.Message)
			}
			if tc.wantCauses != nil {
				var got []string
				if st.Details != nil {
					for _, c := range st.Details.Causes {
						got = append(got, c.Field)
					}
				}
				if diff := cmp.Diff(tc.wantCauses, dedupe(got)); diff != "" {
					t.Errorf("cause fields (-want +got):\n%s\nmessage: %s", diff, st.Message)
				}
			}
			if diff := cmp.Diff(before, nsSnapshot(t, c, ns)); diff != "" {
				t.Errorf("etcd changed under the namespace (-before +after):\n%s", diff)
			}
		})
	}

	if keys := etcdKeys(t, c, "/registry/configmaps/nowhere/"); len(keys) > 0 {
		t.Errorf("a create in a missing namespace stored %v", keys)
	}

	// a YAML body is accepted
	yamlBody := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  k: v\n"
	resp := rawDo(t, c, true, http.MethodPost, cmPath, http.Header{"Content-Type": {"application/yaml"}, "Accept": {"application/json"}}, []byte(yamlBody))
	if resp.Code != http.StatusCreated {
		t.Fatalf("YAML create: code %d: %.300s", resp.Code, resp.Body)
	}
	got, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "from-yaml", metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v" {
		t.Errorf("configmap from YAML: %v %v", got, err)
	}
	// and YAML comes back when asked for
	resp = rawDo(t, c, true, http.MethodGet, cmPath+"/from-yaml", http.Header{"Accept": {"application/yaml"}}, nil)
	if resp.Code != 200 || !strings.HasPrefix(resp.ContentType, "application/yaml") || !strings.Contains(string(resp.Body), "name: from-yaml") {
		t.Errorf("GET as YAML: %d %s %.200s", resp.Code, resp.ContentType, resp.Body)
	}
	// an Accept the server cannot produce is a 406
	resp = rawDo(t, c, true, http.MethodGet, cmPath+"/from-yaml", http.Header{"Accept": {"text/csv"}}, nil)
	if resp.Code != http.StatusNotAcceptable {
		t.Errorf("Accept text/csv: code %d, want 406", resp.Code)
	}
}

func dedupe(ss []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sortStrings(out)
	return out
}
