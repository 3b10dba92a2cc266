package gcreal

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	criclient "k8s.io/cri-client/pkg"

	"github.com/skiff-sh/skiff/internal/agent/containerd"
	agentimages "github.com/skiff-sh/skiff/internal/agent/images"
	"github.com/skiff-sh/skiff/internal/agent/pause"
	containerdcmd "github.com/skiff-sh/skiff/internal/cli/containerd"
	"github.com/skiff-sh/skiff/internal/kubelet"
	"github.com/skiff-sh/skiff/internal/kubelet/eviction"
)

// TestMain lets this test binary stand in for skiff as containerd and its
// shim.
func TestMain(m *testing.M) {
	containerdcmd.RunAsChild()
	os.Exit(m.Run())
}

// imageFs reports the image filesystem 90 % used while both test images
// are present, 84 % once one is gone.
type imageFs struct{ present func() int }

func (f imageFs) Observe(context.Context) (eviction.Observations, error) {
	avail := int64(160)
	if f.present() == 2 {
		avail = 100
	}
	return eviction.Observations{
		eviction.SignalMemoryAvailable:  {Available: 1 << 32, Capacity: 1 << 33},
		eviction.SignalImageFsAvailable: {Available: avail, Capacity: 1000},
	}, nil
}

func (imageFs) PodStats(context.Context, bool) (map[types.UID]*eviction.PodStats, error) {
	return nil, nil
}

func (imageFs) LocalStorage(context.Context, *corev1.Pod) (*eviction.LocalUsage, error) {
	return nil, nil
}

// TestImageGCWithContainerd: over the high threshold, the kubelet removes
// unused images through CRI until it is under the low one, and never the
// pinned pause image.
func TestImageGCWithContainerd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runs containerd: needs root")
	}
	if _, err := os.Stat("/usr/sbin/runc"); err != nil {
		t.Skip("needs Debian's runc (scripts/setup.sh)")
	}
	dataDir, err := os.MkdirTemp("/tmp", "gcreal")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	imagesDir := filepath.Join(dataDir, "agent", "images")
	if err := os.MkdirAll(imagesDir, 0o700); err != nil {
		t.Fatal(err)
	}
	refs := []string{"example.com/gc/a:1", "example.com/gc/b:1"}
	for i, ref := range refs {
		var buf bytes.Buffer
		files := []agentimages.File{{Path: "/data", Mode: 0o644, Data: []byte(ref)}}
		if err := agentimages.Write(&buf, []string{ref}, files, agentimages.Config{Cmd: []string{"/data"}}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(imagesDir, string(rune('a'+i))+".tar"), buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cd := containerd.New(dataDir, containerd.Options{Binary: os.Getenv("SKIFF_BINARY")})
	cdDone := make(chan error, 1)
	go func() { cdDone <- cd.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-cdDone:
		case <-time.After(30 * time.Second):
			t.Error("containerd did not stop")
		}
	})
	select {
	case <-cd.Ready():
	case err := <-cdDone:
		t.Fatalf("containerd: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("containerd not ready after 60s")
	}
	rs, err := criclient.NewRemoteRuntimeService(ctx, cd.Endpoint(), 10*time.Second, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	is, err := criclient.NewRemoteImageService(ctx, cd.Endpoint(), 10*time.Second, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	present := func(ref string) bool {
		resp, err := is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false)
		return err == nil && resp.GetImage() != nil
	}
	for _, ref := range append(refs, pause.Ref) {
		if !present(ref) {
			t.Fatalf("%s not imported", ref)
		}
	}
	count := func() int {
		n := 0
		for _, ref := range refs {
			if present(ref) {
				n++
			}
		}
		return n
	}

	k := kubelet.New(fake.NewClientset(), rs, is, kubelet.Options{
		NodeName: "gc-node", RootDir: filepath.Join(dataDir, "kubelet"), PodLogsDir: filepath.Join(dataDir, "logs"),
		NodeIP: "192.0.2.20", Stats: imageFs{present: count},
		GC: kubelet.GCOptions{ImagePeriod: 50 * time.Millisecond, ContainerPeriod: 50 * time.Millisecond, ImageMinimumAge: time.Nanosecond},
	})
	kDone := make(chan error, 1)
	kctx, kcancel := context.WithCancel(ctx)
	go func() { kDone <- k.Start(kctx) }()
	defer func() { kcancel(); <-kDone }()

	deadline := time.Now().Add(30 * time.Second)
	for count() == 2 {
		if time.Now().After(deadline) {
			t.Fatal("no unused image was removed over the high threshold")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !present(pause.Ref) {
		t.Error("the pinned pause image was removed")
	}
	// One image frees what the low threshold asks (100 bytes here): the
	// round picks one victim, so the other stays.
	list := func() string {
		imgs, _ := is.ListImages(ctx, nil)
		var names []string
		for _, im := range imgs {
			names = append(names, im.RepoTags...)
		}
		return strings.Join(names, ",")
	}
	if n := count(); n != 1 {
		t.Errorf("%d test images left (%s), want 1: GC frees only down to the low threshold", n, list())
	}
}
