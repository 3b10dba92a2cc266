package admission

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
)

func labelledNamespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// privilegedPod breaks baseline (privileged, hostNetwork) and so
// restricted.
func privilegedPod(ns string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "priv", Namespace: ns},
		Spec: corev1.PodSpec{
			HostNetwork: true,
			Containers: []corev1.Container{{Name: "c", Image: "busybox",
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}},
		},
	}
}

// restrictedPod meets restricted.
func restrictedPod(ns string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "ok", Namespace: ns},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "c", Image: "busybox", SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			}}},
		},
	}
}

func TestPodSecurity(t *testing.T) {
	nss := newObjects(namespacesGVR,
		labelledNamespace("restricted", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}),
		labelledNamespace("warned", map[string]string{"pod-security.kubernetes.io/warn": "baseline", "pod-security.kubernetes.io/warn-version": "v1.37"}),
		labelledNamespace("plain", nil),
		labelledNamespace("exempt", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}),
	)
	config := []byte(`apiVersion: pod-security.admission.config.k8s.io/v1
kind: PodSecurityConfiguration
exemptions:
  namespaces: [exempt]
  usernames: [system:admin-exempt]
`)
	p, err := NewPodSecurity(nss, config)
	if err != nil {
		t.Fatal(err)
	}
	denied := `pods "priv" is forbidden: violates PodSecurity "restricted:latest": host namespaces (hostNetwork=true), privileged (container "c" must not set securityContext.privileged=true), allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`
	warned := `would violate PodSecurity "baseline:v1.37": host namespaces (hostNetwork=true), privileged (container "c" must not set securityContext.privileged=true)`
	tests := []struct {
		name     string
		pod      *corev1.Pod
		user     string
		wantErr  string
		warnings []string
	}{
		{"restricted refuses a privileged pod", privilegedPod("restricted"), "", denied, nil},
		{"restricted admits a restricted pod", restrictedPod("restricted"), "", "", nil},
		{"warn level warns and admits", privilegedPod("warned"), "", "", []string{warned}},
		{"unlabelled namespace is privileged", privilegedPod("plain"), "", "", nil},
		{"exempt namespace", privilegedPod("exempt"), "", "", nil},
		{"exempt user", privilegedPod("restricted"), "system:admin-exempt", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &Attributes{Operation: Create, Resource: podsRes, Kind: corev1.SchemeGroupVersion.WithKind("Pod"), Namespace: tc.pod.Namespace, Name: tc.pod.Name, Object: tc.pod}
			if tc.user != "" {
				a.User = &authn.User{Name: tc.user}
			}
			err := p.Validate(context.Background(), a)
			got := ""
			if err != nil {
				got = err.Error()
				if !apierrors.IsForbidden(err) {
					t.Errorf("not a 403: %v", err)
				}
			}
			if diff := cmp.Diff(tc.wantErr, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.warnings, a.TakeWarnings()); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPodSecurityNamespaceLabels: labelling a namespace restricted warns
// about the pods there that break it; an invalid level is 422.
func TestPodSecurityNamespaceLabels(t *testing.T) {
	old := labelledNamespace("ns", nil)
	r := newObjects(namespacesGVR, old).with(podsRes, privilegedPod("ns"), restrictedPod("ns"))
	p, err := NewPodSecurity(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	next := labelledNamespace("ns", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	a := &Attributes{Operation: Update, Resource: namespacesGVR, Kind: corev1.SchemeGroupVersion.WithKind("Namespace"), Name: "ns", Object: next, OldObject: old}
	if err := p.Validate(context.Background(), a); err != nil {
		t.Fatalf("label change refused: %v", err)
	}
	want := []string{`existing pods in namespace "ns" violate the new PodSecurity enforce level "restricted:latest"`,
		`priv: host namespaces, privileged, allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile`}
	if diff := cmp.Diff(want, a.TakeWarnings()); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	bad := labelledNamespace("ns", map[string]string{"pod-security.kubernetes.io/enforce": "strict"})
	a = &Attributes{Operation: Update, Resource: namespacesGVR, Kind: corev1.SchemeGroupVersion.WithKind("Namespace"), Name: "ns", Object: bad, OldObject: old}
	if err := p.Validate(context.Background(), a); !apierrors.IsInvalid(err) {
		t.Errorf("invalid level: got %v, want 422 as upstream", err)
	}
}
