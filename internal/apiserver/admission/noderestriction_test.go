package admission

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
)

func TestNodeRestriction(t *testing.T) {
	n1 := &authn.User{Name: "system:node:n1", Groups: []string{"system:nodes"}}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	nodes := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	leases := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	pod := func(node string, mirror bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{NodeName: node}}
		if mirror {
			p.Annotations = map[string]string{mirrorPodAnnotation: "x"}
		}
		return p
	}
	tests := []struct {
		name    string
		user    *authn.User
		op      Operation
		res     schema.GroupVersionResource
		sub     string
		ns      string
		objName string
		obj     runtime.Object
		old     runtime.Object
		wantMsg string
	}{
		{name: "own pod status", user: n1, op: Update, res: pods, sub: "status", ns: "ns", objName: "p", obj: pod("n1", false), old: pod("n1", false)},
		{name: "other node's pod status", user: n1, op: Update, res: pods, sub: "status", ns: "ns", objName: "p", obj: pod("n2", false), old: pod("n2", false),
			wantMsg: `pods "p" is forbidden: node "n1" can only update pod status for pods with spec.nodeName set to itself`},
		{name: "mirror pod on itself", user: n1, op: Create, res: pods, ns: "ns", objName: "p", obj: pod("n1", true)},
		{name: "regular pod", user: n1, op: Create, res: pods, ns: "ns", objName: "p", obj: pod("n1", false),
			wantMsg: `pods "p" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "n1" can only create mirror pods`},
		{name: "mirror pod on another node", user: n1, op: Create, res: pods, ns: "ns", objName: "p", obj: pod("n2", true),
			wantMsg: `pods "p" is forbidden: node "n1" can only create pods with spec.nodeName set to itself`},
		{name: "delete another node's pod", user: n1, op: Delete, res: pods, ns: "ns", objName: "p", old: pod("n2", false),
			wantMsg: `pods "p" is forbidden: node "n1" can only delete pods with spec.nodeName set to itself`},
		{name: "own node", user: n1, op: Update, res: nodes, sub: "status", objName: "n1"},
		{name: "other node", user: n1, op: Update, res: nodes, objName: "n2", wantMsg: `nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"`},
		{name: "other lease", user: n1, op: Create, res: leases, ns: "kube-node-lease", objName: "n2",
			wantMsg: `leases.coordination.k8s.io "n2" is forbidden: can only access node lease with the same name as the requesting node`},
		{name: "not a node", user: &authn.User{Name: "alice"}, op: Update, res: nodes, objName: "n2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := NewNodeRestriction().Validate(context.Background(), &Attributes{
				Operation: tc.op, Resource: tc.res, Subresource: tc.sub, Namespace: tc.ns, Name: tc.objName, Object: tc.obj, OldObject: tc.old, User: tc.user,
			})
			switch {
			case tc.wantMsg == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantMsg != "" && (err == nil || err.Error() != tc.wantMsg || !apierrors.IsForbidden(err)):
				t.Fatalf("error = %v, want Forbidden %q", err, tc.wantMsg)
			}
		})
	}
}
