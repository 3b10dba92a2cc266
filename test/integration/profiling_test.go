package integration

import (
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// TestProfiling: the API server serves Go's profiles at /debug/pprof/, as
// kube-apiserver's --profiling, to cluster-admin and to nobody else; with
// profiling off the path is 404.
func TestProfiling(t *testing.T) {
	c := startRBAC(t)
	ctx := testCtx(t, 60*time.Second)
	admin := c.Clientset().CoreV1().RESTClient()
	heap, err := admin.Get().AbsPath("/debug/pprof/heap").Param("debug", "1").DoRaw(ctx)
	if err != nil {
		t.Fatalf("admin GET /debug/pprof/heap: %v", err)
	}
	if !strings.HasPrefix(string(heap), "heap profile:") {
		t.Errorf("heap profile starts %q, want the text heap profile", firstLine(heap))
	}
	index, err := admin.Get().AbsPath("/debug/pprof/").DoRaw(ctx)
	if err != nil || !strings.Contains(string(index), "goroutine") {
		t.Errorf("admin GET /debug/pprof/ = %q, %v; want the index", firstLine(index), err)
	}

	alice := impersonating(t, c, "alice", rest.ImpersonationConfig{})
	_, err = alice.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").DoRaw(ctx)
	if !apierrors.IsForbidden(err) {
		t.Errorf("alice GET /debug/pprof/heap: %v, want 403", err)
	}

	off := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) { cfg.DisableProfiling = true }})
	_, err = off.Clientset().CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").DoRaw(ctx)
	if !apierrors.IsNotFound(err) {
		t.Errorf("GET /debug/pprof/heap with profiling off: %v, want 404", err)
	}
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}
