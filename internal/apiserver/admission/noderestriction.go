package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/diff"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// mirrorPodAnnotation marks a kubelet's mirror of a static pod.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// NodeRestriction limits what a node (user system:node:<name> in
// system:nodes) may write, as upstream's plugin of that name: its own Node
// object, the status of pods bound to it, mirror pods bound to it, its
// own Lease, evictions of pods bound to it, and service-account tokens
// bound to a pod on it for an audience the pod uses (or one the node is
// authorized to request). The Node authorizer allows these verbs; this
// plugin narrows them to the node's own objects. On its Node a node may
// not set or change labels under node-restriction.kubernetes.io/ nor
// kubernetes.io/ and k8s.io/ labels other than the kubelet's own
// (NodeLabelAllowed), and may not change its taints, owner references or
// configSource, so a node cannot steer workloads to itself. A node may
// create PodCertificateRequests only for a pod bound to it, naming its
// own Node, the pod's service account (UIDs checked) and a signer one of
// the pod's podCertificate sources names. Not done (yet): upstream's
// checks of PVC status, and its RBAC escape for signers a pod does not
// name (verb "request" on signers).
type NodeRestriction struct {
	objects registry.Reader  // pods and what a pod's volumes name
	authz   authz.Authorizer // request-serviceaccounts-token-audience
}

var _ Mutator = NodeRestriction{}

// NewNodeRestriction reads pods (evictions, tokens) and the claims,
// volumes and CSI drivers a pod's volumes name through r, and asks az
// whether a node may request a token for an audience its pod does not
// use (nil: it may not).
func NewNodeRestriction(r registry.Reader, az authz.Authorizer) NodeRestriction {
	return NodeRestriction{objects: r, authz: az}
}

// Name is the upstream name.
func (NodeRestriction) Name() string { return "NodeRestriction" }

// Handles creates, updates and deletes.
func (NodeRestriction) Handles(op Operation) bool { return op != Connect }

func nodeName(u *authn.User) (string, bool) {
	if u == nil || !u.InGroup(authn.NodesGroup) {
		return "", false
	}
	return strings.TrimPrefix(u.Name, "system:node:"), true
}

// Admit refuses a node's write to another node's objects. It runs in the
// mutating phase, as upstream's: a token request is checked as sent, before
// its audiences are defaulted.
func (n NodeRestriction) Admit(ctx context.Context, a *Attributes) error {
	node, ok := nodeName(a.User)
	if !ok {
		return nil
	}
	gr := a.Resource.GroupResource()
	forbid := func(format string, args ...any) error {
		return apierrors.NewForbidden(gr, a.Name, fmt.Errorf(format, args...))
	}
	if node == "" || node == a.User.Name {
		return forbid("could not determine node from user %q", a.User.Name)
	}
	switch {
	case gr.Group == "" && gr.Resource == "pods":
		switch a.Subresource {
		case "":
			switch a.Operation {
			case Create:
				pod, _ := a.Object.(*corev1.Pod)
				if pod == nil {
					return nil
				}
				if _, mirror := pod.Annotations[mirrorPodAnnotation]; !mirror {
					return forbid("pod does not have %q annotation, node %q can only create mirror pods", mirrorPodAnnotation, node)
				}
				if pod.Spec.NodeName != node {
					return forbid("node %q can only create pods with spec.nodeName set to itself", node)
				}
			case Delete:
				if pod, _ := a.OldObject.(*corev1.Pod); pod != nil && pod.Spec.NodeName != node {
					return forbid("node %q can only delete pods with spec.nodeName set to itself", node)
				}
			}
		case "status":
			if pod, _ := a.OldObject.(*corev1.Pod); pod != nil && pod.Spec.NodeName != node {
				return forbid("node %q can only update pod status for pods with spec.nodeName set to itself", node)
			}
		case "eviction":
			return n.evict(ctx, a, node, forbid)
		default:
			return forbid("unexpected pod subresource %q, only 'status' and 'eviction' are allowed", a.Subresource)
		}
	case gr.Group == "" && gr.Resource == "serviceaccounts":
		if a.Operation == Create && a.Subresource == "token" {
			return n.token(ctx, a, node, forbid)
		}
	case gr.Group == "" && gr.Resource == "nodes":
		if a.Name != node {
			return forbid("node %q is not allowed to modify node %q", node, a.Name)
		}
		return validateOwnNode(node, a, forbid)
	case gr.Group == "" && gr.Resource == "persistentvolumeclaims":
		if a.Subresource != "status" {
			return forbid("may only update PVC status")
		}
		return pvcStatus(node, a, forbid)
	case gr.Group == "certificates.k8s.io" && gr.Resource == "podcertificaterequests":
		return n.podCertificateRequest(ctx, a, node, forbid)
	case gr.Group == "coordination.k8s.io" && gr.Resource == "leases":
		if a.Namespace == "kube-node-lease" && a.Name != node {
			return forbid("can only access node lease with the same name as the requesting node")
		}
	}
	return nil
}

