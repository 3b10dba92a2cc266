package integration

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/clock"

	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/apiserver/authz/bootstrappolicy"
	"github.com/skiff-sh/skiff/internal/cli/kubectl"
	"github.com/skiff-sh/skiff/internal/controller/clusterroleaggregation"
	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/pki"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// startRBAC starts a cluster authorizing with Node,RBAC, its bootstrap
// policy reconciled and the aggregation controller filling admin, edit and
// view, as `skiff server` has them.
func startRBAC(t *testing.T) *cluster {
	t.Helper()
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) {
		cfg.AuthorizationModes = kubeapiserver.DefaultAuthorizationModes
	}})
	ctx := testCtx(t, 60*time.Second)
	admin := c.Clientset()
	p, err := bootstrappolicy.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := bootstrappolicy.Reconcile(ctx, admin, p); err != nil {
		t.Fatalf("reconcile bootstrap policy: %v", err)
	}
	f := informers.NewSharedInformerFactory(admin, 0)
	ctrl, err := clusterroleaggregation.New(ctx, controllercontext.Context{Client: admin, Informers: f, Clock: clock.RealClock{}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { stop(); <-done })
	f.Start(runCtx.Done())
	go func() { defer close(done); _ = ctrl.Start(runCtx) }()
	eventually(t, 30*time.Second, "view aggregated", func() (bool, error) {
		r, err := admin.RbacV1().ClusterRoles().Get(ctx, "view", metav1.GetOptions{})
		return err == nil && len(r.Rules) > 0, err
	})
	return c
}

// as is a client with a certificate for user in groups, from the
// cluster's CA.
func as(t *testing.T, c *cluster, user string, groups ...string) kubernetes.Interface {
	t.Helper()
	cert, key, err := c.PKI.IssueClient(user, groups, pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(c.PKI.ClientRESTConfig(c.Config.Host, cert, key))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func bindRole(t *testing.T, admin kubernetes.Interface, ns, name, clusterRole, user string) {
	t.Helper()
	_, err := admin.RbacV1().RoleBindings(ns).Create(testCtx(t, 10*time.Second), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: user}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// wantForbidden checks err is a 403 with exactly msg, as upstream words it.
func wantForbidden(t *testing.T, err error, msg string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Fatalf("error = %v, want 403 Forbidden", err)
	}
	st := err.(apierrors.APIStatus).Status()
	if st.Message != msg {
		t.Errorf("message:\n got %s\nwant %s", st.Message, msg)
	}
	if st.Reason != metav1.StatusReasonForbidden || st.Code != 403 || st.Details == nil {
		t.Errorf("status = %+v, want reason Forbidden, code 403 and details", st)
	}
}

func TestAuthzViewReadsButCannotWrite(t *testing.T) {
	c := startRBAC(t)
	admin := c.Clientset()
	ctx := testCtx(t, 60*time.Second)
	ns := newNamespace(t, admin)
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	viewer := as(t, c, "viewer", "devs")

	_, err := viewer.CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{})
	wantForbidden(t, err, `configmaps "cm" is forbidden: User "viewer" cannot get resource "configmaps" in API group "" in the namespace "`+ns+`"`)

	bindRole(t, admin, ns, "viewer", "view", "viewer")
	eventually(t, 10*time.Second, "viewer reads the configmap", func() (bool, error) {
		_, err := viewer.CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{})
		return err == nil, err
	})
	if _, err := viewer.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("viewer lists pods: %v", err)
	}
	if _, err := viewer.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("viewer lists deployments: %v", err)
	}
	_, err = viewer.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{})
	wantForbidden(t, err, `configmaps is forbidden: User "viewer" cannot create resource "configmaps" in API group "" in the namespace "`+ns+`"`)
	_, err = viewer.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	wantForbidden(t, err, `secrets is forbidden: User "viewer" cannot list resource "secrets" in API group "" in the namespace "`+ns+`"`)
	_, err = viewer.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	wantForbidden(t, err, `pods is forbidden: User "viewer" cannot list resource "pods" in API group "" in the namespace "default"`)
	_, err = viewer.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	wantForbidden(t, err, `nodes is forbidden: User "viewer" cannot list resource "nodes" in API group "" at the cluster scope`)
	err = viewer.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{})
	wantForbidden(t, err, `deployments.apps "web" is forbidden: User "viewer" cannot delete resource "deployments" in API group "apps" in the namespace "`+ns+`"`)
	_, err = viewer.CoreV1().Pods(ns).GetLogs("p", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("viewer reads pods/log: %v, want allowed (NotFound for a missing pod)", err)
	}
	// Nothing was written by the refused create.
	if _, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, "new", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("refused configmap exists: %v", err)
	}
	// Non-resource paths: discovery is for everyone authenticated, /metrics is not.
	if _, err := viewer.Discovery().ServerGroups(); err != nil {
		t.Errorf("discovery: %v", err)
	}
	res := viewer.CoreV1().RESTClient().Get().AbsPath("/metrics").Do(ctx)
	var code int
	res.StatusCode(&code)
	body, _ := res.Raw()
	if code != 403 || !strings.Contains(string(body), `forbidden: User \"viewer\" cannot get path \"/metrics\"`) {
		t.Errorf("GET /metrics as viewer: %d %s", code, body)
	}
}

