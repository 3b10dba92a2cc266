package integration

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/cli/kubectl"
	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/resourcequota"
)

// TestAdmission drives the admission plugins through client-go and
// kubectl against one shared cluster under Node,RBAC; each scenario works
// in its own namespace.
func TestAdmission(t *testing.T) {
	c := startRBAC(t)
	runMaintControllers(t, c, controllercontext.Options{}, resourcequota.New)
	tests := []struct {
		name string
		fn   func(*testing.T, *cluster)
	}{
		{"ImmortalNamespaces", testImmortalNamespaces},
		{"LimitRangeDefaults", testLimitRangeDefaults},
		{"PodSecurityEnforce", testPodSecurityEnforce},
		{"PodSecurityWarn", testPodSecurityWarn},
		{"ResourceQuotaPods", testResourceQuotaPods},
		{"CertificateAdmission", testCertificateAdmission},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, c)
		})
	}
}

// testImmortalNamespaces: default, kube-system and kube-public may not be
// deleted (upstream's NamespaceLifecycle message), and stay.
func testImmortalNamespaces(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ctx := testCtx(t, 30*time.Second)
	for _, name := range []string{"kube-system", "default", "kube-public"} {
		err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		want := `namespaces "` + name + `" is forbidden: this namespace may not be deleted`
		if !apierrors.IsForbidden(err) || err.Error() != want {
			t.Errorf("delete %s: got %v, want 403 %q", name, err, want)
		}
		ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil || ns.DeletionTimestamp != nil {
			t.Errorf("namespace %s after the refused delete: %v, deletionTimestamp %v", name, err, ns.GetDeletionTimestamp())
		}
	}
}

// testLimitRangeDefaults: a LimitRange's container defaults appear on a
// pod created right after it; a pod above its max is refused with
// upstream's message.
func testLimitRangeDefaults(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ctx := testCtx(t, 30*time.Second)
	ns := newNamespace(t, cs)
	_, err := cs.CoreV1().LimitRanges(ns).Create(ctx, &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "limits"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type:           corev1.LimitTypeContainer,
			Default:        corev1.ResourceList{corev1.ResourceCPU: mustQuantity("500m"), corev1.ResourceMemory: mustQuantity("256Mi")},
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: mustQuantity("100m")},
			Max:            corev1.ResourceList{corev1.ResourceCPU: mustQuantity("1")},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("defaulted"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}
	want := corev1.ResourceRequirements{
		// memory's request comes from its default limit (the LimitRange's
		// own defaulting), cpu's from defaultRequest.
		Requests: corev1.ResourceList{corev1.ResourceCPU: mustQuantity("100m"), corev1.ResourceMemory: mustQuantity("256Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: mustQuantity("500m"), corev1.ResourceMemory: mustQuantity("256Mi")},
	}
	if diff := cmp.Diff(want, pod.Spec.Containers[0].Resources); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	if got, want := pod.Annotations["kubernetes.io/limit-ranger"], "LimitRanger plugin set: cpu, memory request for container c; cpu, memory limit for container c"; got != want {
		t.Errorf("annotation %q, want %q", got, want)
	}
	if pod.Status.QOSClass != corev1.PodQOSBurstable {
		t.Errorf("QoS class %q, want Burstable (from the defaulted resources)", pod.Status.QOSClass)
	}
	big := newPod("big")
	big.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: mustQuantity("2")}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, big, metav1.CreateOptions{})
	if want := `pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2`; !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("pod above max: got %v, want 403 %q", err, want)
	}
}

// privileged is a pod that breaks baseline (and so restricted).
func privileged(name string) *corev1.Pod {
	p := newPod(name)
	p.Spec.HostNetwork = true
	p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	return p
}