// pvcStatus is upstream's check of a node's PVC status write: the kubelet
// reports a volume's expansion, so only status.capacity, conditions,
// allocatedResources and allocatedResourceStatuses may change; not the
// claim's metadata, nor its phase or access modes.
func pvcStatus(node string, a *Attributes, forbid func(string, ...any) error) error {
	if a.Operation != Update {
		return forbid("unexpected operation %q", a.Operation)
	}
	oldPVC, _ := a.OldObject.(*corev1.PersistentVolumeClaim)
	newPVC, _ := a.Object.(*corev1.PersistentVolumeClaim)
	if oldPVC == nil || newPVC == nil {
		return forbid("unexpected type %T", a.Object)
	}
	others := func(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
		pvc = pvc.DeepCopy()
		pvc.ResourceVersion, pvc.ManagedFields = "", nil
		pvc.Status.Capacity, pvc.Status.Conditions = nil, nil
		pvc.Status.AllocatedResources, pvc.Status.AllocatedResourceStatuses = nil, nil
		return pvc
	}
	if o, n := others(oldPVC), others(newPVC); !equality.Semantic.DeepEqual(o, n) {
		return forbid("node %q is not allowed to update fields other than status.quantity and status.conditions: %v", node, diff.Diff(o, n))
	}
	return nil
}

// validateOwnNode is upstream's check of a node's write to its own Node.
func validateOwnNode(node string, a *Attributes, forbid func(string, ...any) error) error {
	obj, _ := a.Object.(*corev1.Node)
	if obj == nil {
		return nil
	}
	switch a.Operation {
	case Create:
		if obj.Spec.ConfigSource != nil {
			return forbid("node %q is not allowed to create pods with a non-nil configSource", node)
		}
		if bad := forbiddenNodeLabels(obj.Labels, nil); len(bad) > 0 {
			return forbid("node %q is not allowed to set the following labels: %s", node, strings.Join(bad, ", "))
		}
	case Update:
		old, _ := a.OldObject.(*corev1.Node)
		if old == nil {
			return nil
		}
		if obj.Spec.ConfigSource != nil && !equality.Semantic.DeepEqual(obj.Spec.ConfigSource, old.Spec.ConfigSource) {
			return forbid("node %q is not allowed to update configSource to a new non-nil configSource", node)
		}
		if !equality.Semantic.DeepEqual(obj.Spec.Taints, old.Spec.Taints) {
			return forbid("node %q is not allowed to modify taints", node)
		}
		if !equality.Semantic.DeepEqual(obj.OwnerReferences, old.OwnerReferences) {
			return forbid("node %q is not allowed to modify ownerReferences", node)
		}
		if bad := forbiddenNodeLabels(obj.Labels, old.Labels); len(bad) > 0 {
			return forbid("is not allowed to modify labels: %s", strings.Join(bad, ", "))
		}
	}
	return nil
}

