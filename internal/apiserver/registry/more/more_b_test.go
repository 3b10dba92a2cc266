package more

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/authorization"
)

func TestIssueThreeResourcesB(t *testing.T) {
	seen := map[schema.GroupResource]bool{}
	prefixes := map[string]string{}
	for _, r := range IssueThreeResourcesB() {
		gr := schema.GroupResource{Group: r.GroupVersion.Group, Resource: r.Resource}
		if seen[gr] {
			t.Errorf("%s listed twice", gr)
		}
		seen[gr] = true
		if r.Kind == "" || r.SingularName == "" || r.New == nil || r.Strategy == nil {
			t.Errorf("%s: incomplete resource %+v", gr, r)
		}
		if authorization.IsVirtual(r) {
			continue
		}
		if r.NewList == nil || r.StoragePrefix == "" || r.ListKind != r.Kind+"List" {
			t.Errorf("%s: stored resource without list or prefix", gr)
		}
		if other, dup := prefixes[r.StoragePrefix]; dup {
			t.Errorf("%s and %s share storage prefix %q", gr, other, r.StoragePrefix)
		}
		prefixes[r.StoragePrefix] = gr.String()
	}
	if got := len(seen); got != 21 {
		t.Errorf("%d resources, want 21", got)
	}
}
