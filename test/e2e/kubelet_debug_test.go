package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestKubeletDebugEphemeralContainer: `kubectl debug -it POD
// --image=busybox --target=main` adds an ephemeral container through
// pods/ephemeralcontainers; the kubelet starts it in the pod's sandbox in
// the target's process namespace (its shell sees the target's process);
// kubectl attaches to it; the pod's status lists it.
func TestKubeletDebugEphemeralContainer(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "kubelet-debug")
	c.create(t, busyboxPod(ns, "target", c.image, "sh", "-c", "exec sleep 3601"))
	c.waitPod(t, ns, "target", 60*time.Second, "Running and Ready", podRunningReady)

	master, slave, err := openPTY()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer master.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(), "kubectl", "--kubeconfig", c.kubeconfig, "-n", ns,
		"debug", "-it", "target", "--image="+c.image, "--target=main", "-c", "debugger", "--", "sh")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	out := make(chan string, 1)
	go func() {
		var all []byte
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			all = append(all, buf[:n]...)
			if err != nil || strings.Contains(string(all), "found=sleep 3601") {
				out <- string(all)
				return
			}
		}
	}()
	// Keep asking until the shell is attached and answers: the target's
	// process is visible from the debugger (same PID namespace).
	ask := time.NewTicker(time.Second)
	defer ask.Stop()
	var got string
wait:
	for {
		select {
		case got = <-out:
			break wait
		case <-ask.C:
			fmt.Fprint(master, "echo found=$(ps -o args | grep -o 'sleep 360[1]')\r")
		case <-ctx.Done():
			t.Fatalf("kubectl debug: no answer on the terminal")
		}
	}
	if !strings.Contains(got, "found=sleep 3601") {
		t.Fatalf("terminal output %q", tail(got, 2000))
	}
	fmt.Fprint(master, "exit\r")
	if err := cmd.Wait(); err != nil {
		t.Errorf("kubectl debug -it: %v", err)
	}

	p := c.waitPod(t, ns, "target", 30*time.Second, "reporting the debugger terminated", func(p *corev1.Pod) bool {
		return len(p.Status.EphemeralContainerStatuses) == 1 && p.Status.EphemeralContainerStatuses[0].State.Terminated != nil
	})
	if len(p.Spec.EphemeralContainers) != 1 || p.Spec.EphemeralContainers[0].TargetContainerName != "main" {
		t.Errorf("ephemeral containers %+v", p.Spec.EphemeralContainers)
	}
	if !podRunningReady(p) {
		t.Errorf("the pod's own container was disturbed: %+v", p.Status.ContainerStatuses)
	}
}