// kubeletLabels are the kubernetes.io labels a kubelet sets on its own
// Node (upstream's k8s.io/kubelet well-known labels).
var kubeletLabels = []string{
	corev1.LabelHostname, corev1.LabelTopologyZone, corev1.LabelTopologyRegion,
	corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion,
	corev1.LabelInstanceType, corev1.LabelInstanceTypeStable,
	corev1.LabelOSStable, corev1.LabelArchStable,
	"beta.kubernetes.io/os", "beta.kubernetes.io/arch",
}

// NodeLabelAllowed reports whether a node may set label key on its own
// Node: not under node-restriction.kubernetes.io, and under kubernetes.io
// or k8s.io (or their subdomains) only the kubelet's labels and those
// under kubelet.kubernetes.io and node.kubernetes.io. `skiff agent
// --node-labels` is checked with it before the agent starts, as
// upstream's kubelet checks its flag.
func NodeLabelAllowed(key string) bool {
	ns, _, found := strings.Cut(key, "/")
	if !found {
		return true
	}
	under := func(domain string) bool { return ns == domain || strings.HasSuffix(ns, "."+domain) }
	if under(corev1.LabelNamespaceNodeRestriction) {
		return false
	}
	if !under("kubernetes.io") && !under("k8s.io") {
		return true
	}
	return slices.Contains(kubeletLabels, key) || under(corev1.LabelNamespaceSuffixKubelet) || under(corev1.LabelNamespaceSuffixNode)
}

// forbiddenNodeLabels are the keys added, removed or changed between old
// and labels that a node may not touch, sorted.
func forbiddenNodeLabels(labels, old map[string]string) []string {
	var bad []string
	check := func(k string) {
		if !NodeLabelAllowed(k) && !slices.Contains(bad, k) {
			bad = append(bad, k)
		}
	}
	for k, v := range labels {
		if ov, ok := old[k]; !ok || ov != v {
			check(k)
		}
	}
	for k := range old {
		if _, ok := labels[k]; !ok {
			check(k)
		}
	}
	slices.Sort(bad)
	return bad
}

// pod reads a pod the request names: NotFound as it is, any other failure
// 403.
func (n NodeRestriction) pod(ctx context.Context, ns, name string, forbid func(string, ...any) error) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	if n.objects == nil {
		return nil, forbid("no pods to check the request against")
	}
	if err := n.objects.Get(ctx, nodePodsGVR, ns, name, false, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, err
		}
		return nil, forbid("%v", err)
	}
	return pod, nil
}

// evict lets a node evict only pods bound to it.
func (n NodeRestriction) evict(ctx context.Context, a *Attributes, node string, forbid func(string, ...any) error) error {
	if a.Operation != Create {
		return forbid("unexpected operation %s", a.Operation)
	}
	ev, ok := a.Object.(*policyv1.Eviction)
	if !ok {
		return forbid("unexpected type %T", a.Object)
	}
	name := a.Name
	if name == "" {
		if name = ev.Name; name == "" {
			return forbid("could not determine pod from request data")
		}
	}
	pod, err := n.pod(ctx, a.Namespace, name, forbid)
	if err != nil {
		return err
	}
	if pod.Spec.NodeName != node {
		return forbid("node %s can only evict pods with spec.nodeName set to itself", node)
	}
	return nil
}

