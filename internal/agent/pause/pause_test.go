package pause

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func writeBinary(t *testing.T) string {
	t.Helper()
	bin, err := Binary(runtime.GOARCH)
	if err != nil {
		t.Skipf("no built-in pause for %s: %v", runtime.GOARCH, err)
	}
	p := filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(p, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitExit waits for cmd with a deadline and returns its exit code.
func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("pause did not exit within 10s")
		return -1
	}
}

func TestPauseExitsZeroOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			p := writeBinary(t)
			cmd := exec.Command(p)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The signal is blocked from the first instructions on; one sent
			// before that would kill it (exit status -1), so wait until the
			// process shows the block mask.
			waitBlocked(t, cmd.Process.Pid)
			_ = cmd.Process.Signal(sig)
			if code := waitExit(t, cmd); code != 0 {
				t.Errorf("exit code after %v = %d, want 0", sig, code)
			}
		})
	}
}

// waitBlocked waits until pid sits in rt_sigtimedwait (x86-64 syscall 128),
// that is, past the point where it blocked its signals.
func waitBlocked(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/syscall")
		if err != nil {
			t.Skipf("cannot see the process's system call: %v", err)
		}
		if f := strings.Fields(string(b)); len(f) > 0 && f[0] == "128" {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("pause never waited for signals")
}

// TestPauseReapsOrphansAsPID1 runs pause as PID 1 of a new PID namespace,
// orphans a process into it, and sees pause reap it once it exits.
func TestPauseReapsOrphansAsPID1(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a new PID namespace")
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		t.Skip("needs nsenter (util-linux)")
	}
	p := writeBinary(t)
	cmd := exec.Command(p)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	waitBlocked(t, cmd.Process.Pid)
	pid := strconv.Itoa(cmd.Process.Pid)

	// sh starts a long sleep and exits at once: the sleep is orphaned into
	// the namespace, whose init is pause. The test, not a timer, ends the
	// orphan once it has been seen adopted, so a slow machine cannot make
	// the orphan finish before anyone looked. Its output goes to /dev/null:
	// an orphan holding the pipe would keep Run waiting until it exits.
	var out bytes.Buffer
	orphan := exec.Command(nsenter, "-t", pid, "-p", "--", "/bin/sh", "-c", "sleep 600 >/dev/null 2>&1 & exit 0")
	orphan.Stdout, orphan.Stderr = &out, &out
	if err := orphan.Run(); err != nil {
		t.Fatalf("nsenter: %v: %s", err, out.String())
	}
	children := "/proc/" + pid + "/task/" + pid + "/children"
	readKids := func() []string {
		b, err := os.ReadFile(children)
		if err != nil {
			t.Skipf("kernel without %s: %v", children, err)
		}
		return strings.Fields(string(b))
	}
	var kids []string
	deadline := time.Now().Add(30 * time.Second)
	for len(kids) == 0 && time.Now().Before(deadline) {
		kids = readKids()
		time.Sleep(10 * time.Millisecond)
	}
	if len(kids) == 0 {
		t.Fatal("the orphan was never adopted by pause")
	}
	for _, k := range kids {
		if n, err := strconv.Atoi(k); err == nil {
			_ = syscall.Kill(n, syscall.SIGKILL)
		}
	}
	// A killed child that is not reaped stays listed as a zombie.
	for time.Now().Before(deadline) {
		if len(readKids()) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pause still has children %q after they were killed: the orphan was not reaped", strings.Join(readKids(), " "))
}
