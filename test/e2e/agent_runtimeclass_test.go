package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	criclient "k8s.io/cri-client/pkg"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/agent/containerd"
)

// TestAgentRuntimeClassCrun: with crun on PATH the server's agent offers a
// second OCI runtime, and the cluster a RuntimeClass `crun` for it; a pod
// with `runtimeClassName: crun` runs under crun (its container's state is
// in crun's state directory, and containerd ran it with BinaryName crun),
// while a pod without one stays on runc.
func TestAgentRuntimeClassCrun(t *testing.T) {
	c := cluster(t)
	found, skipped := containerd.DetectRuntimes()
	if len(found) == 0 || found[0].Name != "crun" {
		if err := skipped["crun"]; err != nil {
			t.Skipf("crun is not offered on this host: %v", err)
		}
		t.Skip("crun is not installed (scripts/setup.sh installs Debian's crun)")
	}
	crun := found[0].Path
	t.Parallel()
	ctx := context.Background()
	rc, err := c.client.NodeV1().RuntimeClasses().Get(ctx, "crun", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("RuntimeClass crun: %v", err)
	}
	if rc.Handler != "crun" {
		t.Errorf("RuntimeClass crun's handler = %q, want crun", rc.Handler)
	}

	// The node reports the runtime's handlers: the default ("") and both
	// runtimes by name.
	node, err := c.client.CoreV1().Nodes().Get(ctx, c.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	handlers := map[string]bool{}
	for _, h := range node.Status.RuntimeHandlers {
		handlers[h.Name] = true
	}
	if !handlers[""] || !handlers["runc"] || !handlers["crun"] {
		t.Errorf("node status.runtimeHandlers %+v, want \"\", runc and crun", node.Status.RuntimeHandlers)
	}

	ns := c.namespace(t, "agent-crun")
	onCrun := busyboxPod(ns, "on-crun", c.image, "sleep", "3600")
	onCrun.Spec.RuntimeClassName = ptr.To("crun")
	c.create(t, onCrun)
	c.create(t, busyboxPod(ns, "on-runc", c.image, "sleep", "3600"))
	pc := c.waitPod(t, ns, "on-crun", 60*time.Second, "Running and Ready", podRunningReady)
	pr := c.waitPod(t, ns, "on-runc", 60*time.Second, "Running and Ready", podRunningReady)

	rs, err := criclient.NewRemoteRuntimeService(ctx, "unix://"+filepath.Join(c.dataDir, "agent", "containerd", "containerd.sock"), 10*time.Second, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close(ctx)
	state := filepath.Join(c.dataDir, "agent", "containerd", "state")
	for _, tc := range []struct {
		pod           *corev1.Pod
		binary, other string // the runtime that ran it, the one that did not
	}{
		{pc, crun, "runc"},
		{pr, "/usr/sbin/runc", "crun"},
	} {
		id := strings.TrimPrefix(tc.pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
		runtimeDir := filepath.Base(tc.binary)
		// Each runtime keeps its containers' state under its own root
		// (the runtime's Root option): crun writes a "status" file, runc a
		// "state.json".
		stateFile := map[string]string{"crun": "status", "runc": "state.json"}[runtimeDir]
		if _, err := os.Stat(filepath.Join(state, runtimeDir, "k8s.io", id, stateFile)); err != nil {
			t.Errorf("pod %s: container %s has no %s state: %v", tc.pod.Name, id, runtimeDir, err)
		}
		if _, err := os.Stat(filepath.Join(state, tc.other, "k8s.io", id)); err == nil {
			t.Errorf("pod %s: container %s also has %s state", tc.pod.Name, id, tc.other)
		}
		// containerd's own account of the container: its runtime options.
		resp, err := rs.ContainerStatus(ctx, id, true)
		if err != nil {
			t.Fatal(err)
		}
		var info struct {
			RuntimeOptions struct {
				BinaryName string `json:"binary_name"`
			} `json:"runtimeOptions"`
		}
		if err := json.Unmarshal([]byte(resp.GetInfo()["info"]), &info); err != nil {
			t.Fatalf("container info: %v\n%s", err, resp.GetInfo()["info"])
		}
		if info.RuntimeOptions.BinaryName != tc.binary {
			t.Errorf("pod %s: containerd ran it with binary %q, want %q", tc.pod.Name, info.RuntimeOptions.BinaryName, tc.binary)
		}
	}
	// The sandbox of the crun pod carries the handler too.
	sbs, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(pc.UID)}})
	if err != nil || len(sbs) == 0 {
		t.Fatalf("sandboxes of on-crun: %v, %v", sbs, err)
	}
	if got := sbs[0].RuntimeHandler; got != "crun" {
		t.Errorf("on-crun's sandbox runtime handler = %q, want crun", got)
	}
}

// TestAgentRuntimeClassErrors: a RuntimeClass whose handler the runtime
// does not have, and a RuntimeClass deleted before the kubelet sees the
// pod, each leave the pod ContainerCreating with upstream's
// FailedCreatePodSandBox event.
func TestAgentRuntimeClassErrors(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ctx := context.Background()
	ns := c.namespace(t, "agent-rc-errors")
	for _, name := range []string{"skiff-e2e-nohandler", "skiff-e2e-gone"} {
		handler := "nosuch"
		if name == "skiff-e2e-gone" {
			handler = "runc"
		}
		if _, err := c.client.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: handler}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.client.NodeV1().RuntimeClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}

	noHandler := busyboxPod(ns, "no-handler", c.image, "sleep", "3600")
	noHandler.Spec.RuntimeClassName = ptr.To("skiff-e2e-nohandler")
	c.create(t, noHandler)

	// The pod is admitted while its RuntimeClass exists (admission refuses
	// a missing one), held back by a scheduling gate until the class is
	// gone, then let go to the node.
	gone := busyboxPod(ns, "class-gone", c.image, "sleep", "3600")
	gone.Spec.RuntimeClassName = ptr.To("skiff-e2e-gone")
	gone.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "skiff.test/hold"}}
	c.create(t, gone)
	if err := c.client.NodeV1().RuntimeClasses().Delete(ctx, "skiff-e2e-gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Let the kubelet's RuntimeClass informer see the deletion first.
	time.Sleep(2 * time.Second)
	p, err := c.client.CoreV1().Pods(ns).Get(ctx, "class-gone", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.SchedulingGates = nil
	if _, err := c.client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ pod, prefix, suffix string }{
		// containerd: `unable to get OCI runtime for sandbox "<id>": no runtime for "nosuch" is configured`
		{"no-handler", `Failed to create pod sandbox: rpc error: code = Unknown desc = unable to get OCI runtime for sandbox "`, `": no runtime for "nosuch" is configured`},
		{"class-gone", `Failed to create pod sandbox: runtimeclass.node.k8s.io "skiff-e2e-gone" not found`, ""},
	} {
		waitFor(t, 60*time.Second, tc.pod+"'s FailedCreatePodSandBox event", func() bool {
			evs, err := c.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + tc.pod})
			if err != nil {
				return false
			}
			for _, e := range evs.Items {
				if e.Reason == "FailedCreatePodSandBox" && e.Type == corev1.EventTypeWarning &&
					strings.HasPrefix(e.Message, tc.prefix) && strings.HasSuffix(e.Message, tc.suffix) {
					return true
				}
			}
			return false
		})
		p := c.waitPod(t, ns, tc.pod, 10*time.Second, "Pending, ContainerCreating", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodPending && waiting(p, "ContainerCreating")
		})
		if p.Status.PodIP != "" {
			t.Errorf("%s has pod IP %s without a sandbox", tc.pod, p.Status.PodIP)
		}
	}
}