// token lets a node ask only for tokens bound (by UID) to a pod on it, for
// an audience one of the pod's volumes asks for, or one the node is
// authorized to request (upstream's ServiceAccountNodeAudienceRestriction,
// on by default).
func (n NodeRestriction) token(ctx context.Context, a *Attributes, node string, forbid func(string, ...any) error) error {
	tr, ok := a.Object.(*authenticationv1.TokenRequest)
	if !ok {
		return forbid("unexpected type %T", a.Object)
	}
	ref := tr.Spec.BoundObjectRef
	if ref == nil || ref.APIVersion != "v1" || ref.Kind != "Pod" || ref.Name == "" {
		return forbid("node requested token not bound to a pod")
	}
	if ref.UID == "" {
		return forbid("node requested token with a pod binding without a uid")
	}
	pod, err := n.pod(ctx, a.Namespace, ref.Name, forbid)
	if err != nil {
		return err
	}
	if ref.UID != pod.UID {
		return forbid("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID)
	}
	if pod.Spec.NodeName != node {
		return forbid("node requested token bound to a pod scheduled on a different node")
	}
	return n.audience(ctx, a, tr, pod, forbid)
}

// audience is upstream's validateNodeServiceAccountAudience.
func (n NodeRestriction) audience(ctx context.Context, a *Attributes, tr *authenticationv1.TokenRequest, pod *corev1.Pod, forbid func(string, ...any) error) error {
	audience := ""
	switch len(tr.Spec.Audiences) {
	case 0:
	case 1:
		audience = tr.Spec.Audiences[0]
	default:
		return forbid("node may only request 0 or 1 audiences")
	}
	found, err := n.podUsesAudience(ctx, pod, audience)
	if err != nil {
		return forbid("error validating audience %q: %v", audience, err)
	}
	if found {
		return nil
	}
	if n.authz != nil {
		d, _, err := n.authz.Authorize(ctx, authz.Attributes{
			User: a.User, Verb: "request-serviceaccounts-token-audience",
			APIGroup: a.Resource.Group, APIVersion: a.Resource.Version, Resource: audience,
			Namespace: a.Namespace, Name: a.Name, ResourceRequest: true,
		})
		if d == authz.Allow {
			return nil
		}
		if err != nil {
			return forbid("error authorizing %s to request tokens for audience %q: %v", a.User.Name, audience, err)
		}
	}
	return forbid("%s is not authorized to request tokens for audience %q", a.User.Name, audience)
}

// podUsesAudience says whether one of pod's volumes asks for tokens of
// audience: a projected serviceAccountToken, or a CSI driver (inline, or
// behind a claim or a generic ephemeral volume's claim) whose
// tokenRequests name it. Lookups that fail are returned when no volume
// answered yes.
func (n NodeRestriction) podUsesAudience(ctx context.Context, pod *corev1.Pod, audience string) (bool, error) {
	var errs []error
	for _, v := range pod.Spec.Volumes {
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.ServiceAccountToken != nil && src.ServiceAccountToken.Audience == audience {
					return true, nil
				}
			}
		}
		var driver string
		var err error
		switch {
		case v.Ephemeral != nil && v.Ephemeral.VolumeClaimTemplate != nil:
			driver, err = n.claimDriver(ctx, pod.Namespace, pod.Name+"-"+v.Name)
		case v.PersistentVolumeClaim != nil:
			driver, err = n.claimDriver(ctx, pod.Namespace, v.PersistentVolumeClaim.ClaimName)
		case v.CSI != nil:
			driver = v.CSI.Driver
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if driver == "" {
			continue
		}
		d := &storagev1.CSIDriver{}
		if err := n.objects.Get(ctx, csiDriversGVR, "", driver, false, d); err != nil {
			errs = append(errs, err)
			continue
		}
		for _, t := range d.Spec.TokenRequests {
			if t.Audience == audience {
				return true, nil
			}
		}
	}
	return false, errors.Join(errs...)
}

// claimDriver is the CSI driver of the volume a claim is bound to ("" for
// a volume of another kind).
func (n NodeRestriction) claimDriver(ctx context.Context, ns, claim string) (string, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := n.objects.Get(ctx, pvcsGVR, ns, claim, false, pvc); err != nil {
		return "", err
	}
	pv := &corev1.PersistentVolume{}
	if err := n.objects.Get(ctx, pvsGVR, "", pvc.Spec.VolumeName, false, pv); err != nil {
		return "", err
	}
	if pv.Spec.CSI == nil {
		return "", nil
	}
	return pv.Spec.CSI.Driver, nil
}

