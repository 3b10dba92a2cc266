package customresources

import (
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

const sprocketCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: sprockets.validation.example.com}
spec:
  group: validation.example.com
  scope: Cluster
  names: {plural: sprockets, singular: sprocket, kind: Sprocket, listKind: SprocketList}
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
            x-kubernetes-preserve-unknown-fields: true
            properties:
              foo: {type: string}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [containerPort, protocol]
                items:
                  type: object
                  required: [containerPort, protocol]
                  properties:
                    containerPort: {type: integer, format: int32}
                    protocol: {type: string}
                    name: {type: string}
`

// TestCustomResourceDuplicateFields: duplicate keys in a server-side apply
// configuration of a custom resource whose schema preserves unknown fields
// are reported as upstream's apply does: fieldValidation=Strict refuses
// them with 400 and the YAML decoder's line ("line 9: key \"foo\" already
// set in map", the conformance test "should detect duplicates in a CR when
// preserving unknown fields"), Warn (and no value) applies with a warning
// a duplicate, Ignore applies silently.
func TestCustomResourceDuplicateFields(t *testing.T) {
	c := testapiserver.Start(t)
	ctx := testCtx(t)
	createCRD(t, ctx, c, decodeCRD(t, sprocketCRD))
	sprockets := dynamic.NewForConfigOrDie(c.Config).Resource(crdGVR("validation.example.com", "v1", "sprockets"))
	eventually(t, 10*time.Second, "sprockets served", func() (bool, error) {
		_, err := sprockets.List(ctx, metav1.ListOptions{})
		return err == nil, err
	})
	rc := kubernetes.NewForConfigOrDie(c.Config).Discovery().RESTClient()
	// do sends req and returns its body, its Warning headers' texts and
	// its error.
	do := func(req *rest.Request) ([]byte, []string, error) {
		res := req.Do(ctx)
		body, err := res.Raw()
		var texts []string
		for _, w := range res.Warnings() {
			texts = append(texts, w.Text)
		}
		return body, texts, err
	}

	body := func(name string) []byte {
		return []byte(`
apiVersion: validation.example.com/v1
kind: Sprocket
metadata:
  name: ` + name + `
spec:
  unknown: uk1
  foo: foo1
  foo: foo2
  ports:
  - name: x
    containerPort: 80
    protocol: TCP`)
	}
	apply := func(name, validation string) ([]byte, []string, error) {
		req := rc.Patch(types.ApplyPatchType).AbsPath("/apis/validation.example.com/v1/sprockets").Name(name).
			Param("fieldManager", "field_validation_mgr").Body(body(name))
		if validation != "" {
			req = req.Param("fieldValidation", validation)
		}
		return do(req)
	}

	out, w, err := apply("strict", "Strict")
	if !apierrors.IsBadRequest(err) || !strings.Contains(string(out), `line 9: key \"foo\" already set in map`) ||
		!strings.Contains(string(out), "error strict decoding patch") {
		t.Fatalf("Strict apply with a duplicate: %v\n%s\nwant 400 naming line 9's duplicate key", err, out)
	}
	if _, err := sprockets.Get(ctx, "strict", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused apply created the object: %v", err)
	}
	if len(w) != 0 {
		t.Errorf("Strict apply warned %q", w)
	}

	for _, validation := range []string{"Warn", ""} {
		name := "warn" + strings.ToLower(validation)
		_, w, err := apply(name, validation)
		if err != nil {
			t.Fatalf("apply with fieldValidation=%q: %v", validation, err)
		}
		if len(w) != 1 || w[0] != `line 9: key "foo" already set in map` {
			t.Errorf("apply with fieldValidation=%q warned %q, want the duplicate key", validation, w)
		}
		got, err := sprockets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if spec := got.Object["spec"].(map[string]any); spec["foo"] != "foo2" || spec["unknown"] != "uk1" {
			t.Errorf("applied spec %v, want the last foo and the unknown field kept", spec)
		}
	}

	if _, w, err = apply("ignore", "Ignore"); err != nil {
		t.Fatalf("apply with fieldValidation=Ignore: %v", err)
	}
	if len(w) != 0 {
		t.Errorf("Ignore apply warned %q", w)
	}

	// A create's JSON body: the duplicate by its path.
	post := func(name, validation string) ([]byte, []string, error) {
		return do(rc.Post().AbsPath("/apis/validation.example.com/v1/sprockets").Param("fieldValidation", validation).
			SetHeader("Content-Type", "application/json").
			Body([]byte(`{"apiVersion":"validation.example.com/v1","kind":"Sprocket","metadata":{"name":"` + name +
				`"},"spec":{"unknown":"uk1","foo":"foo1","foo":"foo2"}}`)))
	}
	out, _, err = post("post-strict", "Strict")
	if !apierrors.IsBadRequest(err) || !strings.Contains(string(out), `strict decoding error: duplicate field \"spec.foo\"`) {
		t.Errorf("Strict create with a duplicate: %v\n%s\nwant 400 naming spec.foo", err, out)
	}
	if _, w, err = post("post-warn", "Warn"); err != nil {
		t.Fatalf("Warn create with a duplicate: %v", err)
	}
	if len(w) != 1 || w[0] != `duplicate field "spec.foo"` {
		t.Errorf("Warn create warned %q, want the duplicate spec.foo", w)
	}
}
