package containerd

import (
	"archive/tar"
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	containerdclient "github.com/containerd/containerd/v2/client"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	criclient "k8s.io/cri-client/pkg"

	"github.com/skiff-sh/skiff/internal/agent/images"
	"github.com/skiff-sh/skiff/internal/agent/pause"
	containerdcmd "github.com/skiff-sh/skiff/internal/cli/containerd"
	testimages "github.com/skiff-sh/skiff/internal/testing/images"
)

// TestMain lets this test binary stand in for skiff as the agent's
// containerd and runc shim.
func TestMain(m *testing.M) {
	containerdcmd.RunAsChild()
	os.Exit(m.Run())
}

// started is a running supervisor.
type started struct {
	c        *Containerd
	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once
}

func startContainerd(t *testing.T, dataDir string) *started {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	// SKIFF_BINARY (set by make test) runs the real binary as containerd
	// and shim; without it this test binary stands in (TestMain).
	c := New(dataDir, Options{MinBackoff: 100 * time.Millisecond, Binary: os.Getenv("SKIFF_BINARY")})
	s := &started{c: c, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- c.Start(ctx) }()
	select {
	case <-c.Ready():
	case err := <-s.done:
		t.Fatalf("Start returned before Ready: %v\n%s", err, tail(c.log))
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatalf("containerd not ready after 60s\n%s", tail(c.log))
	}
	return s
}

func (s *started) stop(t *testing.T) {
	t.Helper()
	s.stopOnce.Do(func() { s.stopNow(t) })
}

func (s *started) stopNow(t *testing.T) {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("Start: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("Start did not return 30s after cancel")
	}
}

func tail(file string) string {
	b, _ := os.ReadFile(file)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("runs containerd and runc: needs root")
	}
	if _, err := os.Stat("/usr/sbin/runc"); err != nil {
		t.Skip("needs Debian's runc (scripts/setup.sh)")
	}
}

// unmountUnder detaches whatever is still mounted below dir, so the
// temporary directory can be removed.
func unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			mounts = append(mounts, fields[4])
		}
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		_ = syscall.Unmount(mounts[i], syscall.MNT_DETACH)
	}
}

func criClients(t *testing.T, endpoint string) (criapi.RuntimeService, criapi.ImageManagerService) {
	t.Helper()
	ctx := context.Background()
	rs, err := criclient.NewRemoteRuntimeService(ctx, endpoint, 10*time.Second, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	is, err := criclient.NewRemoteImageService(ctx, endpoint, 10*time.Second, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rs.Close(ctx); _ = is.Close(ctx) })
	return rs, is
}