var (
	csiDriversGVR = storagev1.SchemeGroupVersion.WithResource("csidrivers")
	pvcsGVR       = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	pvsGVR        = corev1.SchemeGroupVersion.WithResource("persistentvolumes")
	nodePodsGVR   = corev1.SchemeGroupVersion.WithResource("pods")
	nodesGVR      = corev1.SchemeGroupVersion.WithResource("nodes")
	nodeSAsGVR    = corev1.SchemeGroupVersion.WithResource("serviceaccounts")
)

// podCertificateRequest is upstream's check of a node's
// PodCertificateRequest: a UID that does not match may be informer lag
// and is a retryable error, anything else is forbidden.
func (n NodeRestriction) podCertificateRequest(ctx context.Context, a *Attributes, node string, forbid func(string, ...any) error) error {
	if a.Operation != Create {
		return forbid("unexpected operation %s", a.Operation)
	}
	if a.Subresource != "" {
		return forbid("unexpected subresource %s", a.Subresource)
	}
	req, ok := a.Object.(*certificatesv1.PodCertificateRequest)
	if !ok {
		return forbid("unexpected type %T", a.Object)
	}
	ns, s := a.Namespace, &req.Spec
	if string(s.NodeName) != node {
		return forbid("PodCertificateRequest.Spec.NodeName=%q, which is not the requesting node %q", s.NodeName, node)
	}
	if n.objects == nil {
		return forbid("no pods to check the request against")
	}
	var nodeObj corev1.Node
	if err := n.objects.Get(ctx, nodesGVR, "", node, false, &nodeObj); err != nil {
		return forbid("while retrieving node %q named in the PodCertificateRequest: %v", node, err)
	}
	if nodeObj.UID != s.NodeUID {
		return apierrors.NewInternalError(fmt.Errorf("PodCertificateRequest for pod %q names node UID %q, inconsistent with the running node (%q)", ns+"/"+s.PodName, s.NodeUID, nodeObj.UID))
	}
	pod, err := n.pod(ctx, ns, s.PodName, forbid)
	if err != nil {
		return err
	}
	if s.PodUID != pod.UID {
		return apierrors.NewInternalError(fmt.Errorf("PodCertificateRequest for pod %q contains pod UID (%q) which differs from running pod %q", ns+"/"+s.PodName, s.PodUID, pod.UID))
	}
	if pod.Spec.NodeName != node {
		return forbid("pod %q is not running on node %q named in the PodCertificateRequest", ns+"/"+s.PodName, node)
	}
	if _, mirror := pod.Annotations[mirrorPodAnnotation]; mirror {
		return forbid("pod %q is a mirror pod", ns+"/"+s.PodName)
	}
	if s.ServiceAccountName != pod.Spec.ServiceAccountName {
		return forbid("PodCertificateRequest for pod %q contains serviceAccountName (%q) that differs from running pod (%q)", ns+"/"+s.PodName, s.ServiceAccountName, pod.Spec.ServiceAccountName)
	}
	var sa corev1.ServiceAccount
	if err := n.objects.Get(ctx, nodeSAsGVR, ns, s.ServiceAccountName, false, &sa); err != nil {
		return forbid("while retrieving service account %q named in the PodCertificateRequest: %v", ns+"/"+s.ServiceAccountName, err)
	}
	if sa.UID != s.ServiceAccountUID {
		return apierrors.NewInternalError(fmt.Errorf("PodCertificateRequest for pod %q names service account UID %q, which differs from the running service account (%q)", ns+"/"+s.PodName, s.ServiceAccountUID, sa.UID))
	}
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.PodCertificate != nil && src.PodCertificate.SignerName == s.SignerName {
				return nil
			}
		}
	}
	return forbid("pod %q has no podCertificate volume for signer %q", ns+"/"+s.PodName, s.SignerName)
}
