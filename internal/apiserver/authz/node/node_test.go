package node

import (
	"context"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
	"github.com/skiff-sh/skiff/internal/apiserver/authz/bootstrappolicy"
)

// store is a Reader over fixed objects.
type store struct {
	pods []corev1.Pod
	pvcs []corev1.PersistentVolumeClaim
	pvs  []corev1.PersistentVolume
	vas  []storagev1.VolumeAttachment
	pcrs []certificatesv1.PodCertificateRequest
}

func (s *store) List(_ context.Context, gvr schema.GroupVersionResource, ns string, _ bool, into runtime.Object) error {
	l := into.(*corev1.PodList)
	for _, p := range s.pods {
		if ns == "" || p.Namespace == ns {
			l.Items = append(l.Items, p)
		}
	}
	return nil
}

func (s *store) Get(_ context.Context, gvr schema.GroupVersionResource, ns, name string, _ bool, into runtime.Object) error {
	switch o := into.(type) {
	case *corev1.Pod:
		for _, p := range s.pods {
			if p.Namespace == ns && p.Name == name {
				*o = p
				return nil
			}
		}
	case *corev1.PersistentVolumeClaim:
		for _, p := range s.pvcs {
			if p.Namespace == ns && p.Name == name {
				*o = p
				return nil
			}
		}
	case *corev1.PersistentVolume:
		for _, p := range s.pvs {
			if p.Name == name {
				*o = p
				return nil
			}
		}
	case *certificatesv1.PodCertificateRequest:
		for _, p := range s.pcrs {
			if p.Namespace == ns && p.Name == name {
				*o = p
				return nil
			}
		}
	case *storagev1.VolumeAttachment:
		for _, p := range s.vas {
			if p.Name == name {
				*o = p
				return nil
			}
		}
	}
	return apierrors.NewNotFound(gvr.GroupResource(), name)
}

func testStore() *store {
	pod := func(name, node string, spec corev1.PodSpec) corev1.Pod {
		spec.NodeName = node
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: spec}
	}
	return &store{
		pods: []corev1.Pod{
			pod("web", "n1", corev1.PodSpec{
				ServiceAccountName: "web-sa",
				ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "pull"}},
				Volumes: []corev1.Volume{
					{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "vol-secret"}}},
					{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "vol-cm"}}}},
					{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}}}}}},
					{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
				},
				Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "env-secret"}}}}},
					EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "envfrom-cm"}}}}}},
			}),
			pod("db", "n2", corev1.PodSpec{Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db-secret"}}}}}),
		},
		pvcs: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv1"}}},
		pvs: []corev1.PersistentVolume{
			{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}, Spec: corev1.PersistentVolumeSpec{
				ClaimRef:               &corev1.ObjectReference{Namespace: "ns", Name: "data"},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "d", NodePublishSecretRef: &corev1.SecretReference{Name: "csi-secret", Namespace: "ns"}}},
			}},
			{ObjectMeta: metav1.ObjectMeta{Name: "pv2"}, Spec: corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{Namespace: "ns", Name: "other"}}},
		},
		vas: []storagev1.VolumeAttachment{{ObjectMeta: metav1.ObjectMeta{Name: "va1"}, Spec: storagev1.VolumeAttachmentSpec{NodeName: "n1"}}},
		pcrs: []certificatesv1.PodCertificateRequest{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "req-web"}, Spec: certificatesv1.PodCertificateRequestSpec{NodeName: "n1", PodName: "web"}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "req-db"}, Spec: certificatesv1.PodCertificateRequestSpec{NodeName: "n2", PodName: "db"}},
		},
	}
}

