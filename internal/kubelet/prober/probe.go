package prober

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ExecFunc runs a command in the container and returns its combined output
// and exit code.
type ExecFunc func(ctx context.Context, cmd []string, timeout time.Duration) (output []byte, exitCode int, err error)

// Target is where a probe goes: the pod's IP (the host's for host-network
// pods), the container for named ports, and a way to exec in it.
type Target struct {
	PodIP     string
	Container *corev1.Container
	Exec      ExecFunc
}

// userAgent is what upstream's kubelet sends on HTTP probes.
const userAgent = "kube-probe/1.37"

// Run performs one probe and returns its raw outcome and, on failure, a
// message for the event (upstream's wording where it has one).
func Run(ctx context.Context, p *corev1.Probe, t Target) (Result, string) {
	timeout := Timeout(p)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case p.Exec != nil:
		if t.Exec == nil {
			return Failure, "exec probes are not supported"
		}
		out, code, err := t.Exec(ctx, p.Exec.Command, timeout)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return Failure, fmt.Sprintf("command timed out: %q timed out after %s", strings.Join(p.Exec.Command, " "), timeout)
			}
			return Failure, err.Error()
		}
		if code != 0 {
			return Failure, string(out)
		}
		return Success, ""
	case p.HTTPGet != nil:
		return runHTTP(ctx, p.HTTPGet, t)
	case p.TCPSocket != nil:
		port, err := resolvePort(p.TCPSocket.Port, t.Container)
		if err != nil {
			return Failure, err.Error()
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = t.PodIP
		}
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return Failure, fmt.Sprintf("dial tcp %s: %v", addr, rootCause(err))
		}
		_ = c.Close()
		return Success, ""
	case p.GRPC != nil:
		addr := net.JoinHostPort(t.PodIP, strconv.Itoa(int(p.GRPC.Port)))
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUserAgent(userAgent))
		if err != nil {
			return Failure, err.Error()
		}
		defer conn.Close()
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			// Upstream's messages. Its dial blocks until connected, so a
			// connection failure is reported as such; here the connection
			// is made by the call and shows as Unavailable.
			switch status.Code(err) {
			case codes.Unimplemented:
				return Failure, fmt.Sprintf("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", status.Convert(err).Message())
			case codes.DeadlineExceeded:
				return Failure, fmt.Sprintf("timeout: health rpc did not complete within %s", timeout)
			case codes.Unavailable:
				return Failure, fmt.Sprintf("error: failed to connect service at %q: %v", addr, err)
			}
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return Failure, fmt.Sprintf("timeout: health rpc did not complete within %s", timeout)
			}
			return Failure, fmt.Sprintf("error: health rpc probe failed: %v", err)
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return Failure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String())
		}
		return Success, ""
	}
	return Failure, "missing probe handler"
}

func runHTTP(ctx context.Context, h *corev1.HTTPGetAction, t Target) (Result, string) {
	port, err := resolvePort(h.Port, t.Container)
	if err != nil {
		return Failure, err.Error()
	}
	host := h.Host
	if host == "" {
		host = t.PodIP
	}
	scheme := strings.ToLower(string(h.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := h.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port))}
	if parsed, err := url.Parse(path); err == nil {
		u.Path, u.RawQuery = parsed.Path, parsed.RawQuery
	} else {
		u.Path = path
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Failure, err.Error()
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept", "*/*")
	for _, hd := range h.HTTPHeaders {
		if strings.EqualFold(hd.Name, "host") {
			req.Host = hd.Value
			continue
		}
		req.Header.Add(hd.Name, hd.Value)
	}
	client := &http.Client{
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as upstream: probes do not verify
			DisableKeepAlives: true,
			Proxy:             nil,
		},
		CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if len(via) >= 10 || r.URL.Hostname() != u.Hostname() {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		return Failure, fmt.Sprintf("Get %q: %v", u.String(), rootCause(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10*1024))
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return Success, ""
	}
	return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)
}

func rootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

// resolvePort turns a probe's port (a number or a container port's name)
// into a number.
func resolvePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		if p.IntVal <= 0 || p.IntVal > 65535 {
			return 0, fmt.Errorf("invalid port number: %d", p.IntVal)
		}
		return int(p.IntVal), nil
	}
	if c != nil {
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				return int(cp.ContainerPort), nil
			}
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("couldn't find port: %s in %v", p.StrVal, c)
}
