package pod

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestUpdateEphemeralContainers(t *testing.T) {
	debugger := func(name, target string) corev1.EphemeralContainer {
		return corev1.EphemeralContainer{TargetContainerName: target, EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: name, Image: "busybox", Stdin: true, TTY: true}}
	}
	cur := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}
	withOne := cur.DeepCopy()
	withOne.Spec.EphemeralContainers = []corev1.EphemeralContainer{debugger("debug-1", "app")}
	withOne, errs := UpdateEphemeralContainers(withOne, cur)
	if len(errs) > 0 {
		t.Fatalf("adding one: %v", errs)
	}
	ec := withOne.Spec.EphemeralContainers[0]
	if ec.ImagePullPolicy != corev1.PullAlways || ec.TerminationMessagePolicy != corev1.TerminationMessageReadFile || ec.TargetContainerName != "app" {
		t.Errorf("defaults not applied: %+v", ec)
	}
	for _, tc := range []struct {
		name string
		from *corev1.Pod
		want func(p *corev1.Pod)
		errs []string
	}{
		{name: "add a second", from: withOne, want: func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, debugger("debug-2", ""))
		}},
		{name: "remove", from: withOne, want: func(p *corev1.Pod) { p.Spec.EphemeralContainers = nil },
			errs: []string{"spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debug-1\" may not be removed\n"}},
		{name: "name taken by a container", from: cur, want: func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{debugger("app", "")}
		}, errs: []string{`spec.ephemeralContainers[0].name: Duplicate value: "app"`}},
		{name: "unknown target", from: cur, want: func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{debugger("d", "nope")}
		}, errs: []string{`spec.ephemeralContainers[0].targetContainerName: Not found: "nope"`}},
		{name: "ports and probes are not for ephemeral containers", from: cur, want: func(p *corev1.Pod) {
			d := debugger("d", "")
			d.Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}}
			d.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{d}
		}, errs: []string{
			"spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container",
			"spec.ephemeralContainers[0].lifecycle: Forbidden: cannot be set for an Ephemeral Container",
		}},
		{name: "no image", from: cur, want: func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "d"}}}
		}, errs: []string{"spec.ephemeralContainers[0].image: Required value"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.from.DeepCopy()
			want.Spec.Containers[0].Image = "changed" // only ephemeral containers are taken
			tc.want(want)
			got, errs := UpdateEphemeralContainers(want, tc.from)
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			if diff := cmp.Diff(tc.errs, msgs); diff != "" {
				t.Fatalf("errors (-want +got):\n%s", diff)
			}
			if len(errs) == 0 && got.Spec.Containers[0].Image != "nginx" {
				t.Errorf("a change outside ephemeralContainers was taken: %q", got.Spec.Containers[0].Image)
			}
		})
	}
}
