package pod

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func resources(req, lim map[corev1.ResourceName]string) corev1.ResourceRequirements {
	var r corev1.ResourceRequirements
	for n, q := range req {
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		r.Requests[n] = resource.MustParse(q)
	}
	for n, q := range lim {
		if r.Limits == nil {
			r.Limits = corev1.ResourceList{}
		}
		r.Limits[n] = resource.MustParse(q)
	}
	return r
}

type rl = map[corev1.ResourceName]string

// TestResizeUpdate runs pods/resize through the pod strategy as the API
// server does (PrepareForUpdate then ValidateUpdate under
// WithResizeUpdate) and checks upstream's errors and field paths.
func TestResizeUpdate(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	base := func() *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Generation: 1, Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{
					{Name: "init", Image: "busybox", Resources: resources(rl{"cpu": "10m"}, nil)},
					{Name: "sidecar", Image: "busybox", RestartPolicy: &always, Resources: resources(rl{"cpu": "10m"}, nil)},
				},
				Containers: []corev1.Container{{Name: "app", Image: "busybox",
					Resources:    resources(rl{"cpu": "100m", "memory": "64Mi"}, rl{"cpu": "200m", "memory": "128Mi"}),
					ResizePolicy: []corev1.ContainerResizePolicy{{ResourceName: "memory", RestartPolicy: corev1.RestartContainer}}}},
				RestartPolicy: corev1.RestartPolicyAlways,
			},
		}
		DefaultPod(p)
		applyAdmissionDefaults(p)
		p.Status.QOSClass = corev1.PodQOSBurstable
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			Resources: p.Spec.Containers[0].Resources.DeepCopy()}}
		return p
	}
	for _, tc := range []struct {
		name   string
		change func(p *corev1.Pod)
		old    func(p *corev1.Pod)
		errs   []string
		check  func(t *testing.T, got *corev1.Pod)
	}{
		{name: "cpu and memory of a container", change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = resources(rl{"cpu": "150m", "memory": "32Mi"}, rl{"cpu": "300m", "memory": "100Mi"})
		}, check: func(t *testing.T, got *corev1.Pod) {
			if q := got.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]; q.String() != "300m" {
				t.Errorf("cpu limit %s, want 300m", q.String())
			}
			if got.Generation != 2 {
				t.Errorf("generation %d, want 2", got.Generation)
			}
		}},
		{name: "a sidecar's limit added", change: func(p *corev1.Pod) {
			p.Spec.InitContainers[1].Resources = resources(rl{"cpu": "20m"}, rl{"cpu": "40m"})
		}},
		{name: "an init container resized", change: func(p *corev1.Pod) {
			p.Spec.InitContainers[0].Resources = resources(rl{"cpu": "20m"}, rl{"cpu": "40m"})
		}},
		{name: "the resize policy changed", change: func(p *corev1.Pod) {
			p.Spec.Containers[0].ResizePolicy = nil
		}, errs: []string{"spec: Forbidden: only cpu and memory resources are mutable"}},
		{name: "other changes in the body are dropped", change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Image = "nginx"
			p.Spec.ActiveDeadlineSeconds = ptr(int64(5))
			p.Labels = map[string]string{"app": "other"}
			p.Status.Phase = corev1.PodFailed
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("120m")
		}, check: func(t *testing.T, got *corev1.Pod) {
			if got.Spec.Containers[0].Image != "busybox" || got.Spec.ActiveDeadlineSeconds != nil || got.Labels["app"] != "web" || got.Status.Phase != "" {
				t.Errorf("non-resize changes kept: image %q, deadline %v, labels %v, phase %q", got.Spec.Containers[0].Image, got.Spec.ActiveDeadlineSeconds, got.Labels, got.Status.Phase)
			}
		}},
		{name: "QoS class changes", change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = resources(rl{"cpu": "200m", "memory": "128Mi"}, rl{"cpu": "200m", "memory": "128Mi"})
			p.Spec.InitContainers[0].Resources = resources(rl{"cpu": "10m", "memory": "1Mi"}, rl{"cpu": "10m", "memory": "1Mi"})
			p.Spec.InitContainers[1].Resources = resources(rl{"cpu": "10m", "memory": "1Mi"}, rl{"cpu": "10m", "memory": "1Mi"})
		}, errs: []string{`spec: Invalid value: "Burstable": Pod QOS Class may not change as a result of resizing`}},
		{name: "requests removed", change: func(p *corev1.Pod) {
			delete(p.Spec.Containers[0].Resources.Requests, corev1.ResourceMemory)
			delete(p.Spec.Containers[0].Resources.Limits, corev1.ResourceMemory)
		}, errs: []string{
			"spec.containers[0].resources.requests: Forbidden: resource requests cannot be removed",
			"spec.containers[0].resources.limits: Forbidden: resource limits cannot be removed",
		}},
		{name: "a resource other than cpu and memory", change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
		}, errs: []string{"spec: Forbidden: only cpu and memory resources are mutable"}},
		{name: "requests above limits", change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1")
		}, errs: []string{`spec.containers[0].resources.requests[cpu]: Invalid value: "1": must be less than or equal to cpu limit of 200m`}},
		{name: "an unknown resize policy", change: func(p *corev1.Pod) {
			p.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: "cpu", RestartPolicy: "Sometimes"}, {ResourceName: "cpu", RestartPolicy: corev1.NotRequired}}
		}, errs: []string{
			`spec.containers[0].resizePolicy: Unsupported value: "Sometimes": supported values: "NotRequired", "RestartContainer"`,
			`spec.containers[0].resizePolicy[1]: Duplicate value: "cpu"`,
			"spec: Forbidden: only cpu and memory resources are mutable",
		}},
		{name: "a non-sidecar init container that restarts on resize (from before v1.37)", old: func(p *corev1.Pod) {
			p.Spec.InitContainers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: "cpu", RestartPolicy: corev1.RestartContainer}}
		}, change: func(p *corev1.Pod) {
			p.Spec.InitContainers[0].Resources = resources(rl{"cpu": "20m"}, nil)
		}, errs: []string{
			"spec.initContainers[0]: Forbidden: non-sidecar init containers with a resize policy of RestartContainer cannot be resized",
		}},
		{name: "a container renamed", change: func(p *corev1.Pod) { p.Spec.Containers[0].Name = "other" },
			errs: []string{"spec.containers[0].name: Forbidden: containers may not be renamed or reordered on resize"}},
		{name: "a container added", change: func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "two", Image: "busybox", ImagePullPolicy: corev1.PullAlways, TerminationMessagePolicy: corev1.TerminationMessageReadFile})
		}, errs: []string{"spec.containers: Forbidden: containers may not be added or removed on resize"}},
		{name: "a static pod", old: func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} },
			change: func(p *corev1.Pod) {}, errs: []string{"[]: Forbidden: static pods cannot be resized"}},
		{name: "a node that does not report resources", old: func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Resources = nil },
			change: func(p *corev1.Pod) {}, errs: []string{"spec: Forbidden: Pod running on node without support for resize"}},
		{name: "pod-level resources removed", old: func(p *corev1.Pod) {
			r := resources(rl{"cpu": "1"}, nil)
			p.Spec.Resources = &r
		}, change: func(p *corev1.Pod) { p.Spec.Resources = &corev1.ResourceRequirements{} },
			errs: []string{"spec.resources.requests: Forbidden: pod-level resource requests cannot be removed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := base()
			if tc.old != nil {
				tc.old(old)
			}
			pod := old.DeepCopy()
			tc.change(pod)
			ctx := WithResizeUpdate(context.Background())
			Strategy{}.PrepareForUpdate(ctx, pod, old)
			var got []string
			for _, e := range (Strategy{}).ValidateUpdate(ctx, pod, old) {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.errs, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if tc.check != nil {
				tc.check(t, pod)
			}
		})
	}
}

