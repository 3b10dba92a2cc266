package customresources

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// calicoNetworkPolicyCRD is Calico's CRD whose resource name clashes with
// networking.k8s.io's networkpolicies.
const calicoNetworkPolicyCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: networkpolicies.crd.projectcalico.org}
spec:
  group: crd.projectcalico.org
  scope: Namespaced
  names: {plural: networkpolicies, singular: networkpolicy, kind: NetworkPolicy, listKind: NetworkPolicyList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// TestDiscoveryGroupOrder: discovery lists groups in upstream's order, by
// their APIServices' priorities (apiregistration.k8s.io, apps,
// events.k8s.io, ... then custom groups at 1000), so that a CRD whose
// resource has a built-in's name does not take the name over: with
// Calico's networkpolicies.crd.projectcalico.org installed, `kubectl get
// networkpolicies` still means networking.k8s.io's, as upstream.
func TestDiscoveryGroupOrder(t *testing.T) {
	c := testapiserver.Start(t)
	mustKubectl(t, c, calicoNetworkPolicyCRD, "apply", "-f", "-")
	eventually(t, 10*time.Second, "CRD established", func() (bool, error) {
		out, err := kubectlRun(t, c, "", "wait", "--for=condition=Established", "--timeout=10s", "crd/networkpolicies.crd.projectcalico.org")
		return err == nil && strings.Contains(out, "condition met"), nil
	})

	var groups metav1.APIGroupList
	if err := json.Unmarshal([]byte(mustKubectl(t, c, "", "get", "--raw", "/apis")), &groups); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range groups.Groups {
		got = append(got, g.Name)
	}
	// k8s.io/kubernetes@v1.37.2 api/discovery/apis.json, without the groups
	// Skiff does not serve (internal.apiserver.k8s.io and lifecycle.k8s.io
	// have no default-enabled version), then the custom group and
	// metrics-server's metrics.k8s.io (100).
	want := []string{"apiregistration.k8s.io", "apps", "events.k8s.io", "authentication.k8s.io", "authorization.k8s.io",
		"autoscaling", "batch", "certificates.k8s.io", "networking.k8s.io", "policy", "rbac.authorization.k8s.io", "storage.k8s.io",
		"admissionregistration.k8s.io", "apiextensions.k8s.io", "scheduling.k8s.io", "coordination.k8s.io", "node.k8s.io",
		"discovery.k8s.io", "resource.k8s.io", "flowcontrol.apiserver.k8s.io", "storagemigration.k8s.io",
		"crd.projectcalico.org", "metrics.k8s.io"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("/apis groups (-want +got):\n%s", diff)
	}

	mustKubectl(t, c, `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: builtin, namespace: default}
spec: {podSelector: {}}
---
apiVersion: crd.projectcalico.org/v1
kind: NetworkPolicy
metadata: {name: calico, namespace: default}
spec: {selector: all()}
`, "apply", "-f", "-")
	if out := mustKubectl(t, c, "", "get", "networkpolicies", "-n", "default", "-o", "name"); strings.TrimSpace(out) != "networkpolicy.networking.k8s.io/builtin" {
		t.Errorf("kubectl get networkpolicies: %q, want networking.k8s.io's", out)
	}
	if out := mustKubectl(t, c, "", "get", "networkpolicies.crd.projectcalico.org", "-n", "default", "-o", "name"); strings.TrimSpace(out) != "networkpolicy.crd.projectcalico.org/calico" {
		t.Errorf("kubectl get networkpolicies.crd.projectcalico.org: %q", out)
	}
}
