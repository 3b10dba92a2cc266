package prober

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	host, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	c := &corev1.Container{Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}
	exec := func(_ context.Context, cmd []string, _ time.Duration) ([]byte, int, error) {
		if cmd[0] == "true" {
			return nil, 0, nil
		}
		return []byte("nope\n"), 1, nil
	}
	for _, tc := range []struct {
		name  string
		probe corev1.ProbeHandler
		want  Result
		msg   string
	}{
		{"http ok by port name", corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}}, Success, ""},
		{"http 503", corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/bad", Port: intstr.FromInt32(int32(port))}}, Failure, "HTTP probe failed with statuscode: 503"},
		{"tcp ok", corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}, Success, ""},
		{"tcp refused", corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(closedPort))}}, Failure, ""},
		{"exec ok", corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, Success, ""},
		{"exec fails", corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}}, Failure, "nope\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := Run(context.Background(), &corev1.Probe{ProbeHandler: tc.probe}, Target{PodIP: host, Container: c, Exec: exec})
			if got != tc.want || (tc.msg != "" && msg != tc.msg) {
				t.Errorf("got %v %q, want %v %q", got, msg, tc.want, tc.msg)
			}
		})
	}
}

// TestRunGRPC probes a real gRPC health server: SERVING is Success, any
// other status and an unknown service are Failure with upstream's
// message, a port nobody listens on fails to connect.
func TestRunGRPC(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	port := int32(l.Addr().(*net.TCPAddr).Port)
	// A gRPC server without the health service.
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bare := grpc.NewServer()
	go func() { _ = bare.Serve(l2) }()
	defer bare.Stop()
	barePort := int32(l2.Addr().(*net.TCPAddr).Port)
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := int32(closed.Addr().(*net.TCPAddr).Port)
	closed.Close()
	svc := func(s string) *string { return &s }
	for _, tc := range []struct {
		name  string
		probe *corev1.GRPCAction
		want  Result
		msg   string
	}{
		{"serving", &corev1.GRPCAction{Port: port}, Success, ""},
		{"not serving", &corev1.GRPCAction{Port: port, Service: svc("down")}, Failure, `service unhealthy (responded with "NOT_SERVING")`},
		{"unknown service", &corev1.GRPCAction{Port: port, Service: svc("nope")}, Failure, "error: health rpc probe failed: rpc error: code = NotFound"},
		{"no health service", &corev1.GRPCAction{Port: barePort}, Failure, "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): unknown service grpc.health.v1.Health"},
		{"nothing listening", &corev1.GRPCAction{Port: closedPort}, Failure, fmt.Sprintf(`error: failed to connect service at "127.0.0.1:%d"`, closedPort)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: tc.probe}, TimeoutSeconds: 2}
			got, msg := Run(context.Background(), probe, Target{PodIP: "127.0.0.1", Container: &corev1.Container{}})
			if got != tc.want || !strings.Contains(msg, tc.msg) {
				t.Errorf("got %v %q, want %v containing %q", got, msg, tc.want, tc.msg)
			}
		})
	}
}
