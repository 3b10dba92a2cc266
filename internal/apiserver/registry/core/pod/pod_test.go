package pod

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func newPod(containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: containers},
	}
}

func TestPrepareForCreateDefaults(t *testing.T) {
	pod := newPod(corev1.Container{
		Name:  "app",
		Image: "nginx",
		Ports: []corev1.ContainerPort{{ContainerPort: 80}},
		Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		},
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
	})
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "scratch"},
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}},
	}
	pod.Status.Phase = corev1.PodRunning
	Strategy{}.PrepareForCreate(context.Background(), pod)

	want := corev1.PodSpec{
		Volumes: []corev1.Volume{
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}, DefaultMode: ptr(int32(420))}}},
		},
		Containers: []corev1.Container{{
			Name:  "app",
			Image: "nginx",
			Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
			Resources: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			},
			LivenessProbe: &corev1.Probe{
				ProbeHandler:   corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(80), Scheme: corev1.URISchemeHTTP}},
				TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
			},
			TerminationMessagePath:   "/dev/termination-log",
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			ImagePullPolicy:          corev1.PullAlways,
		}},
		RestartPolicy:                 corev1.RestartPolicyAlways,
		TerminationGracePeriodSeconds: ptr(int64(30)),
		DNSPolicy:                     corev1.DNSClusterFirst,
		SecurityContext:               &corev1.PodSecurityContext{},
		SchedulerName:                 "default-scheduler",
		Tolerations: []corev1.Toleration{
			{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
			{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
		},
		Priority:           ptr(int32(0)),
		PreemptionPolicy:   ptr(corev1.PreemptLowerPriority),
		EnableServiceLinks: ptr(true),
	}
	if diff := cmp.Diff(want, pod.Spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	wantStatus := corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBurstable}
	if diff := cmp.Diff(wantStatus, pod.Status); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	if pod.Generation != 1 {
		t.Errorf("generation = %d, want 1", pod.Generation)
	}
}

func TestImagePullPolicyDefault(t *testing.T) {
	for image, want := range map[string]corev1.PullPolicy{
		"nginx":                        corev1.PullAlways,
		"nginx:latest":                 corev1.PullAlways,
		"nginx:1.27":                   corev1.PullIfNotPresent,
		"localhost:5000/app":           corev1.PullAlways,
		"localhost:5000/app:v1":        corev1.PullIfNotPresent,
		"nginx@sha256:" + hex64:        corev1.PullIfNotPresent,
		"nginx:latest@sha256:" + hex64: corev1.PullAlways,
	} {
		t.Run(image, func(t *testing.T) {
			c := corev1.Container{Image: image}
			defaultContainer(&c, false)
			if c.ImagePullPolicy != want {
				t.Errorf("got %s, want %s", c.ImagePullPolicy, want)
			}
		})
	}
}

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestAddDefaultTolerationsKeepsExisting(t *testing.T) {
	pod := newPod()
	pod.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(5))}}
	AddDefaultTolerations(pod)
	var keys []string
	for _, tol := range pod.Spec.Tolerations {
		keys = append(keys, tol.Key)
	}
	if diff := cmp.Diff([]string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable}, keys); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	if *pod.Spec.Tolerations[0].TolerationSeconds != 5 {
		t.Errorf("existing toleration changed")
	}

	all := newPod()
	all.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	AddDefaultTolerations(all)
	if len(all.Spec.Tolerations) != 1 {
		t.Errorf("a pod tolerating everything got %d tolerations", len(all.Spec.Tolerations))
	}
}

func validPod() *corev1.Pod {
	pod := newPod(corev1.Container{Name: "app", Image: "nginx:1.27"})
	DefaultPod(pod)
	return pod
}

