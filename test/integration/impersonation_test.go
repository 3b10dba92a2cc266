package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/internal/pki"
)

// impersonating is a client with a certificate for user that impersonates
// as imp.
func impersonating(t *testing.T, c *cluster, user string, imp rest.ImpersonationConfig) kubernetes.Interface {
	t.Helper()
	cert, key, err := c.PKI.IssueClient(user, nil, pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.PKI.ClientRESTConfig(c.Config.Host, cert, key)
	cfg.Impersonate = imp
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func grantClusterRole(t *testing.T, admin kubernetes.Interface, name, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := testCtx(t, 10*time.Second)
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestImpersonation: the Impersonate-* headers need the impersonate verbs
// (legacy `impersonate`, or upstream v1.37's constrained
// `impersonate:<mode>` plus `impersonate-on:<mode>:<verb>`); the request then
// acts as the impersonated user, and refusals are worded as upstream.
func TestImpersonation(t *testing.T) {
	c := startRBAC(t)
	admin := c.Clientset()
	ctx := testCtx(t, 90*time.Second)
	ns := newNamespace(t, admin)
	bindRole(t, admin, ns, "bob-view", "view", "bob")

	// alice may impersonate user bob, group devs, uid 42 and the extra
	// scopes=a (legacy verb); carol may impersonate any user under the
	// constrained user-info mode, but only for listing pods.
	grantClusterRole(t, admin, "impersonate-bob", "alice",
		rbacv1.PolicyRule{Verbs: []string{"impersonate"}, APIGroups: []string{""}, Resources: []string{"users"}, ResourceNames: []string{"bob"}},
		rbacv1.PolicyRule{Verbs: []string{"impersonate"}, APIGroups: []string{""}, Resources: []string{"groups"}, ResourceNames: []string{"devs"}},
		rbacv1.PolicyRule{Verbs: []string{"impersonate"}, APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{"builder"}},
		rbacv1.PolicyRule{Verbs: []string{"impersonate"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"uids"}, ResourceNames: []string{"42"}},
		rbacv1.PolicyRule{Verbs: []string{"impersonate"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"userextras/scopes"}, ResourceNames: []string{"a"}},
	)
	grantClusterRole(t, admin, "impersonate-user-info", "carol",
		rbacv1.PolicyRule{Verbs: []string{"impersonate:user-info"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"users"}},
		rbacv1.PolicyRule{Verbs: []string{"impersonate-on:user-info:list"}, APIGroups: []string{""}, Resources: []string{"pods"}},
	)
	bindRole(t, admin, ns, "builder-edit", "edit", "system:serviceaccount:"+ns+":builder")

	listPods := func(cs kubernetes.Interface) error {
		_, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err
	}
	// RBAC reads bindings from the watch cache: wait until alice's is seen.
	eventually(t, 10*time.Second, "alice impersonates bob", func() (bool, error) {
		return listPods(impersonating(t, c, "alice", rest.ImpersonationConfig{UserName: "bob"})) == nil, nil
	})

	forbidden := []struct {
		name string
		user string
		imp  rest.ImpersonationConfig
		do   func(kubernetes.Interface) error
		want string
	}{{
		name: "no permission at all: the first mode's refusal",
		user: "mallory", imp: rest.ImpersonationConfig{UserName: "bob"}, do: listPods,
		want: `pods is forbidden: User "mallory" cannot impersonate-on:user-info:list resource "pods" in API group "" in the namespace "` + ns + `"`,
	}, {
		name: "a user alice may not become",
		user: "alice", imp: rest.ImpersonationConfig{UserName: "eve"}, do: listPods,
		want: `pods is forbidden: User "alice" cannot impersonate-on:user-info:list resource "pods" in API group "" in the namespace "` + ns + `"`,
	}, {
		name: "carol may list as anyone, but not create",
		user: "carol", imp: rest.ImpersonationConfig{UserName: "bob"},
		do: func(cs kubernetes.Interface) error {
			_, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
			return err
		},
		want: `configmaps is forbidden: User "carol" cannot impersonate-on:user-info:list resource "configmaps" in API group "" in the namespace "` + ns + `"`,
	}, {
		name: "carol may not add system:masters",
		user: "carol", imp: rest.ImpersonationConfig{UserName: "bob", Groups: []string{"system:masters"}}, do: listPods,
		want: `groups.authentication.k8s.io "system:masters" is forbidden: User "carol" cannot impersonate:user-info resource "groups" in API group "authentication.k8s.io" at the cluster scope: impersonating the system:masters group is not allowed`,
	}, {
		name: "the impersonated user's own permissions apply",
		user: "alice", imp: rest.ImpersonationConfig{UserName: "bob"},
		do: func(cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			return err
		},
		want: `secrets is forbidden: User "bob" cannot list resource "secrets" in API group "" in the namespace "` + ns + `"`,
	}}
	for _, tc := range forbidden {
		t.Run(tc.name, func(t *testing.T) {
			wantForbidden(t, tc.do(impersonating(t, c, tc.user, tc.imp)), tc.want)
		})
	}

	t.Run("groups, uid and extra without a user are 400", func(t *testing.T) {
		cs := impersonating(t, c, "alice", rest.ImpersonationConfig{Groups: []string{"devs"}})
		err := listPods(cs)
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "without impersonating a user name") {
			t.Errorf("error = %v, want 400 ... without impersonating a user name", err)
		}
	})

	// What the impersonated user is: the server's answer to
	// SelfSubjectRulesReview and SelfSubjectAccessReview is the
	// impersonated user's.
	allowed := []struct {
		name string
		user string
		imp  rest.ImpersonationConfig
		// verb and resource the impersonated user may do, and one it may not.
		may, mayNot string
	}{
		{name: "legacy: user, group, uid and extra", user: "alice",
			imp: rest.ImpersonationConfig{UserName: "bob", UID: "42", Groups: []string{"devs"}, Extra: map[string][]string{"scopes": {"a"}}},
			may: "list pods", mayNot: "create pods"},
		{name: "legacy: a service account gets its groups", user: "alice",
			imp: rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":builder"},
			may: "create pods", mayNot: "create roles"},
		{name: "constrained user-info", user: "carol", imp: rest.ImpersonationConfig{UserName: "bob"}, may: "list pods"},
	}
	for _, tc := range allowed {
		t.Run(tc.name, func(t *testing.T) {
			cs := impersonating(t, c, tc.user, tc.imp)
			if err := listPods(cs); err != nil {
				t.Fatalf("list pods: %v", err)
			}
			// carol may only list pods, so SSAR (a create) is out for her.
			if tc.mayNot == "" {
				return
			}
			for verbResource, want := range map[string]bool{tc.may: true, tc.mayNot: false} {
				vr := strings.Fields(verbResource)
				r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
					ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: vr[0], Resource: vr[1], Group: map[string]string{"roles": "rbac.authorization.k8s.io"}[vr[1]]}}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if r.Status.Allowed != want {
					t.Errorf("%s as %s: allowed = %v, want %v (%s)", verbResource, tc.imp.UserName, r.Status.Allowed, want, r.Status.Reason)
				}
			}
		})
	}

	t.Run("kubectl --as", func(t *testing.T) {
		kubeconfig := c.Kubeconfig() // system:admin, in system:masters
		if out := kubectlAs(t, kubeconfig, "auth", "can-i", "list", "pods", "-n", ns, "--as", "bob"); strings.TrimSpace(out) != "yes" {
			t.Errorf("can-i list pods --as bob = %q, want yes", out)
		}
		if out := kubectlAs(t, kubeconfig, "auth", "can-i", "create", "pods", "-n", ns, "--as", "system:serviceaccount:"+ns+":builder"); strings.TrimSpace(out) != "yes" {
			t.Errorf("can-i create pods --as builder = %q, want yes", out)
		}
		list := kubectlAs(t, kubeconfig, "auth", "can-i", "--list", "-n", ns, "--as", "bob")
		if !containsLine(list, "pods [] [] [get list watch]") || strings.Contains(list, "secrets ") || containsLine(list, "*.* [] [] [*]") {
			t.Errorf("can-i --list --as bob:\n%s", list)
		}
		// The answer is bob's, not the admin's: the admin may list secrets.
		r, err := impersonating(t, c, "alice", rest.ImpersonationConfig{UserName: "bob"}).AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: "secrets"}}}, metav1.CreateOptions{})
		if err != nil || r.Status.Allowed {
			t.Errorf("bob list secrets: %+v, %v; want not allowed", r.Status, err)
		}
		out := kubectlAs(t, kubeconfig, "get", "pods", "-n", ns, "--as", "bob", "-o", "name")
		if diff := cmp.Diff("", strings.TrimSpace(out)); diff != "" {
			t.Errorf("kubectl get pods --as bob (-want +got):\n%s", diff)
		}
	})
}
