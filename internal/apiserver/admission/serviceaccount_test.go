package admission

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var (
	podsGVR = corev1.SchemeGroupVersion.WithResource("pods")
	saGVR   = corev1.SchemeGroupVersion.WithResource("serviceaccounts")
)

func account(name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
}

func fixedServiceAccount(r *objects) *ServiceAccount {
	p := NewServiceAccount(r)
	p.suffix = func() string { return "abcde" }
	return p
}

func TestServiceAccountName(t *testing.T) {
	tests := []struct {
		name    string
		spec    corev1.PodSpec
		wantSA  string
		wantDep string
	}{
		{"none named: default", corev1.PodSpec{}, "default", "default"},
		{"named", corev1.PodSpec{ServiceAccountName: "builder"}, "builder", "builder"},
		{"only the deprecated field", corev1.PodSpec{DeprecatedServiceAccount: "old"}, "old", "old"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: tc.spec}
			a := &Attributes{Operation: Create, Resource: podsGVR, Namespace: "ns", Object: pod}
			if err := fixedServiceAccount(newObjects(saGVR, account("default"), account("builder"), account("old"))).Admit(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			got := []string{pod.Spec.ServiceAccountName, pod.Spec.DeprecatedServiceAccount}
			if diff := cmp.Diff([]string{tc.wantSA, tc.wantDep}, got); diff != "" {
				t.Errorf("service account (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServiceAccountMountsToken(t *testing.T) {
	mount := corev1.VolumeMount{Name: "kube-api-access-abcde", ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}
	tokenVolume := corev1.Volume{Name: "kube-api-access-abcde", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](0o644),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}}}
	own := corev1.VolumeMount{Name: "mine", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}
	noAutomount := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "quiet"}, AutomountServiceAccountToken: ptr.To(false)}
	tests := []struct {
		name string
		spec corev1.PodSpec
		want corev1.PodSpec
	}{
		{
			name: "every container and init container",
			spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "i"}}, Containers: []corev1.Container{{Name: "a"}, {Name: "b"}}},
			want: corev1.PodSpec{ServiceAccountName: "default", DeprecatedServiceAccount: "default",
				InitContainers: []corev1.Container{{Name: "i", VolumeMounts: []corev1.VolumeMount{mount}}},
				Containers:     []corev1.Container{{Name: "a", VolumeMounts: []corev1.VolumeMount{mount}}, {Name: "b", VolumeMounts: []corev1.VolumeMount{mount}}},
				Volumes:        []corev1.Volume{tokenVolume}},
		},
		{
			name: "a container with its own mount at the path keeps it",
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", VolumeMounts: []corev1.VolumeMount{own}}, {Name: "b"}}},
			want: corev1.PodSpec{ServiceAccountName: "default", DeprecatedServiceAccount: "default",
				Containers: []corev1.Container{{Name: "a", VolumeMounts: []corev1.VolumeMount{own}}, {Name: "b", VolumeMounts: []corev1.VolumeMount{mount}}},
				Volumes:    []corev1.Volume{tokenVolume}},
		},
		{
			name: "no container needs it: no volume",
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", VolumeMounts: []corev1.VolumeMount{own}}}},
			want: corev1.PodSpec{ServiceAccountName: "default", DeprecatedServiceAccount: "default",
				Containers: []corev1.Container{{Name: "a", VolumeMounts: []corev1.VolumeMount{own}}}},
		},
		{
			name: "the pod says no",
			spec: corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false), Containers: []corev1.Container{{Name: "a"}}},
			want: corev1.PodSpec{ServiceAccountName: "default", DeprecatedServiceAccount: "default", AutomountServiceAccountToken: ptr.To(false), Containers: []corev1.Container{{Name: "a"}}},
		},
		{
			name: "the account says no",
			spec: corev1.PodSpec{ServiceAccountName: "quiet", Containers: []corev1.Container{{Name: "a"}}},
			want: corev1.PodSpec{ServiceAccountName: "quiet", DeprecatedServiceAccount: "quiet", Containers: []corev1.Container{{Name: "a"}}},
		},
		{
			name: "the pod overrules the account",
			spec: corev1.PodSpec{ServiceAccountName: "quiet", AutomountServiceAccountToken: ptr.To(true), Containers: []corev1.Container{{Name: "a"}}},
			want: corev1.PodSpec{ServiceAccountName: "quiet", DeprecatedServiceAccount: "quiet", AutomountServiceAccountToken: ptr.To(true),
				Containers: []corev1.Container{{Name: "a", VolumeMounts: []corev1.VolumeMount{mount}}}, Volumes: []corev1.Volume{tokenVolume}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: tc.spec}
			a := &Attributes{Operation: Create, Resource: podsGVR, Namespace: "ns", Name: "p", Object: pod}
			if err := fixedServiceAccount(newObjects(saGVR, noAutomount, account("default"))).Admit(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, pod.Spec); d != "" {
				t.Errorf("pod spec (-want +got):\n%s", d)
			}
		})
	}
}

func TestServiceAccountLeavesOtherObjects(t *testing.T) {
	cm := &corev1.ConfigMap{}
	a := &Attributes{Operation: Create, Resource: configMapsGVR, Object: cm}
	if err := NewServiceAccount(nil).Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&corev1.ConfigMap{}, cm); diff != "" {
		t.Errorf("config map changed (-want +got):\n%s", diff)
	}
}

// TestServiceAccountMissing: a pod is refused until its account exists, in
// upstream's words; it gets the account's image pull secrets.
func TestServiceAccountMissing(t *testing.T) {
	withSecrets := account("puller")
	withSecrets.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
	tests := []struct {
		name         string
		pod          *corev1.Pod
		allowMissing bool
		wantErr      string
		wantSecrets  []corev1.LocalObjectReference
	}{
		{
			name:    "no default account yet",
			pod:     &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}},
			wantErr: `pods "p" is forbidden: error looking up service account ns/default: serviceaccount "default" not found`,
		},
		{
			name:    "a generated name",
			pod:     &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", GenerateName: "web-5d4f-"}, Spec: corev1.PodSpec{ServiceAccountName: "builder"}},
			wantErr: `pods "web-5d4f-" is forbidden: error looking up service account ns/builder: serviceaccount "builder" not found`,
		},
		{
			name:         "allowed missing",
			pod:          &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}},
			allowMissing: true,
		},
		{
			name:        "the account's pull secrets",
			pod:         &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{ServiceAccountName: "puller"}},
			wantSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
		},
		{
			name:        "the pod's own pull secrets win",
			pod:         &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{ServiceAccountName: "puller", ImagePullSecrets: []corev1.LocalObjectReference{{Name: "mine"}}}},
			wantSecrets: []corev1.LocalObjectReference{{Name: "mine"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &Attributes{Operation: Create, Resource: podsGVR, Namespace: "ns", Name: tc.pod.Name, Object: tc.pod}
			err := fixedServiceAccount(newObjects(saGVR, withSecrets)).AllowMissing(tc.allowMissing).Admit(context.Background(), a)
			if tc.wantErr != "" {
				if !apierrors.IsForbidden(err) || err.Error() != tc.wantErr {
					t.Fatalf("Admit = %v, want 403 %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.wantSecrets, tc.pod.Spec.ImagePullSecrets); d != "" {
				t.Errorf("image pull secrets (-want +got):\n%s", d)
			}
		})
	}
}