func TestAuthzEditCannotReadRBAC(t *testing.T) {
	c := startRBAC(t)
	admin := c.Clientset()
	ctx := testCtx(t, 60*time.Second)
	ns := newNamespace(t, admin)
	bindRole(t, admin, ns, "editor", "edit", "editor")
	editor := as(t, c, "editor")
	eventually(t, 10*time.Second, "editor creates a deployment", func() (bool, error) {
		one := int32(1)
		_, err := editor.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}},
		}, metav1.CreateOptions{})
		return err == nil, err
	})
	if _, err := editor.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("editor lists secrets: %v", err)
	}
	_, err := editor.RbacV1().Roles(ns).List(ctx, metav1.ListOptions{})
	wantForbidden(t, err, `roles.rbac.authorization.k8s.io is forbidden: User "editor" cannot list resource "roles" in API group "rbac.authorization.k8s.io" in the namespace "`+ns+`"`)
	_, err = editor.RbacV1().RoleBindings(ns).Get(ctx, "editor", metav1.GetOptions{})
	wantForbidden(t, err, `rolebindings.rbac.authorization.k8s.io "editor" is forbidden: User "editor" cannot get resource "rolebindings" in API group "rbac.authorization.k8s.io" in the namespace "`+ns+`"`)
	_, err = editor.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
	wantForbidden(t, err, `clusterroles.rbac.authorization.k8s.io is forbidden: User "editor" cannot list resource "clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope`)
	_, err = editor.AppsV1().Deployments(ns).UpdateScale(ctx, "web", nil, metav1.UpdateOptions{})
	if apierrors.IsForbidden(err) {
		t.Errorf("editor may not scale: %v", err)
	}
}

func TestAuthzEscalation(t *testing.T) {
	c := startRBAC(t)
	admin := c.Clientset()
	ctx := testCtx(t, 60*time.Second)
	ns := newNamespace(t, admin)
	// A namespace admin may write roles and bindings, but only grant what
	// it holds itself.
	bindRole(t, admin, ns, "ns-admin", "admin", "lead")
	lead := as(t, c, "lead")
	eventually(t, 10*time.Second, "lead creates a role it holds", func() (bool, error) {
		_, err := lead.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
			Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}, metav1.CreateOptions{})
		return err == nil, err
	})
	_, err := lead.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "nodes"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"nodes"}}}}, metav1.CreateOptions{})
	wantForbidden(t, err, `roles.rbac.authorization.k8s.io "nodes" is forbidden: user "lead" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}`)
	// Binding admin in its namespace is fine; binding cluster-admin is not.
	if _, err := lead.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "helper"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "helper"}}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("lead binds edit: %v", err)
	}
	_, err = lead.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "root"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "lead"}}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `is attempting to grant RBAC permissions not currently held`) {
		t.Errorf("binding cluster-admin: %v, want 403 naming the missing permissions", err)
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Get(ctx, "root", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("refused binding exists: %v", err)
	}
}

