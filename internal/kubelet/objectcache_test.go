package kubelet

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"
)

// TestConfigMapsAndSecretsAreWatched: the ConfigMap and Secret a pod uses
// are read from watches started when the pod arrives, not by a GET at
// every sync; a change reaches the kubelet's copy through the watch; the
// watches stop once the pod is gone.
func TestConfigMapsAndSecretsAreWatched(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "default"}, Data: map[string]string{"color": "blue"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pw", Namespace: "default"}, Data: map[string][]byte{"pw": []byte("s3cret")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := bound("app", corev1.RestartPolicyAlways)
	p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env,
		corev1.EnvVar{Name: "COLOR", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "color"}}},
		corev1.EnvVar{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "pw"}, Key: "pw"}}})
	p.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}}
	if _, err := h.client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitPod("app", "running", running)
	// Several resyncs (every 200 ms here), each setting up the volume.
	time.Sleep(time.Second)

	gets, watches := 0, map[string]bool{}
	for _, a := range h.client.Actions() {
		switch a.GetResource().Resource {
		case "configmaps", "secrets":
		default:
			continue
		}
		switch a.GetVerb() {
		case "get":
			gets++
		case "watch":
			watches[a.GetResource().Resource] = true
		}
	}
	if gets != 0 {
		t.Errorf("%d GETs of configmaps and secrets, want none (read from the watches)", gets)
	}
	if !watches["configmaps"] || !watches["secrets"] {
		t.Errorf("watches started: %v, want configmaps and secrets", watches)
	}
	if n, m := h.k.configMaps.watches(), h.k.secrets.watches(); n != 1 || m != 1 {
		t.Errorf("%d configmap and %d secret watches, want 1 and 1", n, m)
	}

	// A change reaches the kubelet's copy without a GET.
	if _, err := h.client.CoreV1().ConfigMaps("default").Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "default"}, Data: map[string]string{"color": "green"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		cm, err := h.k.ConfigMap(ctx, "default", "cfg")
		if err == nil && cm.Data["color"] == "green" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kubelet's copy never saw the update: %v, %v", cm, err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Deleting the configmap: NotFound from the cache.
	if err := h.client.CoreV1().Secrets("default").Delete(ctx, "pw", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		_, err := h.k.Secret(ctx, "default", "pw")
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deleted secret still read: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The pod gone: no watch is left.
	h.client.ClearActions()
	if err := h.client.CoreV1().Pods("default").Delete(ctx, "app", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); h.k.configMaps.watches()+h.k.secrets.watches() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("watches left after the pod is gone: %d configmaps, %d secrets", h.k.configMaps.watches(), h.k.secrets.watches())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// An object no pod references is read from the API.
	if cm, err := h.k.ConfigMap(ctx, "default", "cfg"); err != nil || cm.Data["color"] != "green" {
		t.Errorf("unreferenced configmap: %v, %v", cm, err)
	}
	var got bool
	for _, a := range h.client.Actions() {
		if ga, ok := a.(k8stesting.GetAction); ok && a.GetVerb() == "get" && a.GetResource().Resource == "configmaps" && ga.GetName() == "cfg" {
			got = true
		}
	}
	if !got {
		t.Error("an unreferenced configmap was not read with a GET")
	}
}

func TestPodReferences(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}},
		Volumes: []corev1.Volume{
			{Name: "a", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-vol"}}}},
			{Name: "b", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s-vol"}}},
			{Name: "c", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s-proj"}}},
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
			}}}},
		},
		InitContainers: []corev1.Container{{Name: "i", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-init"}}}}}},
		Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{
			{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-vol"}, Key: "x"}}},
			{Name: "Y", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s-env"}, Key: "y"}}},
		}}},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "e",
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s-eph"}}}}}}},
	}}
	if got, want := podConfigMapNames(p), []string{"cm-vol", "kube-root-ca.crt", "cm-init"}; !slices.Equal(got, want) {
		t.Errorf("configmaps %v, want %v", got, want)
	}
	if got, want := podSecretNames(p), []string{"pull", "s-vol", "s-proj", "s-env", "s-eph"}; !slices.Equal(got, want) {
		t.Errorf("secrets %v, want %v", got, want)
	}
}
