package customresources

import (
	"strings"
	"testing"

	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// widgetCRD has one version, the commonest shape: the internal form of a
// CRD keeps its schema, subresources and printer columns at the top of the
// spec, not in the version, and they must be served all the same.
const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Phase, type: string, jsonPath: .status.phase}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, maximum: 10}
              color: {type: string, default: blue}
          status:
            type: object
            properties:
              phase: {type: string}
`

// TestSingleVersionCustomResource: validation, defaulting, pruning, printer
// columns and the status subresource of a CRD with one version, through
// kubectl.
func TestSingleVersionCustomResource(t *testing.T) {
	c := testapiserver.Start(t)
	ctx := testCtx(t)
	createCRD(t, ctx, c, decodeCRD(t, widgetCRD))

	// Schema validation: a wrong type and a maximum, with field paths.
	out, err := kubectlRun(t, c, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: bad, namespace: default}\nspec: {size: 11}\n",
		"apply", "--validate=false", "-f", "-")
	if err == nil || !strings.Contains(out, `spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10`) {
		t.Errorf("a size over the maximum: %v\n%s", err, out)
	}
	out, err = kubectlRun(t, c, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: bad, namespace: default}\nspec: {size: big}\n",
		"apply", "--validate=false", "-f", "-")
	if err == nil || !strings.Contains(out, `spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"`) {
		t.Errorf("a size of the wrong type: %v\n%s", err, out)
	}

	// Pruning and defaulting.
	mustKubectl(t, c, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: {size: 3, bogus: x}\nstatus: {phase: Ignored}\n",
		"apply", "--validate=false", "-f", "-")
	if got := mustKubectl(t, c, "", "-n", "default", "get", "widget", "w", "-o", "jsonpath={.spec}"); got != `{"color":"blue","size":3}` {
		t.Errorf("spec %s, want the unknown field pruned and the default set", got)
	}
	// The status subresource: status is not written through the main resource.
	if got := mustKubectl(t, c, "", "-n", "default", "get", "widget", "w", "-o", "jsonpath={.status}"); got != "" {
		t.Errorf("status %q written through the main resource", got)
	}
	mustKubectl(t, c, "", "-n", "default", "patch", "widget", "w", "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Ready"}}`)

	// Printer columns.
	out = mustKubectl(t, c, "", "-n", "default", "get", "widgets")
	if !strings.Contains(out, "NAME   SIZE   PHASE") || !strings.Contains(out, "w      3      Ready") {
		t.Errorf("kubectl get widgets:\n%s", out)
	}
}
