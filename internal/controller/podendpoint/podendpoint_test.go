package podendpoint

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestInclude(t *testing.T) {
	now := metav1.Now()
	pod := func(ip string, policy corev1.RestartPolicy, phase corev1.PodPhase, deleting bool) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: policy}, Status: corev1.PodStatus{PodIP: ip, Phase: phase}}
		if deleting {
			p.DeletionTimestamp = &now
		}
		return p
	}
	cases := []struct {
		name        string
		pod         *corev1.Pod
		terminating bool
		want        bool
	}{
		{"running", pod("10.42.0.2", corev1.RestartPolicyAlways, corev1.PodRunning, false), false, true},
		{"no address yet", pod("", corev1.RestartPolicyAlways, corev1.PodPending, false), false, false},
		{"terminating left out", pod("10.42.0.2", corev1.RestartPolicyAlways, corev1.PodRunning, true), false, false},
		{"terminating kept when asked", pod("10.42.0.2", corev1.RestartPolicyAlways, corev1.PodRunning, true), true, true},
		{"Never and failed", pod("10.42.0.2", corev1.RestartPolicyNever, corev1.PodFailed, false), false, false},
		{"OnFailure and failed restarts", pod("10.42.0.2", corev1.RestartPolicyOnFailure, corev1.PodFailed, false), false, true},
		{"OnFailure and succeeded", pod("10.42.0.2", corev1.RestartPolicyOnFailure, corev1.PodSucceeded, false), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Include(tc.pod, tc.terminating); got != tc.want {
				t.Errorf("Include = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFindPort(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{
		{Name: "http", ContainerPort: 8080},
		{Name: "dns", ContainerPort: 5353, Protocol: corev1.ProtocolUDP},
	}}}}}
	cases := []struct {
		name    string
		sp      corev1.ServicePort
		want    int32
		wantErr bool
	}{
		{"number", corev1.ServicePort{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9090)}, 9090, false},
		{"unset is the service port", corev1.ServicePort{Port: 80, Protocol: corev1.ProtocolTCP}, 80, false},
		{"name, TCP by default", corev1.ServicePort{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")}, 8080, false},
		{"name of another protocol", corev1.ServicePort{Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("dns")}, 0, true},
		{"name and protocol", corev1.ServicePort{Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")}, 5353, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FindPort(pod, &tc.sp)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("FindPort = %d, %v; want %d (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
