package admission

import (
	"context"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
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
			err := NewNodeRestriction(nil, nil).Admit(context.Background(), &Attributes{
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

// TestNodeRestrictionPVCStatus: a node writes only a claim's status, and
// there only what the kubelet reports of an expansion (capacity,
// conditions, allocated resources), as upstream.
func TestNodeRestrictionPVCStatus(t *testing.T) {
	n1 := &authn.User{Name: "system:node:n1", Groups: []string{"system:nodes"}}
	pvcs := schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}
	claim := func(edit func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", ResourceVersion: "5"},
			Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pv1"},
			Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}
		if edit != nil {
			edit(c)
		}
		return c
	}
	const refused = `persistentvolumeclaims "c" is forbidden: node "n1" is not allowed to update fields other than status.quantity and status.conditions: `
	for _, tc := range []struct {
		name      string
		op        Operation
		sub       string
		obj       *corev1.PersistentVolumeClaim
		wantStart string
	}{
		{"expansion reported", Update, "status", claim(func(c *corev1.PersistentVolumeClaim) {
			c.ResourceVersion = ""
			c.Status.Capacity[corev1.ResourceStorage] = resource.MustParse("2Gi")
			c.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionFalse}}
			c.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
		}), ""},
		{"phase changed", Update, "status", claim(func(c *corev1.PersistentVolumeClaim) { c.Status.Phase = corev1.ClaimLost }), refused},
		{"label added", Update, "status", claim(func(c *corev1.PersistentVolumeClaim) { c.Labels = map[string]string{"a": "b"} }), refused},
		{"the claim itself", Update, "", claim(nil), `persistentvolumeclaims "c" is forbidden: may only update PVC status`},
		{"deleted", Delete, "", nil, `persistentvolumeclaims "c" is forbidden: may only update PVC status`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Attributes{Operation: tc.op, Resource: pvcs, Subresource: tc.sub, Namespace: "ns", Name: "c", OldObject: claim(nil), User: n1}
			if tc.obj != nil {
				a.Object = tc.obj
			}
			err := NewNodeRestriction(nil, nil).Admit(context.Background(), a)
			switch {
			case tc.wantStart == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantStart != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantStart) || !apierrors.IsForbidden(err)):
				t.Fatalf("error = %v, want Forbidden %q...", err, tc.wantStart)
			}
		})
	}
	// Anyone else's write is not this plugin's business.
	a := &Attributes{Operation: Update, Resource: pvcs, Namespace: "ns", Name: "c", Object: claim(nil), OldObject: claim(nil), User: &authn.User{Name: "alice"}}
	if err := NewNodeRestriction(nil, nil).Admit(context.Background(), a); err != nil {
		t.Errorf("alice's update: %v", err)
	}
}

