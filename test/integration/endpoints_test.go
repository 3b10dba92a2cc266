package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
)

// testHealthVersionMetrics: health endpoints answer without credentials,
// the API does not; /version and /metrics carry upstream names.
func testHealthVersionMetrics(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 20*time.Second)
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "m"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}

	tests := []struct {
		path     string
		contains []string
	}{
		{"/healthz", []string{"ok"}},
		{"/livez", []string{"ok"}},
		{"/readyz", []string{"ok"}},
		{"/healthz?verbose", []string{"[+]ping ok", "[+]etcd ok", "healthz check passed"}},
		{"/livez?verbose", []string{"[+]ping ok", "[+]etcd ok", "livez check passed"}},
		{"/readyz?verbose", []string{"[+]ping ok", "[+]etcd ok", "[+]etcd-readiness ok", "[+]informer-sync ok", "readyz check passed"}},
		{"/readyz/etcd", []string{"ok"}},
		{"/livez/ping", []string{"ok"}},
	}
	for _, tc := range tests {
		t.Run("unauthenticated "+tc.path, func(t *testing.T) {
			resp := rawDo(t, c, false, http.MethodGet, tc.path, nil, nil)
			if resp.Code != http.StatusOK {
				t.Fatalf("code %d, want 200: %s", resp.Code, resp.Body)
			}
			for _, s := range tc.contains {
				if !strings.Contains(string(resp.Body), s) {
					t.Errorf("body lacks %q:\n%s", s, resp.Body)
				}
			}
		})
	}
	if resp := rawDo(t, c, false, http.MethodGet, "/readyz/nonexistent", nil, nil); resp.Code != http.StatusNotFound {
		t.Errorf("/readyz/nonexistent: code %d, want 404", resp.Code)
	}

	// the API itself needs credentials
	for _, p := range []string{"/api", "/api/v1/namespaces", "/apis", "/metrics"} {
		resp := rawDo(t, c, false, http.MethodGet, p, http.Header{"Accept": {"application/json"}}, nil)
		if resp.Code != http.StatusUnauthorized {
			t.Errorf("unauthenticated GET %s: code %d, want 401", p, resp.Code)
			continue
		}
		if st := resp.Status(t); st.Reason != metav1.StatusReasonUnauthorized {
			t.Errorf("unauthenticated GET %s: reason %q, want Unauthorized", p, st.Reason)
		}
	}

	// /version through client-go and raw
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	if v.Major != "1" || v.Minor != "37" || !strings.HasPrefix(v.GitVersion, "v1.37.") || v.Platform == "" || v.GoVersion == "" {
		t.Errorf("version = %+v, want major 1 minor 37 gitVersion v1.37.x, platform and go version", v)
	}
	resp := rawDo(t, c, false, http.MethodGet, "/version", nil, nil)
	var raw version.Info
	if resp.Code != 200 || json.Unmarshal(resp.Body, &raw) != nil || raw.GitVersion != v.GitVersion {
		t.Errorf("unauthenticated /version: %d %s", resp.Code, resp.Body)
	}

	// /metrics
	resp = rawDo(t, c, true, http.MethodGet, "/metrics", nil, nil)
	if resp.Code != 200 {
		t.Fatalf("/metrics code %d", resp.Code)
	}
	body := string(resp.Body)
	for _, m := range []string{
		"apiserver_request_total{",
		"apiserver_request_duration_seconds_bucket{",
		"apiserver_storage_objects{",
		"etcd_request_duration_seconds_bucket{",
		`resource="configmaps"`,
		`verb="POST"`,
	} {
		if !strings.Contains(body, m) {
			t.Errorf("/metrics lacks %q", m)
		}
	}
	if !strings.Contains(body, `apiserver_storage_objects{resource="configmaps"}`) {
		t.Errorf("/metrics has no apiserver_storage_objects for configmaps")
	}
}

