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
	node := func(labels map[string]string, taints []corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
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
		{name: "register with the kubelet's labels", user: n1, op: Create, res: nodes, objName: "n1",
			obj: node(map[string]string{"kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "m", "kubelet.kubernetes.io/x": "y", "example.com/tier": "a", "plain": "b"}, nil)},
		{name: "register with restricted labels", user: n1, op: Create, res: nodes, objName: "n1",
			obj:     node(map[string]string{"node-restriction.kubernetes.io/secure": "true", "node-role.kubernetes.io/control-plane": "", "example.k8s.io/a": "b", "tier": "a"}, nil),
			wantMsg: `nodes "n1" is forbidden: node "n1" is not allowed to set the following labels: example.k8s.io/a, node-restriction.kubernetes.io/secure, node-role.kubernetes.io/control-plane`},
		{name: "add a restricted label", user: n1, op: Update, res: nodes, objName: "n1",
			obj: node(map[string]string{"a": "b", "foo.node-restriction.kubernetes.io/x": "y"}, nil), old: node(map[string]string{"a": "b"}, nil),
			wantMsg: `nodes "n1" is forbidden: is not allowed to modify labels: foo.node-restriction.kubernetes.io/x`},
		{name: "remove a restricted label", user: n1, op: Update, res: nodes, objName: "n1",
			obj: node(nil, nil), old: node(map[string]string{"node-role.kubernetes.io/worker": ""}, nil),
			wantMsg: `nodes "n1" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/worker`},
		{name: "keep a restricted label an admin set", user: n1, op: Update, res: nodes, objName: "n1",
			obj: node(map[string]string{"node-role.kubernetes.io/worker": "", "x": "2"}, nil), old: node(map[string]string{"node-role.kubernetes.io/worker": "", "x": "1"}, nil)},
		{name: "remove its taint", user: n1, op: Update, res: nodes, objName: "n1",
			obj: node(nil, nil), old: node(nil, []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}),
			wantMsg: `nodes "n1" is forbidden: node "n1" is not allowed to modify taints`},
		{name: "status with the same taints", user: n1, op: Update, res: nodes, sub: "status", objName: "n1",
			obj: node(nil, []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}), old: node(nil, []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}})},
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