func TestAuthorize(t *testing.T) {
	n1 := &authn.User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}
	res := func(verb, group, resource, sub, ns, name string) authz.Attributes {
		return authz.Attributes{User: n1, Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name, ResourceRequest: true}
	}
	withSelector := func(a authz.Attributes, sel string) authz.Attributes { a.FieldSelector = sel; return a }
	withUser := func(a authz.Attributes, u *authn.User) authz.Attributes { a.User = u; return a }
	tests := []struct {
		name       string
		attrs      authz.Attributes
		want       authz.Decision
		wantReason string
	}{
		{"secret of a volume", res("get", "", "secrets", "", "ns", "vol-secret"), authz.Allow, ""},
		{"secret of an env var", res("get", "", "secrets", "", "ns", "env-secret"), authz.Allow, ""},
		{"image pull secret", res("get", "", "secrets", "", "ns", "pull"), authz.Allow, ""},
		{"secret of a PV's CSI driver", res("get", "", "secrets", "", "ns", "csi-secret"), authz.Allow, ""},
		{"watch one secret by name", withSelector(res("watch", "", "secrets", "", "ns", ""), "metadata.name=vol-secret"), authz.Allow, ""},
		{"another node's secret", res("get", "", "secrets", "", "ns", "db-secret"), authz.NoOpinion, "no relationship found between node 'n1' and this object"},
		{"list all secrets", res("list", "", "secrets", "", "ns", ""), authz.NoOpinion, "No Object name found"},
		{"write a secret", res("update", "", "secrets", "", "ns", "vol-secret"), authz.NoOpinion, "can only read resources of this type"},
		{"configmap of a volume", res("get", "", "configmaps", "", "ns", "vol-cm"), authz.Allow, ""},
		{"configmap of envFrom", res("get", "", "configmaps", "", "ns", "envfrom-cm"), authz.Allow, ""},
		{"configmap of a projected volume", res("get", "", "configmaps", "", "ns", "kube-root-ca.crt"), authz.Allow, ""},
		{"unrelated configmap", res("get", "", "configmaps", "", "ns", "other"), authz.NoOpinion, "no relationship found between node 'n1' and this object"},
		{"its pod's claim", res("get", "", "persistentvolumeclaims", "", "ns", "data"), authz.Allow, ""},
		{"its pod's volume", res("get", "", "persistentvolumes", "", "", "pv1"), authz.Allow, ""},
		{"another volume", res("get", "", "persistentvolumes", "", "", "pv2"), authz.NoOpinion, "no relationship found between node 'n1' and this object"},
		{"its volume attachment", res("get", "storage.k8s.io", "volumeattachments", "", "", "va1"), authz.Allow, ""},
		{"token for its pod's service account", res("create", "", "serviceaccounts", "token", "ns", "web-sa"), authz.Allow, ""},
		{"token for another account", res("create", "", "serviceaccounts", "token", "ns", "default"), authz.NoOpinion, "no relationship found between node 'n1' and this object"},
		{"read its pod's service account", res("get", "", "serviceaccounts", "", "ns", "web-sa"), authz.Allow, ""},
		{"read another service account", res("get", "", "serviceaccounts", "", "ns", "default"), authz.NoOpinion, "no relationship found between node 'n1' and this object"},
		{"create a pod certificate request", res("create", "certificates.k8s.io", "podcertificaterequests", "", "ns", ""), authz.Allow, ""},
		{"get its pod certificate request", res("get", "certificates.k8s.io", "podcertificaterequests", "", "ns", "req-web"), authz.Allow, ""},
		{"get another node's request", res("get", "certificates.k8s.io", "podcertificaterequests", "", "ns", "req-db"), authz.NoOpinion, "no relationship found between node 'n1' and this object"},
		{"watch its requests", withSelector(res("watch", "certificates.k8s.io", "podcertificaterequests", "", "", ""), "spec.nodeName=n1"), authz.Allow, ""},
		{"watch all requests", res("watch", "certificates.k8s.io", "podcertificaterequests", "", "", ""), authz.NoOpinion, "can only list/watch podcertificaterequests with nodeName field selector"},
		{"issue a request", res("update", "certificates.k8s.io", "podcertificaterequests", "status", "ns", "req-web"), authz.NoOpinion, "nodes may not access the status subresource of PodCertificateRequests"},
		{"delete a request", res("delete", "certificates.k8s.io", "podcertificaterequests", "", "ns", "req-web"), authz.NoOpinion, "nodes may not delete podcertificaterequests"},
		{"cluster trust bundles by system:node rules", res("list", "certificates.k8s.io", "clustertrustbundles", "", "", ""), authz.Allow, ""},
		{"own node", res("get", "", "nodes", "", "", "n1"), authz.Allow, ""},
		{"another node", res("get", "", "nodes", "", "", "n2"), authz.NoOpinion, "node 'n1' cannot read 'n2', only its own Node object"},
		{"node status", res("patch", "", "nodes", "status", "", "n1"), authz.Allow, ""},
		{"own lease", res("update", "coordination.k8s.io", "leases", "", "kube-node-lease", "n1"), authz.Allow, ""},
		{"other lease", res("update", "coordination.k8s.io", "leases", "", "kube-node-lease", "n2"), authz.NoOpinion, "can only access node lease with the same name as the requesting node"},
		{"watch own pods", withSelector(res("watch", "", "pods", "", "", ""), "spec.nodeName=n1"), authz.Allow, ""},
		{"watch all pods", res("watch", "", "pods", "", "", ""), authz.NoOpinion, "can only list/watch pods with spec.nodeName field selector"},
		{"get own pod", res("get", "", "pods", "", "ns", "web"), authz.Allow, ""},
		{"get another node's pod", res("get", "", "pods", "", "ns", "db"), authz.NoOpinion, "no relationship found between node 'n1' and this object"},
		{"pod status", res("patch", "", "pods", "status", "ns", "web"), authz.Allow, ""},
		{"events by system:node rules", res("create", "", "events", "", "ns", ""), authz.Allow, ""},
		{"services by system:node rules", res("watch", "", "services", "", "", ""), authz.Allow, ""},
		{"deployments not for nodes", res("list", "apps", "deployments", "", "ns", ""), authz.NoOpinion, ""},
		{"not a node", withUser(res("get", "", "secrets", "", "ns", "vol-secret"), &authn.User{Name: "alice"}), authz.NoOpinion, ""},
		{"node group without node name", withUser(res("get", "", "secrets", "", "ns", "vol-secret"), &authn.User{Name: "bob", Groups: []string{"system:nodes"}}), authz.NoOpinion, `unknown node for user "bob"`},
	}
	a := New(testStore(), bootstrappolicy.NodeRules())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, reason, err := a.Authorize(context.Background(), tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			if d != tc.want || reason != tc.wantReason {
				t.Errorf("got (%v, %q), want (%v, %q)", d, reason, tc.want, tc.wantReason)
			}
		})
	}
}