// errorStrings turns an error list into "type path" strings for comparing.
func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Field)
	}
	return out
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []string
	}{
		{name: "valid", mutate: func(*corev1.Pod) {}},
		{name: "no containers", mutate: func(p *corev1.Pod) { p.Spec.Containers = nil }, want: []string{"FieldValueRequired spec.containers"}},
		{name: "bad container name", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Name = "App_1" }, want: []string{"FieldValueInvalid spec.containers[0].name"}},
		{name: "duplicate container name", mutate: func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, p.Spec.Containers[0])
		}, want: []string{"FieldValueDuplicate spec.containers[1].name"}},
		{name: "init container shares a name", mutate: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{p.Spec.Containers[0]}
		}, want: []string{"FieldValueDuplicate spec.initContainers[0].name"}},
		{name: "no image", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "" }, want: []string{"FieldValueRequired spec.containers[0].image"}},
		{name: "port out of range", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 70000, Protocol: corev1.ProtocolTCP}, {ContainerPort: 0, Protocol: "HTTP"}}
		}, want: []string{"FieldValueInvalid spec.containers[0].ports[0].containerPort", "FieldValueRequired spec.containers[0].ports[1].containerPort", "FieldValueNotSupported spec.containers[0].ports[1].protocol"}},
		{name: "restart policy", mutate: func(p *corev1.Pod) { p.Spec.RestartPolicy = "Sometimes" }, want: []string{"FieldValueNotSupported spec.restartPolicy"}},
		{name: "dns policy", mutate: func(p *corev1.Pod) { p.Spec.DNSPolicy = "Other" }, want: []string{"FieldValueNotSupported spec.dnsPolicy"}},
		{name: "dns none without config", mutate: func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSNone }, want: []string{"FieldValueRequired spec.dnsConfig"}},
		{name: "duplicate volumes and missing mount", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/d"}, {Name: "nope", MountPath: "/n"}}
		}, want: []string{"FieldValueDuplicate spec.volumes[1].name", "FieldValueNotFound spec.containers[0].volumeMounts[1].name"}},
		{name: "two volume sources", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "x", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}, HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}}}
		}, want: []string{"FieldValueForbidden spec.volumes[0]"}},
		{name: "request above limit", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
			}
		}, want: []string{"FieldValueInvalid spec.containers[0].resources.requests[memory]"}},
		{name: "toleration seconds without NoExecute", mutate: func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: ptr(int64(1))}}
		}, want: []string{"FieldValueInvalid spec.tolerations[0].effect"}},
		{name: "liveness success threshold", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, SuccessThreshold: 2}
		}, want: []string{"FieldValueInvalid spec.containers[0].livenessProbe.successThreshold"}},
		{name: "sysctls as the conformance test sends them", mutate: func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{
				{Name: "foo-", Value: "bar"}, {Name: "kernel.shmmax", Value: "100000000"},
				{Name: "safe-and-unsafe", Value: "100000000"}, {Name: "bar..", Value: "42"}, {Name: "kernel/shmmax", Value: "1"},
			}}
		}, want: []string{"FieldValueInvalid spec.securityContext.sysctls[0].name", "FieldValueInvalid spec.securityContext.sysctls[3].name"}},
		{name: "net sysctl with the host's network", mutate: func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_local_port_range", Value: "1024 65535"}}}
		}, want: []string{"FieldValueInvalid spec.securityContext.sysctls[0].name"}},
		{name: "active deadline zero", mutate: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(0)) }, want: []string{"FieldValueInvalid spec.activeDeadlineSeconds"}},
		{name: "certificate sources", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519", CredentialBundlePath: "b.pem", MaxExpirationSeconds: ptr(int32(3600))}},
				{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{SignerName: ptr("example.com/s"), LabelSelector: &metav1.LabelSelector{}, Path: "trust.pem"}},
			}}}}}
		}},
		{name: "bad certificate sources", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "DSA", MaxExpirationSeconds: ptr(int32(91*24*3600 + 1))}},
				{PodCertificate: &corev1.PodCertificateProjection{SignerName: "kubernetes.io/x", KeyType: "ED25519", KeyPath: "k", CertificateChainPath: "k", MaxExpirationSeconds: ptr(int32(3599))}},
				{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: ptr("n"), LabelSelector: &metav1.LabelSelector{}}},
			}}}}}
		}, want: []string{
			"FieldValueNotSupported spec.volumes[0].projected.sources[0].podCertificate.keyType",
			"FieldValueInvalid spec.volumes[0].projected.sources[0].podCertificate.maxExpirationSeconds",
			"FieldValueRequired spec.volumes[0].projected.sources[0].podCertificate",
			"FieldValueInvalid spec.volumes[0].projected.sources[1].podCertificate.maxExpirationSeconds",
			"FieldValueInvalid spec.volumes[0].projected",
			"FieldValueInvalid spec.volumes[0].projected.sources[2].clusterTrustBundle.labelSelector",
			"FieldValueRequired spec.volumes[0].projected.sources[2].clusterTrustBundle.path",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := validPod()
			tc.mutate(pod)
			got := errorStrings(Strategy{}.Validate(context.Background(), pod))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(*corev1.Pod)
		forbidden bool
		want      []string
	}{
		{name: "image change allowed", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx:1.28" }},
		{name: "toleration added", mutate: func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists})
		}},
		{name: "active deadline added", mutate: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(10)) }},
		{name: "port change forbidden", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}}
		}, want: []string{"FieldValueForbidden spec"}, forbidden: true},
		{name: "node name change forbidden", mutate: func(p *corev1.Pod) { p.Spec.NodeName = "other" }, want: []string{"FieldValueForbidden spec"}, forbidden: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := validPod()
			old.Spec.NodeName = "n1"
			pod := old.DeepCopy()
			tc.mutate(pod)
			errs := Strategy{}.ValidateUpdate(context.Background(), pod, old)
			if diff := cmp.Diff(tc.want, errorStrings(errs)); diff != "" {
				t.Fatalf("errors (-want +got):\n%s", diff)
			}
			if tc.forbidden && !strings.HasPrefix(errs[0].Detail, "pod updates may not change fields other than `spec.containers[*].image`") {
				t.Errorf("detail = %q", errs[0].Detail)
			}
		})
	}
}

