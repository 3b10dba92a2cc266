package customresources

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
	kubectltest "github.com/skiff-sh/skiff/internal/testing/kubectl"
)

// kubectlRun runs the embedded kubectl against the cluster: its stdout, or
// stdout and stderr when it fails.
func kubectlRun(t *testing.T, c *testapiserver.Cluster, stdin string, args ...string) (out string, err error) {
	t.Helper()
	stdout, stderr, err := kubectltest.Run(t, c.Kubeconfig(), stdin, args...)
	if err != nil {
		return stdout + stderr, err
	}
	return stdout, nil
}

func mustKubectl(t *testing.T, c *testapiserver.Cluster, stdin string, args ...string) string {
	t.Helper()
	out, err := kubectlRun(t, c, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestCustomResourcesWithKubectl: what a user does with kubectl: apply the
// CRD, wait for it, apply custom resources, read them with their printer
// columns, explain them, scale them, find them in `get all`.
func TestCustomResourcesWithKubectl(t *testing.T) {
	c := testapiserver.Start(t)
	mustKubectl(t, c, cronTabCRD, "apply", "-f", "-")
	// Right after the create, status.conditions may still be null, which
	// kubectl wait refuses (as against upstream); it succeeds once the CRD
	// controller has set them, within a second.
	eventually(t, 5*time.Second, "kubectl wait --for=condition=Established", func() (bool, error) {
		out, err := kubectlRun(t, c, "", "wait", "--for=condition=Established", "--timeout=10s", "crd/crontabs.stable.example.com")
		if err != nil {
			return false, fmt.Errorf("%v: %s", err, out)
		}
		return strings.Contains(out, "condition met"), nil
	})

	cr := `apiVersion: stable.example.com/v1
kind: CronTab
metadata:
  name: my-new-cron-object
  namespace: default
spec:
  cronSpec: "* * * * */5"
  image: my-awesome-cron-image
  replicas: 2
`
	mustKubectl(t, c, cr, "apply", "-f", "-")
	// A second apply with a change goes through the patch path.
	mustKubectl(t, c, strings.Replace(cr, "replicas: 2", "replicas: 3", 1), "apply", "-f", "-")

	out := mustKubectl(t, c, "", "get", "ct", "-n", "default")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("kubectl get ct:\n%s", out)
	}
	if diff := cmp.Diff([]string{"NAME", "SPEC", "REPLICAS", "AGE"}, strings.Fields(lines[0])); diff != "" {
		t.Errorf("header (-want +got):\n%s", diff)
	}
	if f := strings.Fields(lines[1]); len(f) < 8 || f[0] != "my-new-cron-object" || strings.Join(f[1:6], " ") != "* * * * */5" || f[6] != "3" {
		t.Errorf("row: %q", lines[1])
	}

	out = mustKubectl(t, c, "", "get", "all", "-n", "default")
	if !strings.Contains(out, "crontab.stable.example.com/my-new-cron-object") {
		t.Errorf("kubectl get all does not list the CronTab (category all):\n%s", out)
	}

	out = mustKubectl(t, c, "", "explain", "crontabs.spec.replicas")
	for _, want := range []string{"GROUP:      stable.example.com", "KIND:       CronTab", "VERSION:    v1", "FIELD: replicas <integer>"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl explain lacks %q:\n%s", want, out)
		}
	}

	mustKubectl(t, c, "", "scale", "crontab/my-new-cron-object", "-n", "default", "--replicas=7")
	out = mustKubectl(t, c, "", "get", "crontab", "my-new-cron-object", "-n", "default", "-o", "jsonpath={.spec.replicas}")
	if out != "7" {
		t.Errorf("after kubectl scale: spec.replicas = %q, want 7", out)
	}

	// An invalid custom resource: kubectl shows the 422 naming the field.
	out, err := kubectlRun(t, c, strings.Replace(cr, "replicas: 2", "replicas: 20", 1), "apply", "-f", "-")
	if err == nil || !strings.Contains(out, "spec.replicas") {
		t.Errorf("kubectl apply of an invalid CronTab: err %v\n%s", err, out)
	}
	// An unknown field: kubectl's default (--validate=strict) is refused.
	out, err = kubectlRun(t, c, strings.Replace(cr, "replicas: 2", "replicas: 2\n  colour: blue", 1), "apply", "-f", "-")
	if err == nil || !strings.Contains(out, `unknown field "spec.colour"`) {
		t.Errorf("kubectl apply with an unknown field: err %v\n%s", err, out)
	}

	mustKubectl(t, c, "", "delete", "crd", "crontabs.stable.example.com")
	out, _ = kubectlRun(t, c, "", "get", "crontabs", "-A")
	if !strings.Contains(out, "the server doesn't have a resource type") {
		t.Errorf("after deleting the CRD, kubectl get crontabs:\n%s", out)
	}
}

