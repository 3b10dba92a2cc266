package prober

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

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