func TestPrepareForUpdateAndStatus(t *testing.T) {
	old := validPod()
	AddDefaultTolerations(old) // as created
	old.Generation = 3
	old.Status = corev1.PodStatus{Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBestEffort}

	pod := old.DeepCopy()
	pod.Status = corev1.PodStatus{Phase: corev1.PodFailed}
	pod.Spec.Containers[0].Image = "nginx:2"
	Strategy{}.PrepareForUpdate(context.Background(), pod, old)
	if pod.Status.Phase != corev1.PodRunning || pod.Generation != 4 {
		t.Errorf("update: phase %s generation %d, want Running 4", pod.Status.Phase, pod.Generation)
	}

	same := old.DeepCopy()
	same.Labels = map[string]string{"a": "b"}
	Strategy{}.PrepareForUpdate(context.Background(), same, old)
	if same.Generation != 3 {
		t.Errorf("metadata-only update bumped generation to %d", same.Generation)
	}

	// An update that replaces the tolerations gets the defaults back, so
	// it is valid (existing tolerations stay) and bumps the generation.
	tol := old.DeepCopy()
	tol.Spec.Tolerations = []corev1.Toleration{{Key: "foo", Operator: corev1.TolerationOpEqual, Value: "bar", Effect: corev1.TaintEffectNoSchedule}}
	Strategy{}.PrepareForUpdate(context.Background(), tol, old)
	if errs := (Strategy{}).ValidateUpdate(context.Background(), tol, old); len(errs) > 0 {
		t.Errorf("replacing the tolerations: %v", errs)
	}
	if len(tol.Spec.Tolerations) != 3 || tol.Generation != 4 {
		t.Errorf("replaced tolerations %+v generation %d, want foo and the two defaults, 4", tol.Spec.Tolerations, tol.Generation)
	}

	st := old.DeepCopy()
	st.Spec.NodeName = "sneaky"
	st.Status = corev1.PodStatus{Phase: corev1.PodSucceeded}
	Strategy{}.PrepareForStatusUpdate(context.Background(), st, old)
	if st.Spec.NodeName != "" || st.Status.Phase != corev1.PodSucceeded || st.Status.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("status update: nodeName %q phase %s qos %s", st.Spec.NodeName, st.Status.Phase, st.Status.QOSClass)
	}
}