// TestNodeRestrictionEvictionsAndTokens: a node evicts only pods bound to
// it, asks only for tokens bound by UID to a pod on it, for an audience
// the pod's volumes use or one it is authorized for, and reaches no other
// pod subresource, with upstream's messages.
func TestNodeRestrictionEvictionsAndTokens(t *testing.T) {
	n1 := &authn.User{Name: "system:node:n1", Groups: []string{"system:nodes"}}
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	sas := corev1.SchemeGroupVersion.WithResource("serviceaccounts")
	onN1 := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "on-n1", UID: "u1"}, Spec: corev1.PodSpec{NodeName: "n1",
		Volumes: []corev1.Volume{
			{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}},
			{Name: "vault", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "vault", Path: "t"}}}}}},
			{Name: "secrets", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "secrets.csi.example.com"}}},
		}}}
	onN2 := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "on-n2", UID: "u2"}, Spec: corev1.PodSpec{NodeName: "n2"}}
	r := newObjects(pods, onN1, onN2).with(storagev1.SchemeGroupVersion.WithResource("csidrivers"), &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: "secrets.csi.example.com"}, Spec: storagev1.CSIDriverSpec{TokenRequests: []storagev1.TokenRequest{{Audience: "csi-aud"}}}})
	allowedAudiences := authz.AuthorizerFunc(func(_ context.Context, a authz.Attributes) (authz.Decision, string, error) {
		if a.Verb == "request-serviceaccounts-token-audience" && a.Resource == "granted" && a.Name == "sa" && a.Namespace == "ns" {
			return authz.Allow, "", nil
		}
		return authz.NoOpinion, "", nil
	})
	plugin := NewNodeRestriction(r, allowedAudiences)
	token := func(ref *authenticationv1.BoundObjectReference, auds ...string) *authenticationv1.TokenRequest {
		return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: ref, Audiences: auds}}
	}
	ref := func(name, uid string) *authenticationv1.BoundObjectReference {
		return &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: name, UID: types.UID(uid)}
	}
	tests := []struct {
		name    string
		res     schema.GroupVersionResource
		sub     string
		objName string
		obj     runtime.Object
		wantMsg string
	}{
		{name: "evict own pod", res: pods, sub: "eviction", objName: "on-n1", obj: &policyv1.Eviction{}},
		{name: "evict another node's pod", res: pods, sub: "eviction", objName: "on-n2", obj: &policyv1.Eviction{},
			wantMsg: `pods "on-n2" is forbidden: node n1 can only evict pods with spec.nodeName set to itself`},
		{name: "bind a pod", res: pods, sub: "binding", objName: "on-n1", obj: &corev1.Binding{},
			wantMsg: `pods "on-n1" is forbidden: unexpected pod subresource "binding", only 'status' and 'eviction' are allowed`},
		{name: "token for own pod", res: sas, sub: "token", objName: "sa", obj: token(ref("on-n1", "u1"))},
		{name: "token for a projected audience", res: sas, sub: "token", objName: "sa", obj: token(ref("on-n1", "u1"), "vault")},
		{name: "token for a CSI driver's audience", res: sas, sub: "token", objName: "sa", obj: token(ref("on-n1", "u1"), "csi-aud")},
		{name: "token for an authorized audience", res: sas, sub: "token", objName: "sa", obj: token(ref("on-n1", "u1"), "granted")},
		{name: "token for another audience", res: sas, sub: "token", objName: "sa", obj: token(ref("on-n1", "u1"), "elsewhere"),
			wantMsg: `serviceaccounts "sa" is forbidden: system:node:n1 is not authorized to request tokens for audience "elsewhere"`},
		{name: "token for two audiences", res: sas, sub: "token", objName: "sa", obj: token(ref("on-n1", "u1"), "vault", "x"),
			wantMsg: `serviceaccounts "sa" is forbidden: node may only request 0 or 1 audiences`},
		{name: "unbound token", res: sas, sub: "token", objName: "sa", obj: token(nil),
			wantMsg: `serviceaccounts "sa" is forbidden: node requested token not bound to a pod`},
		{name: "token without a uid", res: sas, sub: "token", objName: "sa", obj: token(ref("on-n1", "")),
			wantMsg: `serviceaccounts "sa" is forbidden: node requested token with a pod binding without a uid`},
		{name: "token with a stale uid", res: sas, sub: "token", objName: "sa", obj: token(ref("on-n1", "old")),
			wantMsg: `serviceaccounts "sa" is forbidden: the UID in the bound object reference (old) does not match the UID in record. The object might have been deleted and then recreated`},
		{name: "token for another node's pod", res: sas, sub: "token", objName: "sa", obj: token(ref("on-n2", "u2")),
			wantMsg: `serviceaccounts "sa" is forbidden: node requested token bound to a pod scheduled on a different node`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := plugin.Admit(context.Background(), &Attributes{
				Operation: Create, Resource: tc.res, Subresource: tc.sub, Namespace: "ns", Name: tc.objName, Object: tc.obj, User: n1,
			})
			switch {
			case tc.wantMsg == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantMsg != "" && (err == nil || err.Error() != tc.wantMsg || !apierrors.IsForbidden(err)):
				t.Fatalf("error = %v, want Forbidden %q", err, tc.wantMsg)
			}
		})
	}
	// A missing pod is NotFound, as upstream.
	err := plugin.Admit(context.Background(), &Attributes{Operation: Create, Resource: pods, Subresource: "eviction", Namespace: "ns", Name: "gone", Object: &policyv1.Eviction{}, User: n1})
	if !apierrors.IsNotFound(err) {
		t.Errorf("evicting a missing pod: %v, want 404", err)
	}
}