func TestAuthzNode(t *testing.T) {
	c := startRBAC(t)
	admin := c.Clientset()
	ctx := testCtx(t, 60*time.Second)
	ns := newNamespace(t, admin)
	for _, n := range []string{"n1", "n2"} {
		if _, err := admin.CoreV1().Nodes().Create(ctx, newNode(n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s-" + n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := newPod("p-" + n)
		pod.Spec.NodeName = n
		pod.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s-" + n}}}}
		if _, err := admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kubelet := as(t, c, "system:node:n1", "system:nodes")
	eventually(t, 10*time.Second, "n1 reads its pod's secret", func() (bool, error) {
		_, err := kubelet.CoreV1().Secrets(ns).Get(ctx, "s-n1", metav1.GetOptions{})
		return err == nil, err
	})
	_, err := kubelet.CoreV1().Secrets(ns).Get(ctx, "s-n2", metav1.GetOptions{})
	wantForbidden(t, err, `secrets "s-n2" is forbidden: User "system:node:n1" cannot get resource "secrets" in API group "" in the namespace "`+ns+`": no relationship found between node 'n1' and this object`)
	_, err = kubelet.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("n1 lists secrets: %v, want 403", err)
	}
	pods, err := kubelet.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Name != "p-n1" {
		t.Errorf("n1 lists its pods: %v, %v", pods, err)
	}
	if _, err := kubelet.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); err != nil {
		t.Errorf("n1 reads itself: %v", err)
	}
	// Upstream's Node authorizer lets a node read only its own Node; Skiff's
	// agents route pods to the other nodes (host-gw) under the node's
	// identity, so skiff:node-network grants reading Nodes through RBAC, as
	// flannel's role does (docs/architecture.md, Authorization).
	if _, err := kubelet.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{}); err != nil {
		t.Errorf("n1 reads n2 (skiff:node-network): %v", err)
	}
	// Status: its own pod yes, another node's no (NodeRestriction).
	own, _ := admin.CoreV1().Pods(ns).Get(ctx, "p-n1", metav1.GetOptions{})
	own.Status.Phase = corev1.PodRunning
	if _, err := kubelet.CoreV1().Pods(ns).UpdateStatus(ctx, own, metav1.UpdateOptions{}); err != nil {
		t.Errorf("n1 updates its pod's status: %v", err)
	}
	other, _ := admin.CoreV1().Pods(ns).Get(ctx, "p-n2", metav1.GetOptions{})
	other.Status.Phase = corev1.PodFailed
	_, err = kubelet.CoreV1().Pods(ns).UpdateStatus(ctx, other, metav1.UpdateOptions{})
	wantForbidden(t, err, `pods "p-n2" is forbidden: node "n1" can only update pod status for pods with spec.nodeName set to itself`)
	if got, _ := admin.CoreV1().Pods(ns).Get(ctx, "p-n2", metav1.GetOptions{}); got.Status.Phase == corev1.PodFailed {
		t.Error("refused status update was written")
	}
	n2, _ := admin.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{})
	n2.Labels = map[string]string{"x": "y"}
	_, err = kubelet.CoreV1().Nodes().Update(ctx, n2, metav1.UpdateOptions{})
	wantForbidden(t, err, `nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"`)
	// Its own Node: the kubelet's labels yes; labels that would steer
	// workloads to it, and its taints, no (NodeRestriction).
	n1, err := kubelet.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n1.Labels = map[string]string{"node.kubernetes.io/pool": "a", "topology.kubernetes.io/zone": "z1"}
	if n1, err = kubelet.CoreV1().Nodes().Update(ctx, n1, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("n1 sets the kubelet's labels: %v", err)
	}
	steer := n1.DeepCopy()
	steer.Labels["node-restriction.kubernetes.io/pci"] = "true"
	_, err = kubelet.CoreV1().Nodes().Update(ctx, steer, metav1.UpdateOptions{})
	wantForbidden(t, err, `nodes "n1" is forbidden: is not allowed to modify labels: node-restriction.kubernetes.io/pci`)
	untaint := n1.DeepCopy()
	untaint.Spec.Taints = append(untaint.Spec.Taints, corev1.Taint{Key: "mine", Effect: corev1.TaintEffectNoSchedule})
	_, err = kubelet.CoreV1().Nodes().Update(ctx, untaint, metav1.UpdateOptions{})
	wantForbidden(t, err, `nodes "n1" is forbidden: node "n1" is not allowed to modify taints`)
}