// testTable: Accept as=Table returns upstream's columns.
func testTable(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 20*time.Second)
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("p"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, newService("s", corev1.ServiceTypeClusterIP, "", 0), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service: %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"a": "1", "b": "2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create configmap: %v", err)
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, newDeployment("d"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	node := ns + "-table"
	if _, err := cs.CoreV1().Nodes().Create(ctx, newNode(node), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node: %v", err)
	}
	tests := []struct {
		path    string
		columns []string
		rows    int
		first   []interface{} // leading cells of the first row, when checked
	}{
		{"/api/v1/namespaces/" + ns + "/pods", []string{"Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"}, 1,
			[]interface{}{"p", "0/1", "Pending", "0"}},
		{"/api/v1/namespaces/" + ns + "/pods/p", []string{"Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"}, 1, []interface{}{"p"}},
		{"/api/v1/namespaces/" + ns + "/services", []string{"Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector"}, 1,
			[]interface{}{"s", "ClusterIP"}},
		{"/api/v1/namespaces/" + ns + "/configmaps", []string{"Name", "Data", "Age"}, 1, []interface{}{"cm", float64(2)}},
		{"/apis/apps/v1/namespaces/" + ns + "/deployments", []string{"Name", "Ready", "Up-to-date", "Available", "Age", "Containers", "Images", "Selector"}, 1,
			[]interface{}{"d", "0/1"}},
		{"/api/v1/nodes?fieldSelector=metadata.name%3D" + node, []string{"Name", "Status", "Roles", "Age", "Version", "Internal-IP", "External-IP", "OS-Image", "Kernel-Version", "Container-Runtime"}, 1, []interface{}{node}},
		{"/api/v1/namespaces/" + ns, []string{"Name", "Status", "Age"}, 1, []interface{}{ns, "Active"}},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			resp := rawDo(t, c, true, http.MethodGet, tc.path, http.Header{"Accept": {"application/json;as=Table;v=v1;g=meta.k8s.io"}}, nil)
			if resp.Code != 200 {
				t.Fatalf("code %d: %s", resp.Code, resp.Body)
			}
			var tbl metav1.Table
			if err := json.Unmarshal(resp.Body, &tbl); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if tbl.Kind != "Table" || tbl.APIVersion != "meta.k8s.io/v1" {
				t.Errorf("kind %q apiVersion %q, want Table meta.k8s.io/v1", tbl.Kind, tbl.APIVersion)
			}
			var cols []string
			for _, c := range tbl.ColumnDefinitions {
				cols = append(cols, c.Name)
			}
			if diff := cmp.Diff(tc.columns, cols); diff != "" {
				t.Errorf("columns (-want +got):\n%s", diff)
			}
			if len(tbl.Rows) != tc.rows {
				t.Fatalf("%d rows, want %d", len(tbl.Rows), tc.rows)
			}
			row := tbl.Rows[0]
			if len(row.Cells) != len(tbl.ColumnDefinitions) {
				t.Errorf("row has %d cells for %d columns", len(row.Cells), len(tbl.ColumnDefinitions))
			}
			if len(row.Cells) >= len(tc.first) {
				if diff := cmp.Diff(tc.first, row.Cells[:len(tc.first)]); diff != "" {
					t.Errorf("first cells (-want +got):\n%s", diff)
				}
			}
			// the default includeObject=Metadata carries a PartialObjectMetadata
			var pom metav1.PartialObjectMetadata
			if err := json.Unmarshal(row.Object.Raw, &pom); err != nil || pom.Kind != "PartialObjectMetadata" || pom.Name == "" {
				t.Errorf("row object = %.200s, want PartialObjectMetadata with a name", row.Object.Raw)
			}
		})
	}
	// as=Table on a list keeps the list's resourceVersion
	resp := rawDo(t, c, true, http.MethodGet, "/api/v1/namespaces/"+ns+"/configmaps", http.Header{"Accept": {"application/json;as=Table;v=v1;g=meta.k8s.io, application/json"}}, nil)
	var tbl metav1.Table
	if err := json.Unmarshal(resp.Body, &tbl); err != nil || tbl.ResourceVersion == "" {
		t.Errorf("table list resourceVersion %q (%v)", tbl.ResourceVersion, err)
	}
	// A resource that cannot be listed has no Table form (upstream's
	// "should return a 406 for a backend which does not implement
	// metadata" conformance test): as=Table alone is 406, and a fallback in
	// Accept is used instead.
	sar := []byte(`{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"nonResourceAttributes":{"path":"/","verb":"get"}}}`)
	const ssar = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
	resp = rawDo(t, c, true, http.MethodPost, ssar, http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json;as=Table;v=v1;g=meta.k8s.io"}}, sar)
	if resp.Code != http.StatusNotAcceptable {
		t.Errorf("SelfSubjectAccessReview as=Table: code %d, want 406: %.300s", resp.Code, resp.Body)
	}
	resp = rawDo(t, c, true, http.MethodPost, ssar, http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json;as=Table;v=v1;g=meta.k8s.io, application/json"}}, sar)
	if resp.Code != http.StatusCreated || !strings.Contains(string(resp.Body), `"kind":"SelfSubjectAccessReview"`) {
		t.Errorf("SelfSubjectAccessReview as=Table with a JSON fallback: code %d: %.300s, want 201 and the review", resp.Code, resp.Body)
	}
}
