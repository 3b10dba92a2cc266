package image

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	agentcontainerd "github.com/skiff-sh/skiff/internal/agent/containerd"
	containerdcmd "github.com/skiff-sh/skiff/internal/cli/containerd"
	testimages "github.com/skiff-sh/skiff/internal/testing/images"
)

// TestMain lets this test binary stand in for skiff as containerd.
func TestMain(m *testing.M) {
	containerdcmd.RunAsChild()
	os.Exit(m.Run())
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestNoAgent(t *testing.T) {
	out, err := run(t, "ls", "--data-dir", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "no containerd at") {
		t.Fatalf("ls without an agent = %q, %v; want a 'no containerd at' error", out, err)
	}
}

// TestImportListRemove drives `skiff image` against a running agent
// containerd.
func TestImportListRemove(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runs containerd: needs root")
	}
	if _, err := os.Stat("/usr/sbin/runc"); err != nil {
		t.Skip("needs Debian's runc (scripts/setup.sh)")
	}
	dataDir := t.TempDir()
	c := agentcontainerd.New(dataDir, agentcontainerd.Options{Binary: os.Getenv("SKIFF_BINARY")})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-c.Ready():
	case err := <-done:
		t.Fatalf("containerd: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("containerd not ready after 60s")
	}
	tarPath, ref := testimages.Busybox(t)

	out, err := run(t, "import", "--data-dir", dataDir, tarPath)
	if err != nil || !strings.Contains(out, "imported "+ref+"\n") {
		t.Fatalf("import = %q, %v; want %q imported", out, err, ref)
	}
	out, err = run(t, "ls", "--data-dir", dataDir)
	if err != nil || !strings.Contains(out, ref) || !strings.Contains(out, "registry.k8s.io/pause:3.10.2") {
		t.Fatalf("ls = %q, %v; want busybox and pause listed", out, err)
	}
	out, err = run(t, "rm", "--data-dir", dataDir, ref)
	if err != nil || out != "removed "+ref+"\n" {
		t.Fatalf("rm = %q, %v", out, err)
	}
	out, err = run(t, "ls", "--address", agentcontainerd.SocketPath(dataDir))
	if err != nil || strings.Contains(out, ref) {
		t.Fatalf("ls after rm = %q, %v; want %s gone", out, err, ref)
	}
	if _, err := run(t, "rm", "--data-dir", dataDir, ref); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("rm of a missing image = %v, want not found", err)
	}
}