func TestCheckGracefulDelete(t *testing.T) {
	tests := []struct {
		name      string
		nodeName  string
		phase     corev1.PodPhase
		specGrace *int64
		requested *int64
		want      int64
	}{
		{name: "unscheduled", specGrace: ptr(int64(30)), want: 0},
		{name: "scheduled uses spec", nodeName: "n", specGrace: ptr(int64(30)), want: 30},
		{name: "scheduled uses request", nodeName: "n", specGrace: ptr(int64(30)), requested: ptr(int64(5)), want: 5},
		{name: "terminal", nodeName: "n", phase: corev1.PodSucceeded, specGrace: ptr(int64(30)), want: 0},
		{name: "negative becomes 1", nodeName: "n", requested: ptr(int64(-3)), want: 1},
		{name: "force", nodeName: "n", specGrace: ptr(int64(30)), requested: ptr(int64(0)), want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := newPod()
			pod.Spec.NodeName = tc.nodeName
			pod.Status.Phase = tc.phase
			pod.Spec.TerminationGracePeriodSeconds = tc.specGrace
			opts := &metav1.DeleteOptions{GracePeriodSeconds: tc.requested}
			graceful := Strategy{}.CheckGracefulDelete(context.Background(), pod, opts)
			if *opts.GracePeriodSeconds != tc.want || graceful != (tc.want > 0) {
				t.Errorf("grace %d graceful %v, want %d", *opts.GracePeriodSeconds, graceful, tc.want)
			}
		})
	}
}

func TestApplyBinding(t *testing.T) {
	pod := validPod()
	b := &corev1.Binding{Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}
	if err := ApplyBinding(pod, b); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "n1" || len(pod.Status.Conditions) != 1 || pod.Status.Conditions[0].Type != corev1.PodScheduled || pod.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Errorf("after binding: node %q conditions %+v", pod.Spec.NodeName, pod.Status.Conditions)
	}
	err := ApplyBinding(pod, &corev1.Binding{Target: corev1.ObjectReference{Name: "n2"}})
	if err == nil || err.Error() != `pod web is already assigned to node "n1"` {
		t.Errorf("second binding: %v", err)
	}
}

func TestFieldSet(t *testing.T) {
	pod := validPod()
	pod.Spec.NodeName = "n1"
	pod.Spec.ServiceAccountName = "sa"
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.42.0.5"}}}
	want := fields.Set{
		"spec.nodeName": "n1", "spec.restartPolicy": "Always", "spec.schedulerName": "default-scheduler",
		"spec.serviceAccountName": "sa", "spec.hostNetwork": "false", "status.phase": "Running",
		"status.podIP": "10.42.0.5", "status.nominatedNodeName": "",
	}
	if diff := cmp.Diff(want, Strategy{}.FieldSet(pod)); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
}

