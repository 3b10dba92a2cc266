// Package mutationdetector runs a package's tests with client-go's cache
// mutation detector on (KUBE_CACHE_MUTATION_DETECTOR): every informer
// keeps a deep copy of each object it caches and panics when the object
// changes. In `skiff server` the in-process informers of pods and nodes
// hold the API server's watch-cache objects themselves
// (internal/sharedinformers), so a controller or scheduler plugin that
// changed one would corrupt what the API server serves; the packages that
// run them check with this.
//
//	func TestMain(m *testing.M) { mutationdetector.Main(m) }
package mutationdetector

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"k8s.io/client-go/tools/cache"
)

// Env is client-go's switch, read once when the process starts.
const Env = "KUBE_CACHE_MUTATION_DETECTOR"

// Main runs m with the detector on. client-go reads the variable before
// any test code runs, so when it is not set the test binary runs itself
// again with it set and exits as that run did. Set it to false to run
// without the detector.
func Main(m *testing.M) {
	if _, set := os.LookupEnv(Env); set {
		os.Exit(m.Run())
	}
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), Env+"=true")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		os.Exit(0)
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		os.Exit(exit.ExitCode())
	default:
		fmt.Fprintf(os.Stderr, "mutationdetector: run the tests again with %s=true: %v\n", Env, err)
		os.Exit(1)
	}
}

// On says whether this process's informers check their objects.
func On() bool {
	return fmt.Sprintf("%T", cache.NewCacheMutationDetector("probe")) == "*cache.defaultCacheMutationDetector"
}

// Check fails t unless the detector is on (a package whose TestMain
// forgot Main).
func Check(t testing.TB) {
	t.Helper()
	if !On() {
		t.Fatalf("client-go's cache mutation detector is off: this package's TestMain must call mutationdetector.Main (or %s=true)", Env)
	}
}