func TestAuthzReviews(t *testing.T) {
	c := startRBAC(t)
	admin := c.Clientset()
	ctx := testCtx(t, 60*time.Second)
	ns := newNamespace(t, admin)
	bindRole(t, admin, ns, "viewer", "view", "viewer")
	viewer := as(t, c, "viewer")
	ssar := func(verb, resource string) authorizationv1.SubjectAccessReviewStatus {
		t.Helper()
		r, err := viewer.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: resource}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	eventually(t, 10*time.Second, "viewer may list pods", func() (bool, error) { return ssar("list", "pods").Allowed, nil })
	if st := ssar("create", "pods"); st.Allowed || st.Denied {
		t.Errorf("viewer create pods: %+v, want neither allowed nor denied", st)
	}
	rules, err := viewer.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rules.Status.ResourceRules {
		if contains(r.Resources, "pods") && contains(r.Verbs, "list") && !contains(r.Verbs, "create") {
			found = true
		}
		if contains(r.Verbs, "*") && contains(r.Resources, "*") {
			t.Errorf("viewer has a wildcard rule: %+v", r)
		}
	}
	if !found {
		t.Errorf("rules review lacks list pods: %+v", rules.Status.ResourceRules)
	}
	// The admin asks about others.
	sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "viewer", ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "pods"}}}, metav1.CreateOptions{})
	if err != nil || !sar.Status.Allowed || !strings.Contains(sar.Status.Reason, `RoleBinding "viewer/`+ns+`" of ClusterRole "view" to User "viewer"`) {
		t.Errorf("SubjectAccessReview: %+v, %v", sar, err)
	}
	lsar, err := admin.AuthorizationV1().LocalSubjectAccessReviews(ns).Create(ctx, &authorizationv1.LocalSubjectAccessReview{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns},
		Spec:       authorizationv1.SubjectAccessReviewSpec{User: "viewer", ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "delete", Resource: "pods"}}}, metav1.CreateOptions{})
	if err != nil || lsar.Status.Allowed {
		t.Errorf("LocalSubjectAccessReview delete: %+v, %v, want not allowed", lsar.Status, err)
	}
	// The viewer may not ask about others.
	_, err = viewer.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "admin", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods"}}}, metav1.CreateOptions{})
	wantForbidden(t, err, `subjectaccessreviews.authorization.k8s.io is forbidden: User "viewer" cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope`)

	// kubectl auth can-i, as the viewer.
	kubeconfig := viewerKubeconfig(t, c, "viewer")
	if out := kubectlAs(t, kubeconfig, "auth", "can-i", "list", "pods", "-n", ns); strings.TrimSpace(out) != "yes" {
		t.Errorf("can-i list pods = %q, want yes", out)
	}
	list := kubectlAs(t, kubeconfig, "auth", "can-i", "--list", "-n", ns)
	for _, want := range []string{
		"selfsubjectaccessreviews.authorization.k8s.io   []                  []               [create]",
		"pods                                            []                  []               [get list watch]",
	} {
		if !containsLine(list, want) {
			t.Errorf("can-i --list lacks %q:\n%s", want, list)
		}
	}
	if strings.Contains(list, "secrets ") {
		t.Errorf("can-i --list shows secrets for a viewer:\n%s", list)
	}
}

// containsLine reports whether some line of text equals want once runs of
// spaces are squeezed (kubectl pads its columns to the widest cell).
func containsLine(text, want string) bool {
	squeeze := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	for _, l := range strings.Split(text, "\n") {
		if squeeze(l) == squeeze(want) {
			return true
		}
	}
	return false
}

func viewerKubeconfig(t *testing.T, c *cluster, user string) string {
	t.Helper()
	cert, key, err := c.PKI.IssueClient(user, nil, pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["skiff"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.PKI.CAPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["skiff"] = &clientcmdapi.Context{Cluster: "skiff", AuthInfo: user}
	cfg.CurrentContext = "skiff"
	path := filepath.Join(t.TempDir(), user+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func kubectlAs(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	all := append([]string{"--kubeconfig", kubeconfig, "--cache-dir", t.TempDir()}, args...)
	if err := kubectl.New(all, streams).Execute(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// TestAuthzJoiningAgent: what a joining agent does under Node,RBAC. The
// bootstrap user asks for its certificate and nothing else; the node's
// proxy and network policy read what they program (skiff:node-network).
func TestAuthzJoiningAgent(t *testing.T) {
	c := startRBAC(t)
	ctx := testCtx(t, 60*time.Second)
	boot := as(t, c, "system:bootstrap:abcdef", "system:bootstrappers", "system:bootstrappers:skiff:default-node-token")
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "node-csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    testCSRPEM(t, "system:node:n9"),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
	created, err := boot.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("bootstrap user creates its CSR: %v", err)
	}
	if _, err := boot.CertificatesV1().CertificateSigningRequests().Get(ctx, created.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("bootstrap user reads its CSR: %v", err)
	}
	_, err = boot.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
	wantForbidden(t, err, `secrets is forbidden: User "system:bootstrap:abcdef" cannot list resource "secrets" in API group "" in the namespace "kube-system"`)

	node := as(t, c, "system:node:n9", "system:nodes")
	for what, list := range map[string]func() error{
		"services": func() error { _, err := node.CoreV1().Services("").List(ctx, metav1.ListOptions{}); return err },
		"endpointslices": func() error {
			_, err := node.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
			return err
		},
		"pods":       func() error { _, err := node.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); return err },
		"namespaces": func() error { _, err := node.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); return err },
		"networkpolicies": func() error {
			_, err := node.NetworkingV1().NetworkPolicies("").List(ctx, metav1.ListOptions{})
			return err
		},
	} {
		if err := list(); err != nil {
			t.Errorf("node lists %s: %v", what, err)
		}
	}
	_, err = node.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("node lists every configmap: %v, want 403", err)
	}
}

func testCSRPEM(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}