func TestNodeRestrictionPodCertificateRequests(t *testing.T) {
	n1 := &authn.User{Name: "system:node:n1", Groups: []string{"system:nodes"}}
	pcrs := certificatesv1.SchemeGroupVersion.WithResource("podcertificaterequests")
	withCert := func(name, uid, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}, Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "robot",
			Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519", CredentialBundlePath: "b.pem"}}}}}}}}}
	}
	r := newObjects(corev1.SchemeGroupVersion.WithResource("pods"), withCert("web", "u1", "n1"), withCert("db", "u2", "n2")).
		with(corev1.SchemeGroupVersion.WithResource("nodes"), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}}).
		with(corev1.SchemeGroupVersion.WithResource("serviceaccounts"), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "robot", UID: "sa-uid"}})
	plugin := NewNodeRestriction(r, nil)
	req := func(mut func(s *certificatesv1.PodCertificateRequestSpec)) *certificatesv1.PodCertificateRequest {
		s := certificatesv1.PodCertificateRequestSpec{SignerName: "example.com/s", PodName: "web", PodUID: "u1", ServiceAccountName: "robot", ServiceAccountUID: "sa-uid", NodeName: "n1", NodeUID: "node-uid"}
		if mut != nil {
			mut(&s)
		}
		return &certificatesv1.PodCertificateRequest{Spec: s}
	}
	tests := []struct {
		name      string
		obj       *certificatesv1.PodCertificateRequest
		wantMsg   string
		forbidden bool
	}{
		{name: "its pod", obj: req(nil)},
		{name: "another node's pod", obj: req(func(s *certificatesv1.PodCertificateRequestSpec) { s.PodName, s.PodUID = "db", "u2" }), forbidden: true,
			wantMsg: `podcertificaterequests.certificates.k8s.io is forbidden: pod "ns/db" is not running on node "n1" named in the PodCertificateRequest`},
		{name: "naming another node", obj: req(func(s *certificatesv1.PodCertificateRequestSpec) { s.NodeName = "n2" }), forbidden: true,
			wantMsg: `podcertificaterequests.certificates.k8s.io is forbidden: PodCertificateRequest.Spec.NodeName="n2", which is not the requesting node "n1"`},
		{name: "another signer", obj: req(func(s *certificatesv1.PodCertificateRequestSpec) { s.SignerName = "example.com/other" }), forbidden: true,
			wantMsg: `podcertificaterequests.certificates.k8s.io is forbidden: pod "ns/web" has no podCertificate volume for signer "example.com/other"`},
		{name: "another service account", obj: req(func(s *certificatesv1.PodCertificateRequestSpec) { s.ServiceAccountName = "default" }), forbidden: true,
			wantMsg: `podcertificaterequests.certificates.k8s.io is forbidden: PodCertificateRequest for pod "ns/web" contains serviceAccountName ("default") that differs from running pod ("robot")`},
		{name: "stale pod UID", obj: req(func(s *certificatesv1.PodCertificateRequestSpec) { s.PodUID = "old" }),
			wantMsg: `Internal error occurred: PodCertificateRequest for pod "ns/web" contains pod UID ("old") which differs from running pod "u1"`},
		{name: "stale node UID", obj: req(func(s *certificatesv1.PodCertificateRequestSpec) { s.NodeUID = "old" }),
			wantMsg: `Internal error occurred: PodCertificateRequest for pod "ns/web" names node UID "old", inconsistent with the running node ("node-uid")`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := plugin.Admit(context.Background(), &Attributes{Operation: Create, Resource: pcrs, Namespace: "ns", Object: tc.obj, User: n1})
			switch {
			case tc.wantMsg == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantMsg != "" && (err == nil || err.Error() != tc.wantMsg || apierrors.IsForbidden(err) != tc.forbidden):
				t.Fatalf("error = %v (forbidden %v), want %q (forbidden %v)", err, apierrors.IsForbidden(err), tc.wantMsg, tc.forbidden)
			}
		})
	}
}
