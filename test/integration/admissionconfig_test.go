package integration

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// TestAdmissionFlags: --enable-admission-plugins=AlwaysPullImages,
// --disable-admission-plugins=LimitRanger and an
// --admission-control-config-file whose PodSecurityConfiguration enforces
// restricted by default and exempts one namespace.
func TestAdmissionFlags(t *testing.T) {
	config := writeFile(t, "admission.yaml", `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: restricted
      enforce-version: latest
    exemptions:
      namespaces: [exempt]
`)
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) {
		cfg.Admission = kubeapiserver.AdmissionOptions{EnablePlugins: []string{"AlwaysPullImages"}, DisablePlugins: []string{"LimitRanger"}, ConfigFile: config}
	}})
	ctx := testCtx(t, time.Minute)
	admin := c.Clientset()
	privileged := func(name string) *corev1.Pod {
		p := newPod(name)
		p.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		return p
	}

	// The default level is restricted: no namespace label needed.
	ns := newNamespace(t, admin)
	_, err := admin.CoreV1().Pods(ns).Create(ctx, privileged("p"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "restricted:latest": privileged (container "c" must not set securityContext.privileged=true)`) {
		t.Errorf("privileged pod under the configured default: %v, want 403 from PodSecurity", err)
	}

	// An exempt namespace takes it; AlwaysPullImages sets the policy.
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "exempt"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts("exempt").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// LimitRanger is off: a LimitRange's defaults are not applied.
	if _, err := admin.CoreV1().LimitRanges("exempt").Create(ctx, &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "lr"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			Default: corev1.ResourceList{corev1.ResourceCPU: mustQuantity("1")}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := admin.CoreV1().Pods("exempt").Create(ctx, privileged("p"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("privileged pod in the exempt namespace: %v", err)
	}
	if got := pod.Spec.Containers[0].ImagePullPolicy; got != corev1.PullAlways {
		t.Errorf("imagePullPolicy = %s, want Always (AlwaysPullImages)", got)
	}
	if l := pod.Spec.Containers[0].Resources.Limits; len(l) != 0 {
		t.Errorf("limits %v set with LimitRanger disabled", l)
	}
}

// TestAdmissionAlwaysDeny: --enable-admission-plugins=AlwaysDeny refuses
// every write, reads still work.
func TestAdmissionAlwaysDeny(t *testing.T) {
	c := testapiserver.StartWithOptions(t, testapiserver.Options{SkipBootstrap: true, Configure: func(cfg *kubeapiserver.Config) {
		cfg.Admission = kubeapiserver.AdmissionOptions{EnablePlugins: []string{"AlwaysDeny"}}
	}})
	ctx := testCtx(t, 30*time.Second)
	_, err := c.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "admission control is denying all modifications") {
		t.Errorf("create under AlwaysDeny: %v", err)
	}
	if _, err := c.Clientset().CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list under AlwaysDeny: %v", err)
	}
}

// TestAdmissionEventRateLimit: EventRateLimit with a Namespace limit from
// the admission configuration answers 429 once the bucket is empty.
func TestAdmissionEventRateLimit(t *testing.T) {
	config := writeFile(t, "admission.yaml", `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: EventRateLimit
  configuration:
    apiVersion: eventratelimit.admission.k8s.io/v1alpha1
    kind: Configuration
    limits:
    - type: Namespace
      qps: 1
      burst: 2
`)
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) {
		cfg.Admission = kubeapiserver.AdmissionOptions{EnablePlugins: []string{"EventRateLimit"}, ConfigFile: config}
	}})
	ctx := testCtx(t, 30*time.Second)
	admin := c.Clientset()
	ns := newNamespace(t, admin)
	// Burst 2 at 1/s: of ten quick creates, one is refused (the first two
	// never are).
	var err error
	for i := range 10 {
		_, err = admin.CoreV1().Events(ns).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: "e-"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p"},
			Reason:         "Test", Message: "m", Type: corev1.EventTypeNormal,
		}, metav1.CreateOptions{})
		if err != nil {
			if i < 2 {
				t.Fatalf("event %d: %v", i, err)
			}
			break
		}
	}
	if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "limit reached on type Namespace for key "+ns) {
		t.Errorf("ten quick events: %v, want a 429", err)
	}
}
