package customresources

import (
	"fmt"
	"strings"
	"testing"
	"time"

	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// gadgetCRD is a CRD whose schema the test tightens; %[1]s goes into
// spec.color's schema, %[2]s into spec's.
const gadgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object%[2]s
            properties:
              color: {type: string%[1]s}
              size: {type: integer}
          status:
            type: object
            properties:
              phase: {type: string}
`

// TestCustomResourceValidationRatcheting: what an operator upgrade that
// tightens a CRD's schema needs (upstream's validation ratcheting, GA in
// 1.33): objects written under the old schema can still be labelled, have
// their status written and their finalizers removed (so they can be
// deleted), while a change to the now-invalid field is refused with its
// field path.
func TestCustomResourceValidationRatcheting(t *testing.T) {
	c := testapiserver.Start(t)
	applyCRD := func(color, spec string) {
		t.Helper()
		mustKubectl(t, c, fmt.Sprintf(gadgetCRD, color, spec), "apply", "-f", "-")
		eventually(t, 10*time.Second, "CRD established", func() (bool, error) {
			out, err := kubectlRun(t, c, "", "wait", "--for=condition=Established", "--timeout=10s", "crd/gadgets.example.com")
			return err == nil && strings.Contains(out, "condition met"), nil
		})
	}
	applyCRD("", "")
	eventually(t, 10*time.Second, "gadget created", func() (bool, error) {
		_, err := kubectlRun(t, c, `apiVersion: example.com/v1
kind: Gadget
metadata: {name: old, namespace: default, finalizers: [example.com/cleanup]}
spec: {color: green, size: 9}
`, "apply", "-f", "-")
		return err == nil, nil
	})

	// The new schema: only red or blue, and big gadgets must be red.
	applyCRD(", enum: [red, blue]", `
            x-kubernetes-validations:
            - {rule: "!has(self.size) || self.size <= 5 || self.color == 'red'", message: "big gadgets are red"}`)
	// Wait until the new schema is served: a new green gadget is refused.
	eventually(t, 10*time.Second, "the tightened schema served", func() (bool, error) {
		out, err := kubectlRun(t, c, `apiVersion: example.com/v1
kind: Gadget
metadata: {name: new, namespace: default}
spec: {color: green}
`, "create", "-f", "-")
		if err == nil {
			mustKubectl(t, c, "", "delete", "gadget", "new", "-n", "default")
			return false, nil
		}
		return strings.Contains(out, `spec.color: Unsupported value: "green"`), nil
	})

	mustKubectl(t, c, "", "label", "gadget", "old", "-n", "default", "tier=gold")
	mustKubectl(t, c, "", "patch", "gadget", "old", "-n", "default", "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Ready"}}`)
	if out := mustKubectl(t, c, "", "get", "gadget", "old", "-n", "default", "-o", "jsonpath={.metadata.labels.tier} {.status.phase} {.spec.color}"); out != "gold Ready green" {
		t.Errorf("after label and status patch: %q, want %q", out, "gold Ready green")
	}

	// Changing the invalid field is validated in full: the enum and, as
	// spec changed, the CEL rule.
	out, err := kubectlRun(t, c, "", "patch", "gadget", "old", "-n", "default", "--type=merge", "-p", `{"spec":{"color":"purple"}}`)
	if err == nil || !strings.Contains(out, `spec.color: Unsupported value: "purple"`) {
		t.Errorf("changing the color to purple: err %v\n%s", err, out)
	}
	out, err = kubectlRun(t, c, "", "patch", "gadget", "old", "-n", "default", "--type=merge", "-p", `{"spec":{"size":10}}`)
	if err == nil || !strings.Contains(out, "big gadgets are red") {
		t.Errorf("changing the size of a green gadget: err %v\n%s", err, out)
	}

	// The operator removes its finalizer from the deleted object: the
	// update passes and the object goes.
	mustKubectl(t, c, "", "delete", "gadget", "old", "-n", "default", "--wait=false")
	mustKubectl(t, c, "", "patch", "gadget", "old", "-n", "default", "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
	eventually(t, 10*time.Second, "gadget old gone", func() (bool, error) {
		out, err := kubectlRun(t, c, "", "get", "gadget", "old", "-n", "default")
		return err != nil && strings.Contains(out, "NotFound"), nil
	})
}
