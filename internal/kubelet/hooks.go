package kubelet

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// runHook runs a postStart or preStop handler: exec in the container, an
// HTTP GET to the pod, or a sleep. timeout 0 means no limit but ctx.
func (k *Kubelet) runHook(ctx context.Context, pod *corev1.Pod, c *corev1.Container, containerID string, h *corev1.LifecycleHandler, podIPs []string, timeout time.Duration) (string, error) {
	switch {
	case h.Exec != nil:
		t := timeout
		if t <= 0 {
			t = 10 * time.Minute
		}
		stdout, stderr, err := k.runtime.ExecSync(ctx, containerID, h.Exec.Command, t)
		if err != nil {
			msg := fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q",
				h.Exec.Command, c.Name, pod.Namespace+"/"+pod.Name, err, string(stdout)+string(stderr))
			return msg, err
		}
		return "", nil
	case h.HTTPGet != nil:
		host := h.HTTPGet.Host
		if host == "" && len(podIPs) > 0 {
			host = podIPs[0]
		}
		port := 80
		if h.HTTPGet.Port.Type == intstr.Int {
			port = int(h.HTTPGet.Port.IntVal)
		} else {
			for _, p := range c.Ports {
				if p.Name == h.HTTPGet.Port.StrVal {
					port = int(p.ContainerPort)
				}
			}
		}
		scheme := strings.ToLower(string(h.HTTPGet.Scheme))
		if scheme == "" {
			scheme = "http"
		}
		path := h.HTTPGet.Path
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		url := scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)) + path
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err.Error(), err
		}
		for _, hd := range h.HTTPGet.HTTPHeaders {
			req.Header.Add(hd.Name, hd.Value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			msg := fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v", path, c.Name, pod.Namespace+"/"+pod.Name, err)
			return msg, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			err := fmt.Errorf("HTTP lifecycle hook returned %d", resp.StatusCode)
			return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v", path, c.Name, pod.Namespace+"/"+pod.Name, err), err
		}
		return "", nil
	case h.Sleep != nil:
		select {
		case <-ctx.Done():
		case <-k.clock.After(time.Duration(h.Sleep.Seconds) * time.Second):
		}
		return "", nil
	}
	return "", nil
}
