package e2e

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

func portOf(l net.Listener) int { return l.Addr().(*net.TCPAddr).Port }

// killUnder kills the processes whose command line mentions dir: the test
// cluster's containerd and shims, never anything else.
func killUnder(dir string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(dir)) {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

type intstrIntOrString = intstr.IntOrString

func intstrFromInt(p int) intstr.IntOrString { return intstr.FromInt32(int32(p)) }

// httpGet returns the body of a GET with a short timeout.
func httpGet(url string) (string, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