// TestPodUpdateRefusesResources: a plain update may not change resources
// (they change through pods/resize).
func TestPodUpdateRefusesResources(t *testing.T) {
	old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox",
		Resources: resources(rl{"cpu": "100m"}, nil)}}}}
	DefaultPod(old)
	pod := old.DeepCopy()
	pod.Spec.Containers[0].Resources = resources(rl{"cpu": "200m"}, nil)
	errs := Strategy{}.ValidateUpdate(context.Background(), pod, old)
	if len(errs) != 1 || errs[0].Field != "spec" || errs[0].Type != "FieldValueForbidden" {
		t.Errorf("errors %v, want one Forbidden on spec", errs)
	}
}

// TestResizePolicyOnCreate: a new pod's resizePolicy is checked as
// upstream's (NotRequired only under restartPolicy Never; no
// RestartContainer for an init container that is not a sidecar).
func TestResizePolicyOnCreate(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		RestartPolicy:  corev1.RestartPolicyNever,
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox", ResizePolicy: []corev1.ContainerResizePolicy{{ResourceName: "memory", RestartPolicy: corev1.RestartContainer}}}},
		Containers:     []corev1.Container{{Name: "app", Image: "busybox", ResizePolicy: []corev1.ContainerResizePolicy{{ResourceName: "cpu", RestartPolicy: corev1.RestartContainer}, {ResourceName: "storage", RestartPolicy: corev1.NotRequired}}}},
	}}
	DefaultPod(pod)
	var got []string
	for _, e := range (Strategy{}).Validate(context.Background(), pod) {
		got = append(got, e.Error())
	}
	want := []string{
		`spec.containers[0].resizePolicy: Invalid value: "RestartContainer": must be 'NotRequired' when pod ` + "`restartPolicy`" + ` is 'Never'`,
		`spec.containers[0].resizePolicy: Unsupported value: "storage": supported values: "cpu", "memory"`,
		`spec.initContainers[0].resizePolicy: Invalid value: "RestartContainer": must be 'NotRequired' when pod ` + "`restartPolicy`" + ` is 'Never'`,
		`spec.initContainers[0].resizePolicy[0].restartPolicy: Invalid value: "RestartContainer": must not be set to 'RestartContainer' for non-sidecar initContainers`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}