// eventually polls f every 50ms until it returns nil or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %v: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestContainerRunsAndSurvivesRestarts starts the agent's containerd,
// imports the busybox image, runs a pod and a container through CRI, reads
// its log, then kills containerd (the supervisor restarts it) and restarts
// the whole supervisor (an agent restart): the container keeps running
// throughout, and exec reaches it.
func TestContainerRunsAndSurvivesRestarts(t *testing.T) {
	needRoot(t)
	dataDir := t.TempDir()
	tarPath, ref := testimages.Busybox(t)
	ctx := context.Background()
	// A tarball in <data-dir>/agent/images is imported at start.
	if got := testimages.Preload(t, dataDir); got != ref {
		t.Fatalf("Preload = %s, want %s", got, ref)
	}

	s := startContainerd(t, dataDir)
	var podID string
	t.Cleanup(func() {
		// On failure, too: remove the pod (its shim and mounts), stop
		// containerd, unmount what is left.
		if podID != "" {
			rs, err := criclient.NewRemoteRuntimeService(ctx, s.c.Endpoint(), 10*time.Second, nil, false)
			if err == nil {
				_ = rs.StopPodSandbox(ctx, podID)
				_ = rs.RemovePodSandbox(ctx, podID)
				_ = rs.Close(ctx)
			}
		}
		s.stop(t)
		unmountUnder(dataDir)
	})

	// Ready means the preloaded tarball is imported: CRI already has it.
	_, startIS := criClients(t, s.c.Endpoint())
	if st, err := startIS.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false); err != nil || st.Image == nil {
		t.Fatalf("at Ready, CRI ImageStatus(%s) = %v, %v; want the preloaded image", ref, st, err)
	}

	client, err := containerdclient.New(s.c.Address())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	names, err := images.ImportFile(ctx, client, tarPath, images.ImportOptions{Snapshotter: ConfiguredSnapshotter(dataDir)})
	if err != nil {
		t.Fatalf("import busybox: %v", err)
	}
	if !contains(names, ref) {
		t.Fatalf("imported %v, want %s among them", names, ref)
	}
	// An OCI archive (what `docker save` of Docker 25+ and most tools write)
	// imports too, under its io.containerd.image.name annotation.
	ociNames, err := images.ImportFile(ctx, client, ociArchive(t, "example.com/oci/busybox:1"), images.ImportOptions{Snapshotter: ConfiguredSnapshotter(dataDir)})
	if err != nil || !contains(ociNames, "example.com/oci/busybox:1") {
		t.Fatalf("import OCI archive = %v, %v; want example.com/oci/busybox:1", ociNames, err)
	}
	if err := images.Remove(ctx, client, "example.com/oci/busybox:1"); err != nil {
		t.Fatal(err)
	}
	// `skiff image rm` and `ls`: one alias removed, the rest listed.
	if err := images.Remove(ctx, client, "busybox:latest"); err != nil {
		t.Fatalf("remove busybox:latest: %v", err)
	}
	if err := images.Remove(ctx, client, "busybox:latest"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("removing it again: %v, want not found", err)
	}
	listed, err := images.List(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, img := range listed {
		if !strings.HasPrefix(img.Name, "sha256:") {
			got = append(got, fmt.Sprintf("%s pinned=%v", img.Name, img.Pinned))
		}
	}
	want := []string{
		"docker.io/library/busybox:1.36 pinned=false",
		ref + " pinned=false",
		pause.Ref + " pinned=true",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("images (-want +got):\n%s", diff)
	}

	rs, is := criClients(t, s.c.Endpoint())
	for _, want := range []struct {
		ref    string
		pinned bool
	}{{pause.Ref, true}, {ref, false}} {
		st, err := is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: want.ref}, false)
		if err != nil || st.Image == nil {
			t.Fatalf("CRI ImageStatus(%s) = %v, %v; want the image", want.ref, st, err)
		}
		if st.Image.Pinned != want.pinned {
			t.Errorf("image %s pinned = %v, want %v", want.ref, st.Image.Pinned, want.pinned)
		}
	}

	logDir := filepath.Join(dataDir, "pods", "default_echo_uid1")
	sandboxCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "echo", Namespace: "default", Uid: "uid1"},
		LogDirectory: logDir,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
			},
		},
	}
	podID, err = rs.RunPodSandbox(ctx, sandboxCfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v\n%s", err, tail(s.c.log))
	}
	ctrID, err := rs.CreateContainer(ctx, podID, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "echo"},
		Image:    &runtimeapi.ImageSpec{Image: ref},
		Command:  []string{"sh", "-c", "echo hello from skiff; exec sleep 3600"},
		LogPath:  "echo/0.log",
	}, sandboxCfg)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if err := rs.StartContainer(ctx, ctrID); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	logFile := filepath.Join(logDir, "echo", "0.log")
	eventually(t, 20*time.Second, "container log", func() error {
		b, err := os.ReadFile(logFile)
		if err != nil {
			return err
		}
		// CRI log format: <time> <stream> <F|P> <line>
		if !strings.Contains(string(b), " stdout F hello from skiff\n") {
			return errorf("log is %q", b)
		}
		return nil
	})
	first, err := rs.ContainerStatus(ctx, ctrID, false)
	if err != nil {
		t.Fatal(err)
	}

	stillRunning := func(when string) {
		t.Helper()
		var st *runtimeapi.ContainerStatusResponse
		eventually(t, 30*time.Second, "container status "+when, func() error {
			st, err = rs.ContainerStatus(ctx, ctrID, false)
			return err
		})
		if got := st.Status.State; got != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Fatalf("%s: container state %v, want RUNNING", when, got)
		}
		if st.Status.StartedAt != first.Status.StartedAt {
			t.Fatalf("%s: container restarted (started at %d, was %d)", when, st.Status.StartedAt, first.Status.StartedAt)
		}
		stdout, stderr, err := rs.ExecSync(ctx, ctrID, []string{"echo", "still here"}, 10*time.Second)
		if err != nil || strings.TrimSpace(string(stdout)) != "still here" {
			t.Fatalf("%s: exec = %q, %q, %v; want stdout \"still here\"", when, stdout, stderr, err)
		}
	}

	// containerd dies: the supervisor starts a new one.
	oldPid, err := s.c.Kill()
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "containerd restarted", func() error {
		if p := s.c.Pid(); p == oldPid || p == 0 {
			return errorf("still pid %d", p)
		}
		return s.c.criVersion(ctx)
	})
	stillRunning("after containerd was killed")

	// The agent stops and starts again.
	s.stop(t)
	s = startContainerd(t, dataDir)
	rs, _ = criClients(t, s.c.Endpoint())
	stillRunning("after the agent restarted")

	// The agent is killed: its containerd lives on, unsupervised (here: one
	// started the way the supervisor starts it, with nobody watching). The
	// next agent stops it by its pid file and runs its own.
	s.stop(t)
	orphan := New(dataDir, Options{Binary: os.Getenv("SKIFF_BINARY")})
	if _, err := orphan.prepare(ctx); err != nil {
		t.Fatal(err)
	}
	orphanExited, err := orphan.run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "left-over containerd answers", func() error { return orphan.criVersion(ctx) })
	s = startContainerd(t, dataDir)
	select {
	case <-orphanExited:
	case <-time.After(30 * time.Second):
		t.Fatal("the new agent did not stop the containerd the killed agent left behind")
	}
	if s.c.Pid() == orphan.Pid() {
		t.Fatal("the new agent adopted the left-over containerd instead of starting its own")
	}
	rs, _ = criClients(t, s.c.Endpoint())
	stillRunning("after a killed agent's containerd was replaced")

	if err := rs.StopPodSandbox(ctx, podID); err != nil {
		t.Errorf("StopPodSandbox: %v", err)
	}
	if err := rs.RemovePodSandbox(ctx, podID); err != nil {
		t.Errorf("RemovePodSandbox: %v", err)
	}
	podID = ""
}

type stringError string

func (e stringError) Error() string { return string(e) }

func errorf(format string, args ...any) error {
	return stringError(strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ociArchive writes the busybox image as an OCI image-layout tarball named
// ref.
func ociArchive(t *testing.T, ref string) string {
	t.Helper()
	img, err := images.Build(testimages.BusyboxFiles(t), images.Config{Cmd: []string{"sh"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lp, err := layout.Write(filepath.Join(dir, "layout"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          ref,
		"org.opencontainers.image.ref.name": "1",
	})); err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(dir, "oci.tar")
	f, err := os.Create(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	if err := tw.AddFS(os.DirFS(filepath.Join(dir, "layout"))); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return tarPath
}