func labelNamespace(t *testing.T, cs kubernetes.Interface, ns string, labels map[string]string) {
	t.Helper()
	ctx := testCtx(t, 10*time.Second)
	n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range labels {
		n.Labels[k] = v
	}
	if _, err := cs.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// testPodSecurityEnforce: a restricted namespace refuses a privileged pod
// with 403 naming each violation, and writes nothing.
func testPodSecurityEnforce(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ctx := testCtx(t, 30*time.Second)
	ns := newNamespace(t, cs)
	labelNamespace(t, cs, ns, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	eventually(t, 10*time.Second, "the restricted label is enforced", func() (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, privileged("priv"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsForbidden(err), nil
	})
	_, err := cs.CoreV1().Pods(ns).Create(ctx, privileged("priv"), metav1.CreateOptions{})
	want := `pods "priv" is forbidden: violates PodSecurity "restricted:latest": host namespaces (hostNetwork=true), privileged (container "c" must not set securityContext.privileged=true), allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("privileged pod: got %v\nwant 403 %s", err, want)
	}
	if _, found := etcdGetQuiet(t, c, "/registry/pods/"+ns+"/priv"); found {
		t.Errorf("the refused pod is in etcd")
	}
}

// etcdGetQuiet says whether etcd holds key.
func etcdGetQuiet(t *testing.T, c *cluster, key string) ([]byte, bool) {
	v, _, found := etcdGet(t, c, key)
	return v, found
}

// warnings collects the Warning headers client-go sees.
type warnings struct {
	mu  sync.Mutex
	got []string
}

func (w *warnings) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, text)
}

// testPodSecurityWarn: a warn label admits the pod and tells client-go
// and kubectl why it would be refused.
func testPodSecurityWarn(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ctx := testCtx(t, 30*time.Second)
	ns := newNamespace(t, cs)
	labelNamespace(t, cs, ns, map[string]string{"pod-security.kubernetes.io/warn": "baseline", "pod-security.kubernetes.io/warn-version": "v1.37"})
	cfg := rest.CopyConfig(c.Config)
	w := &warnings{}
	cfg.WarningHandler = w
	wc := kubernetes.NewForConfigOrDie(cfg)
	want := `would violate PodSecurity "baseline:v1.37": host namespaces (hostNetwork=true), privileged (container "c" must not set securityContext.privileged=true)`
	eventually(t, 10*time.Second, "the warn label is seen", func() (bool, error) {
		w.mu.Lock()
		w.got = nil
		w.mu.Unlock()
		_, err := wc.CoreV1().Pods(ns).Create(ctx, privileged("priv"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		w.mu.Lock()
		defer w.mu.Unlock()
		return err == nil && len(w.got) > 0, err
	})
	w.mu.Lock()
	w.got = nil
	w.mu.Unlock()
	if _, err := wc.CoreV1().Pods(ns).Create(ctx, privileged("priv"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a warn-only namespace refused the pod: %v", err)
	}
	w.mu.Lock()
	if diff := cmp.Diff([]string{want}, w.got); diff != "" {
		t.Errorf("client-go warnings (-want +got):\n%s", diff)
	}
	w.mu.Unlock()

	manifest := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"priv2","namespace":"` + ns + `"},"spec":{"hostNetwork":true,"containers":[{"name":"c","image":"busybox","securityContext":{"privileged":true}}]}}`
	file := filepath.Join(t.TempDir(), "pod.json")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr := kubectlRun(t, c.Kubeconfig(), "create", "-f", file)
	if !strings.Contains(stderr, "Warning: "+want) {
		t.Errorf("kubectl stderr %q does not carry the warning %q", stderr, want)
	}
}

// kubectlRun runs the embedded kubectl, failing the test on an error, and
// returns its stdout and stderr.
func kubectlRun(t *testing.T, kubeconfig string, args ...string) (string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	all := append([]string{"--kubeconfig", kubeconfig, "--cache-dir", t.TempDir()}, args...)
	if err := kubectl.New(all, streams).Execute(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), errOut.String()
}

// testResourceQuotaPods: a quota of two pods admits two and refuses the
// third with upstream's message; status.used says 2, and goes back to 1
// once a pod is deleted (the resource-quota controller).
func testResourceQuotaPods(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ctx := testCtx(t, 60*time.Second)
	ns := newNamespace(t, cs)
	_, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "two-pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: mustQuantity("2"), corev1.ResourceConfigMaps: mustQuantity("10")}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	used := func() (pods, configmaps int64, measured bool) {
		q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "two-pods", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p, ok1 := q.Status.Used[corev1.ResourcePods]
		cm, ok2 := q.Status.Used[corev1.ResourceConfigMaps]
		return p.Value(), cm.Value(), ok1 && ok2 && q.Status.Hard != nil
	}
	eventually(t, 20*time.Second, "the controller measures the quota", func() (bool, error) {
		_, _, ok := used()
		return ok, nil
	})
	for _, name := range []string{"one", "two"} {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, newPod(name), metav1.CreateOptions{}); err != nil {
			t.Fatalf("pod %s within the quota: %v", name, err)
		}
	}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, newPod("three"), metav1.CreateOptions{})
	want := `pods "three" is forbidden: exceeded quota: two-pods, requested: pods=1, used: pods=2, limited: pods=2`
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("third pod: got %v\nwant 403 %s", err, want)
	}
	if pods, _, _ := used(); pods != 2 {
		t.Errorf("status.used pods=%d, want 2", pods)
	}
	// kube-root-ca.crt is not published here (no controller): one ConfigMap
	// counted by the controller's recount.
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "one", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the deleted pod's charge is released", func() (bool, error) {
		pods, cms, _ := used()
		return pods == 1 && cms == 1, nil
	})
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("three"), metav1.CreateOptions{}); err != nil {
		t.Errorf("a pod in the freed place: %v", err)
	}
}

