package integration

import (
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/skiff-sh/skiff/internal/pki"
)

// TestAuthzCustomResources: RBAC on a custom resource as an operator's
// chart sets it up. The built-in edit and view roles do not cover a new
// CRD's resources; ClusterRoles labelled to aggregate into them (as
// cert-manager's and most charts' are) extend them, and then an editor
// writes and a viewer only reads, with upstream's 403 messages naming the
// resource and its group. The status subresource is authorized apart.
func TestAuthzCustomResources(t *testing.T) {
	c := startRBAC(t)
	admin := c.Clientset()
	ctx := testCtx(t, 90*time.Second)
	ns := newNamespace(t, admin)

	ext, err := apiextensionsclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "crontabs.stable.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "stable.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "crontabs", Singular: "crontab", Kind: "CronTab", ShortNames: []string{"ct"}},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec":   {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"cronSpec": {Type: "string"}}},
						"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"phase": {Type: "string"}}},
					},
				}},
			}},
		},
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ext.ApiextensionsV1().CustomResourceDefinitions().Delete(testCtx(t, 10*time.Second), crd.Name, metav1.DeleteOptions{})
	})
	gvr := schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}
	cronTab := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "stable.example.com/v1", "kind": "CronTab",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"cronSpec": "* * * * */5"},
		}}
	}
	adminDyn := dynamic.NewForConfigOrDie(c.Config)
	eventually(t, 10*time.Second, "crontabs served", func() (bool, error) {
		_, err := adminDyn.Resource(gvr).Namespace(ns).Create(ctx, cronTab("first"), metav1.CreateOptions{})
		return err == nil, nil
	})

	dyn := func(user string) dynamic.Interface {
		cert, key, err := c.PKI.IssueClient(user, nil, pki.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return dynamic.NewForConfigOrDie(c.PKI.ClientRESTConfig(c.Config.Host, cert, key))
	}
	editor, viewer := dyn("alice"), dyn("bob")
	bindRole(t, admin, ns, "alice-edit", "edit", "alice")
	bindRole(t, admin, ns, "bob-view", "view", "bob")

	// edit and view know nothing of crontabs yet.
	_, err = editor.Resource(gvr).Namespace(ns).Create(ctx, cronTab("mine"), metav1.CreateOptions{})
	wantForbidden(t, err, `crontabs.stable.example.com is forbidden: User "alice" cannot create resource "crontabs" in API group "stable.example.com" in the namespace "`+ns+`"`)
	_, err = viewer.Resource(gvr).Namespace(ns).Get(ctx, "first", metav1.GetOptions{})
	wantForbidden(t, err, `crontabs.stable.example.com "first" is forbidden: User "bob" cannot get resource "crontabs" in API group "stable.example.com" in the namespace "`+ns+`"`)

	// The chart's aggregated roles.
	for _, r := range []*rbacv1.ClusterRole{{
		ObjectMeta: metav1.ObjectMeta{Name: "crontabs-edit", Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"stable.example.com"}, Resources: []string{"crontabs"}, Verbs: []string{"create", "delete", "get", "list", "patch", "update", "watch"}}},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: "crontabs-view", Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"stable.example.com"}, Resources: []string{"crontabs", "crontabs/status"}, Verbs: []string{"get", "list", "watch"}}},
	}} {
		if _, err := admin.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 20*time.Second, "alice creates a CronTab through edit", func() (bool, error) {
		_, err := editor.Resource(gvr).Namespace(ns).Create(ctx, cronTab("mine"), metav1.CreateOptions{})
		if apierrors.IsForbidden(err) {
			return false, nil
		}
		return err == nil, err
	})
	eventually(t, 20*time.Second, "bob lists CronTabs through view", func() (bool, error) {
		l, err := viewer.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if apierrors.IsForbidden(err) {
			return false, nil
		}
		return err == nil && len(l.Items) == 2, err
	})
	if _, err := viewer.Resource(gvr).Namespace(ns).Get(ctx, "mine", metav1.GetOptions{}, "status"); err != nil {
		t.Errorf("bob reads crontabs/status: %v", err)
	}
	if w, err := viewer.Resource(gvr).Namespace(ns).Watch(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("bob watches crontabs: %v", err)
	} else {
		w.Stop()
	}
	_, err = viewer.Resource(gvr).Namespace(ns).Create(ctx, cronTab("bobs"), metav1.CreateOptions{})
	wantForbidden(t, err, `crontabs.stable.example.com is forbidden: User "bob" cannot create resource "crontabs" in API group "stable.example.com" in the namespace "`+ns+`"`)
	err = viewer.Resource(gvr).Namespace(ns).Delete(ctx, "mine", metav1.DeleteOptions{})
	wantForbidden(t, err, `crontabs.stable.example.com "mine" is forbidden: User "bob" cannot delete resource "crontabs" in API group "stable.example.com" in the namespace "`+ns+`"`)
	_, err = viewer.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{})
	wantForbidden(t, err, `crontabs.stable.example.com is forbidden: User "bob" cannot list resource "crontabs" in API group "stable.example.com" in the namespace "default"`)

	// edit covers crontabs but not crontabs/status: alice's status write
	// is refused, her spec update is not.
	st := cronTab("mine")
	cur, err := editor.Resource(gvr).Namespace(ns).Get(ctx, "mine", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st.SetResourceVersion(cur.GetResourceVersion())
	st.Object["status"] = map[string]any{"phase": "Done"}
	_, err = editor.Resource(gvr).Namespace(ns).UpdateStatus(ctx, st, metav1.UpdateOptions{})
	wantForbidden(t, err, `crontabs.stable.example.com "mine" is forbidden: User "alice" cannot update resource "crontabs/status" in API group "stable.example.com" in the namespace "`+ns+`"`)
	cur.Object["spec"] = map[string]any{"cronSpec": "0 * * * *"}
	if _, err := editor.Resource(gvr).Namespace(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Errorf("alice updates her CronTab: %v", err)
	}
	if err := editor.Resource(gvr).Namespace(ns).Delete(ctx, "mine", metav1.DeleteOptions{}); err != nil {
		t.Errorf("alice deletes her CronTab: %v", err)
	}
}
