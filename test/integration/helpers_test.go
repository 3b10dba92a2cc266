// Package integration drives an in-process Skiff API server on a temporary
// embedded etcd with client-go, the way users and controllers do, and
// asserts what they would check: the objects returned, the status codes
// and reasons of errors, and the keys left in etcd.
package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// testCtx is a context that ends with the test or after d.
func testCtx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newNamespace creates a fresh namespace with its default ServiceAccount
// (as the serviceaccount controller would) and returns its name.
func newNamespace(t testing.TB, cs kubernetes.Interface) string {
	t.Helper()
	ctx := testCtx(t, 10*time.Second)
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "it-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	_, err = cs.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create default serviceaccount: %v", err)
	}
	return ns.Name
}

// etcdGet returns the raw value and mod revision of key; found is false
// when etcd has no such key.
func etcdGet(t testing.TB, c *cluster, key string) (value []byte, modRev int64, found bool) {
	t.Helper()
	resp, err := c.Etcd().Get(testCtx(t, 5*time.Second), key)
	if err != nil {
		t.Fatalf("etcd get %s: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, false
	}
	return resp.Kvs[0].Value, resp.Kvs[0].ModRevision, true
}

// etcdRevision is the store's current revision: it moves on every write.
func etcdRevision(t testing.TB, c *cluster) int64 {
	t.Helper()
	resp, err := c.Etcd().Get(testCtx(t, 5*time.Second), "/registry/", clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("etcd revision: %v", err)
	}
	return resp.Header.Revision
}

// etcdKeys lists the keys under prefix.
func etcdKeys(t testing.TB, c *cluster, prefix string) []string {
	t.Helper()
	resp, err := c.Etcd().Get(testCtx(t, 5*time.Second), prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatalf("etcd list %s: %v", prefix, err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys
}

// rawResponse is what a raw HTTP request got back.
type rawResponse struct {
	Code        int
	ContentType string
	Body        []byte
}

// Status decodes the body as a metav1.Status.
func (r rawResponse) Status(t testing.TB) metav1.Status {
	t.Helper()
	var s metav1.Status
	if err := json.Unmarshal(r.Body, &s); err != nil {
		t.Fatalf("response (%d, %s) is not a Status: %v: %.300s", r.Code, r.ContentType, err, r.Body)
	}
	if s.Kind != "Status" {
		t.Fatalf("response kind %q, want Status: %.300s", s.Kind, r.Body)
	}
	return s
}

// rawDo sends one request with the admin's credentials (authenticated
// true) or with none but the CA, and returns the response.
func rawDo(t testing.TB, c *cluster, authenticated bool, method, path string, header http.Header, body []byte) rawResponse {
	t.Helper()
	cfg := rest.CopyConfig(c.Config)
	if !authenticated {
		cfg = &rest.Config{Host: cfg.Host, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.TLSClientConfig.CAData}}
	}
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatalf("transport: %v", err)
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(testCtx(t, 20*time.Second), method, strings.TrimSuffix(cfg.Host, "/")+path, rd)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s %s: %v", method, path, err)
	}
	return rawResponse{Code: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: b}
}

// eventually polls cond every 100 ms until it holds or the deadline passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(d)
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %v (last error: %v)", what, d, lastErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func newPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "it"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
}

func newNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

func sortStrings(ss []string) { sort.Strings(ss) }

// nsSnapshot maps every etcd key of namespace ns (its objects and the
// namespace itself) to its mod revision: equal snapshots mean nothing in
// the namespace was written, whatever other tests do meanwhile.
func nsSnapshot(t testing.TB, c *cluster, ns string) map[string]int64 {
	t.Helper()
	resp, err := c.Etcd().Get(testCtx(t, 5*time.Second), "/registry/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatalf("etcd list: %v", err)
	}
	out := map[string]int64{}
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		if strings.Contains(k, "/"+ns+"/") || strings.HasSuffix(k, "/"+ns) {
			out[k] = kv.ModRevision
		}
	}
	return out
}