// csrPEM is a certificate request for CN x in the groups orgs.
func csrPEM(t *testing.T, orgs ...string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "x", Organization: orgs}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// testCertificateAdmission: a client certificate for system:masters is
// refused (CertificateSubjectRestriction); approving needs "approve" on
// the signer, not only update on the approval subresource
// (CertificateApproval).
func testCertificateAdmission(t *testing.T, c *cluster) {
	admin := c.Clientset()
	ctx := testCtx(t, 30*time.Second)
	_, err := admin.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "adm-masters"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: csrPEM(t, "system:masters"), SignerName: certificatesv1.KubeAPIServerClientSignerName,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}},
	}, metav1.CreateOptions{})
	if want := `certificatesigningrequests.certificates.k8s.io "adm-masters" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed`; !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("system:masters CSR: got %v, want 403 %q", err, want)
	}

	csr, err := admin.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "adm-example"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: csrPEM(t, "devs"), SignerName: "example.com/widgets",
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	role := func(name string, rules ...rbacv1.PolicyRule) {
		if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "adm-approver"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	role("adm-approval-subresource", rbacv1.PolicyRule{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests/approval"}, Verbs: []string{"update"}})
	approver := as(t, c, "adm-approver")
	approve := func() error {
		next := csr.DeepCopy()
		next.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test"}}
		_, err := approver.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, next, metav1.UpdateOptions{})
		return err
	}
	want := `certificatesigningrequests.certificates.k8s.io "adm-example" is forbidden: user not permitted to approve requests with signerName "example.com/widgets"`
	// RBAC sees the new binding through its informers, a moment later:
	// until then the request is refused before admission.
	eventually(t, 10*time.Second, "admission refuses the approval", func() (bool, error) {
		err := approve()
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), `cannot update resource "certificatesigningrequests/approval"`) {
			return false, err
		}
		if !apierrors.IsForbidden(err) || err.Error() != want {
			t.Fatalf("approval without approve on the signer: got %v, want 403 %q", err, want)
		}
		return true, nil
	})
	role("adm-approve-example", rbacv1.PolicyRule{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"}, ResourceNames: []string{"example.com/*"}, Verbs: []string{"approve"}})
	eventually(t, 10*time.Second, "approval allowed by approve on example.com/*", func() (bool, error) {
		err := approve()
		if apierrors.IsForbidden(err) {
			return false, nil
		}
		return err == nil, err
	})
}