// TestCustomResourceDefinitionBadInput: an invalid CRD is a 422 naming its
// fields, nothing is stored; an oversized custom resource is a 413.
func TestCustomResourceDefinitionBadInput(t *testing.T) {
	c := testapiserver.Start(t)
	ctx := testCtx(t)
	ax := apiextensionsclient.NewForConfigOrDie(c.Config)
	for _, tc := range []struct {
		name   string
		mutate func(*apiextensionsv1.CustomResourceDefinition)
		want   []string
	}{
		{"name not plural.group", func(crd *apiextensionsv1.CustomResourceDefinition) { crd.Name = "crontab.stable.example.com" },
			[]string{"metadata.name"}},
		{"no storage version", func(crd *apiextensionsv1.CustomResourceDefinition) { crd.Spec.Versions[0].Storage = false },
			[]string{"spec.versions"}},
		{"bad scope", func(crd *apiextensionsv1.CustomResourceDefinition) { crd.Spec.Scope = "Galaxy" },
			[]string{"spec.scope"}},
		{"non-structural schema", func(crd *apiextensionsv1.CustomResourceDefinition) {
			spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
			p := spec.Properties["image"]
			p.Type = ""
			spec.Properties["image"] = p
			crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
		}, []string{"spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[image].type"}},
		{"bad CEL", func(crd *apiextensionsv1.CustomResourceDefinition) {
			spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
			spec.XValidations[0].Rule = "self.nope >"
			crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
		}, []string{"spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crd := decodeCRD(t, cronTabCRD)
			tc.mutate(crd)
			_, err := ax.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create: %v, want 422", err)
			}
			seen := map[string]bool{}
			for _, cause := range err.(apierrors.APIStatus).Status().Details.Causes {
				seen[cause.Field] = true
			}
			for _, f := range tc.want {
				if !seen[f] {
					t.Errorf("no cause at %s: %v", f, err)
				}
			}
			if keys := etcdKeys(t, c, "/registry/apiextensions.k8s.io/"); len(keys) != 0 {
				t.Errorf("an invalid CRD was stored: %v", keys)
			}
		})
	}

	createCRD(t, ctx, c, decodeCRD(t, cronTabCRD))
	dyn := dynamic.NewForConfigOrDie(c.Config)
	big := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "stable.example.com/v1", "kind": "CronTab",
		"metadata": map[string]interface{}{"name": "big"},
		"spec":     map[string]interface{}{"cronSpec": "* * * * *", "extra": map[string]interface{}{"blob": strings.Repeat("x", 4<<20)}},
	}}
	_, err := dyn.Resource(cronTabs).Namespace("default").Create(ctx, big, metav1.CreateOptions{})
	if !apierrors.IsRequestEntityTooLargeError(err) {
		t.Errorf("a 4 MiB custom resource: %v, want 413", err)
	}
}

// TestCustomResourceServerSideApply: apply with list-map and set types
// merges by key and tracks owners; a conflicting manager gets 409.
func TestCustomResourceServerSideApply(t *testing.T) {
	c := testapiserver.Start(t)
	ctx := testCtx(t)
	crd := decodeCRD(t, `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Cluster
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
              tags:
                type: array
                x-kubernetes-list-type: set
                items: {type: string}
              owner: {type: string}
`)
	createCRD(t, ctx, c, crd)
	dyn := dynamic.NewForConfigOrDie(c.Config)
	w := dyn.Resource(crdGVR("example.com", "v1", "widgets"))
	apply := func(manager, body string, force bool) (*unstructured.Unstructured, error) {
		return w.Patch(ctx, "w1", types.ApplyYAMLPatchType, []byte(body), metav1.PatchOptions{FieldManager: manager, Force: &force})
	}
	if _, err := apply("alice", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"owner":"alice","ports":[{"name":"http","port":80}],"tags":["a"]}}`, false); err != nil {
		t.Fatalf("alice applies: %v", err)
	}
	got, err := apply("bob", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"ports":[{"name":"https","port":443}],"tags":["b"]}}`, false)
	if err != nil {
		t.Fatalf("bob applies: %v", err)
	}
	ports, _, _ := unstructured.NestedSlice(got.Object, "spec", "ports")
	tags, _, _ := unstructured.NestedStringSlice(got.Object, "spec", "tags")
	wantPorts := []interface{}{
		map[string]interface{}{"name": "http", "port": int64(80)},
		map[string]interface{}{"name": "https", "port": int64(443)},
	}
	if diff := cmp.Diff(wantPorts, ports); diff != "" {
		t.Errorf("ports merged by name (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "b"}, tags); diff != "" {
		t.Errorf("tags merged as a set (-want +got):\n%s", diff)
	}
	var managers []string
	for _, m := range got.GetManagedFields() {
		managers = append(managers, m.Manager)
	}
	if diff := cmp.Diff([]string{"alice", "bob"}, managers); diff != "" {
		t.Errorf("managers (-want +got):\n%s", diff)
	}
	if _, err := apply("bob", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"owner":"bob"}}`, false); !apierrors.IsConflict(err) {
		t.Errorf("bob takes alice's field without force: %v, want 409", err)
	}
	if _, err := apply("bob", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"owner":"bob"}}`, true); err != nil {
		t.Errorf("bob forces: %v", err)
	}
}
