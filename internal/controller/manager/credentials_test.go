package manager_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/apiserver/authz/bootstrappolicy"
	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/manager"
	"github.com/skiff-sh/skiff/internal/pki"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// whoami is a controller that asks, at build time, who its client is.
type whoami struct {
	mu    sync.Mutex
	users map[string]string
}

func (w *whoami) init(name string) controllercontext.InitFunc {
	return func(ctx context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
		r, err := cc.Client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		w.mu.Lock()
		w.users[name] = r.Status.UserInfo.Username
		w.mu.Unlock()
		return nil, nil // disabled by its own choice
	}
}

// TestServiceAccountCredentials runs the manager as `skiff server` does:
// under RBAC with the bootstrap policy, as system:kube-controller-manager,
// with --use-service-account-credentials. Each controller's client is its
// own kube-system service account (created on demand), the tokens
// controller keeps the manager's identity, the deployment and replicaset
// controllers do their work with only their roles, and a deleted account
// is recreated with a fresh token at the next 401.
func TestServiceAccountCredentials(t *testing.T) {
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) {
		cfg.AuthorizationModes = kubeapiserver.DefaultAuthorizationModes
		cfg.AllowPodsWithoutServiceAccount = false // as skiff server
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := c.Clientset()
	p, err := bootstrappolicy.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := bootstrappolicy.Reconcile(ctx, admin, p); err != nil {
		t.Fatal(err)
	}
	cert, key, err := c.PKI.IssueClient(pki.ControllerManagerUser, nil, pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cmConfig := c.PKI.ClientRESTConfig(c.Config.Host, cert, key)

	w := &whoami{users: map[string]string{}}
	funcs := manager.Controllers()
	for _, name := range []string{"csrsigning", "serviceaccount-token"} {
		funcs[name] = w.init(name)
	}
	startManager(t, cmConfig, manager.Options{
		InitFuncs:                    funcs,
		Controllers:                  manager.Selection{"deployment", "replicaset", "csrsigning", "serviceaccount-token"},
		UseServiceAccountCredentials: true,
		Controller:                   manager.DefaultControllerOptions(),
	})

	const ns = "sa-creds"
	newNamespace(t, admin, ns)
	if _, err := admin.AppsV1().Deployments(ns).Create(ctx, deploymentOf("web", 2, "nginx:1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No serviceaccount controller runs here: the namespace has no
	// "default" account, so the ReplicaSet's pods are refused (upstream's
	// ServiceAccount admission) until it is created; the controller's
	// retry then succeeds.
	const refusal = `error looking up service account sa-creds/default: serviceaccount "default" not found`
	for refused := false; !refused; time.Sleep(50 * time.Millisecond) {
		if ctx.Err() != nil {
			t.Fatal("the ReplicaSet never reported the missing service account")
		}
		rss, err := admin.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, rs := range rss.Items {
			for _, c := range rs.Status.Conditions {
				refused = refused || (c.Type == appsv1.ReplicaSetReplicaFailure && strings.Contains(c.Message, refusal))
			}
		}
	}
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPods(t, admin, ns, 2)

	w.mu.Lock()
	got := w.users
	w.mu.Unlock()
	want := map[string]string{
		"csrsigning":           "system:serviceaccount:kube-system:certificate-controller",
		"serviceaccount-token": pki.ControllerManagerUser,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("controllers' users (-want +got):\n%s", d)
	}
	for _, sa := range []string{"deployment-controller", "replicaset-controller", "certificate-controller"} {
		if _, err := admin.CoreV1().ServiceAccounts("kube-system").Get(ctx, sa, metav1.GetOptions{}); err != nil {
			t.Errorf("service account kube-system/%s: %v", sa, err)
		}
	}
	pods, err := admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("pods: %v", err)
	}

	// A deleted account invalidates its token; the next request's 401 makes
	// the manager recreate the account and ask for a new token.
	if err := admin.CoreV1().ServiceAccounts("kube-system").Delete(ctx, "replicaset-controller", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := admin.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Replicas = new(int32(4))
		_, err = admin.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	waitPods(t, admin, ns, 4)
	if _, err := admin.CoreV1().ServiceAccounts("kube-system").Get(ctx, "replicaset-controller", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Error("kube-system/replicaset-controller was not recreated")
	}
}

// waitPods waits until ns has n live pods.
func waitPods(t *testing.T, client kubernetes.Interface, ns string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for len(livePods(t, client, ns)) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d live pods after 60s, want %d", ns, len(livePods(t, client, ns)), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestEveryControllerHasAnAccountDecision(t *testing.T) {
	for _, name := range manager.Names(manager.Controllers()) {
		if _, ok := manager.ServiceAccountName(name); !ok && name != "serviceaccount-token" {
			t.Errorf("controller %s has no service account (add it to serviceAccounts in credentials.go)", name)
		}
	}
}
