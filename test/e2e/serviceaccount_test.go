package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAgentPodServiceAccountToken: a pod's mounted service-account token
// (the projected kube-api-access volume the kubelet fills by TokenRequest)
// reaches https://kubernetes.default.svc through cluster DNS and the
// service proxy, is refused (403) what its account may not do, and is
// allowed once a RoleBinding grants it.
func TestAgentPodServiceAccountToken(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "agent-satoken")
	ctx := context.Background()
	// A static HTTPS client (testdata/httpget) mounted from the host: every
	// second it lists the namespace's configmaps with the mounted token,
	// checking the server against the mounted ca.crt.
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "httpget"), "./testdata/httpget")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build httpget: %v\n%s", err, out)
	}
	script := `D=/var/run/secrets/kubernetes.io/serviceaccount
ls $D; echo "NAMESPACE $(cat $D/namespace)"; head -c 30 $D/ca.crt; echo
exec /helper/httpget -ca $D/ca.crt -token-file $D/token "https://kubernetes.default.svc/api/v1/namespaces/$(cat $D/namespace)/configmaps"`
	pod := busyboxPod(ns, "reader", c.image, "sh", "-c", script)
	pod.Spec.Volumes = []corev1.Volume{{Name: "helper", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: bin}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "helper", MountPath: "/helper", ReadOnly: true}}
	p := c.create(t, pod)
	if n := len(p.Spec.Volumes); n != 2 || !strings.HasPrefix(p.Spec.Volumes[1].Name, "kube-api-access-") {
		t.Fatalf("volumes = %+v, want the kube-api-access volume", p.Spec.Volumes)
	}
	p = c.waitPod(t, ns, "reader", 90*time.Second, "running", podRunningReady)
	logs := func() string { return c.logFile(t, p, "main", 0) }
	waitLog := func(what, want string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(logs(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; pod output:\n%s", what, logs())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitLog("a 403 for the pod's list of configmaps", `STATUS 403 {"kind":"Status"`)
	out := logs()
	for _, want := range []string{"token", "ca.crt", "namespace", "NAMESPACE " + ns, "-----BEGIN CERTIFICATE-----"} {
		if !strings.Contains(out, want) {
			t.Errorf("pod output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "STATUS 200") {
		t.Fatalf("the default account listed configmaps before any binding:\n%s", out)
	}
	if _, err := c.client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "default-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitLog("the pod lists configmaps once bound to view", `STATUS 200 {"kind":"ConfigMapList"`)
}

// TestAgentPodInClusterClientGo: a client-go program in a pod builds its
// client with rest.InClusterConfig, from the environment the kubelet sets
// (KUBERNETES_SERVICE_HOST=10.43.0.1) and the mounted token and CA, and
// reaches the API server through the service proxy as its service account.
func TestAgentPodInClusterClientGo(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "agent-incluster")
	ctx := context.Background()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "incluster"), "./testdata/incluster")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build incluster: %v\n%s", err, out)
	}
	if _, err := c.client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "greeting"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "default-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := busyboxPod(ns, "client", c.image, "/helper/incluster")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.Volumes = []corev1.Volume{{Name: "helper", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: bin}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "helper", MountPath: "/helper", ReadOnly: true}}
	c.create(t, pod)
	p := c.waitPod(t, ns, "client", 90*time.Second, "finished", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	out := c.logFile(t, p, "main", 0)
	for _, want := range []string{
		"HOST https://10.43.0.1:443\n",
		"USER system:serviceaccount:" + ns + ":default GROUPS system:serviceaccounts,system:serviceaccounts:" + ns + ",system:authenticated\n",
		"LIST ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the program's output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "greeting") || p.Status.Phase != corev1.PodSucceeded {
		t.Errorf("phase %s, want Succeeded with the configmap listed:\n%s", p.Status.Phase, out)
	}
}