func TestTableRow(t *testing.T) {
	created := metav1.NewTime(time.Now().Add(-time.Hour))
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []interface{}
	}{
		{name: "pending", mutate: func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending },
			want: []interface{}{"web", "0/1", "Pending", "0", "60m", "<none>", "<none>", "<none>", "<none>"}},
		{name: "running", mutate: func(p *corev1.Pod) {
			p.Spec.NodeName = "n1"
			p.Status.Phase = corev1.PodRunning
			p.Status.PodIPs = []corev1.PodIP{{IP: "10.42.0.5"}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true, State: running}}
		}, want: []interface{}{"web", "1/1", "Running", "0", "60m", "10.42.0.5", "n1", "<none>", "<none>"}},
		{name: "crash loop", mutate: func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{
				Name: "app", RestartCount: 4,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(time.Now().Add(-2 * time.Minute))}},
			}}
		}, want: []interface{}{"web", "0/1", "CrashLoopBackOff", "4 (2m ago)", "60m", "<none>", "<none>", "<none>", "<none>"}},
		{name: "init waiting", mutate: func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Spec.InitContainers = []corev1.Container{{Name: "i1"}, {Name: "i2"}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{
				{Name: "i1", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
				{Name: "i2", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
			}
		}, want: []interface{}{"web", "0/1", "Init:1/2", "0", "60m", "<none>", "<none>", "<none>", "<none>"}},
		{name: "init failed", mutate: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i1"}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{
				{Name: "i1", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2}}},
			}
		}, want: []interface{}{"web", "0/1", "Init:ExitCode:2", "0", "60m", "<none>", "<none>", "<none>", "<none>"}},
		{name: "terminating", mutate: func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			now := metav1.Now()
			p.DeletionTimestamp = &now
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "x"}}
		}, want: []interface{}{"web", "0/1", "Terminating", "0", "60m", "<none>", "<none>", "<none>", "0/1"}},
		{name: "completed", mutate: func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodSucceeded
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}}
		}, want: []interface{}{"web", "0/1", "Completed", "0", "60m", "<none>", "<none>", "<none>", "<none>"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := validPod()
			pod.CreationTimestamp = created
			tc.mutate(pod)
			got, err := Strategy{}.TableRow(pod)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
			if len(got) != len(Strategy{}.TableColumns()) {
				t.Errorf("%d cells for %d columns", len(got), len(Strategy{}.TableColumns()))
			}
		})
	}
}

func TestStatusUpdateSyncsIPs(t *testing.T) {
	tests := []struct {
		name string
		in   corev1.PodStatus
		want corev1.PodStatus
	}{
		{name: "singular only", in: corev1.PodStatus{PodIP: "10.42.0.5", HostIP: "192.0.2.1"},
			want: corev1.PodStatus{PodIP: "10.42.0.5", PodIPs: []corev1.PodIP{{IP: "10.42.0.5"}}, HostIP: "192.0.2.1", HostIPs: []corev1.HostIP{{IP: "192.0.2.1"}}}},
		{name: "plural wins", in: corev1.PodStatus{PodIP: "10.42.0.9", PodIPs: []corev1.PodIP{{IP: "10.42.0.5"}, {IP: "fd00::5"}}},
			want: corev1.PodStatus{PodIP: "10.42.0.5", PodIPs: []corev1.PodIP{{IP: "10.42.0.5"}, {IP: "fd00::5"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := validPod()
			pod := old.DeepCopy()
			pod.Status = tc.in
			Strategy{}.PrepareForStatusUpdate(context.Background(), pod, old)
			if diff := cmp.Diff(tc.want, pod.Status); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateStatusUpdate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []string
	}{
		{name: "running", mutate: func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app"}}
		}},
		{name: "unknown container", mutate: func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "ghost"}}
		}, want: []string{"FieldValueNotFound status.containerStatuses[0].name"}},
		{name: "qos changed", mutate: func(p *corev1.Pod) { p.Status.QOSClass = corev1.PodQOSGuaranteed }, want: []string{"FieldValueInvalid status.qosClass"}},
		{name: "bad pod IP", mutate: func(p *corev1.Pod) { p.Status.PodIPs = []corev1.PodIP{{IP: "nope"}} }, want: []string{"FieldValueInvalid status.podIPs[0].ip"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := validPod()
			old.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort}
			pod := old.DeepCopy()
			tc.mutate(pod)
			got := errorStrings(Strategy{}.ValidateStatusUpdate(context.Background(), pod, old))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
