// Package bootstrappolicy is the RBAC policy a cluster starts with:
// upstream's default roles and bindings (cluster-admin, admin, edit, view,
// system:basic-user, system:discovery, system:public-info-viewer,
// system:node, system:node-proxier, system:kube-scheduler,
// system:kube-controller-manager, system:volume-scheduler, the
// certificates.k8s.io roles, one system:controller:* role per controller,
// and the roles of kube-system and kube-public), plus Skiff's few bindings
// for its own agents (SkiffClusterRoles, SkiffClusterRoleBindings).
//
// The upstream objects are data, kept verbatim in policy/*.yaml as
// k8s.io/kubernetes v1.37.2 renders them (its bootstrappolicy testdata with
// the default feature gates): clients and conformance depend on their exact
// rules. Reconcile writes them at start without clobbering user changes.
package bootstrappolicy

import (
	"embed"
	"fmt"
	"strings"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

//go:embed policy/*.yaml
var files embed.FS

// AutoUpdateAnnotation set to "false" on a role or binding keeps Reconcile
// from changing it.
const AutoUpdateAnnotation = "rbac.authorization.kubernetes.io/autoupdate"

// Policy is the whole bootstrap policy.
type Policy struct {
	ClusterRoles        []rbacv1.ClusterRole
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
	Roles               []rbacv1.Role
	RoleBindings        []rbacv1.RoleBinding
}

func load[T any](name string) ([]T, error) {
	b, err := files.ReadFile("policy/" + name)
	if err != nil {
		return nil, err
	}
	var l struct {
		metav1.TypeMeta `json:",inline"`
		metav1.ListMeta `json:"metadata"`
		Items           []T `json:"items"`
	}
	if err := yaml.UnmarshalStrict(b, &l); err != nil {
		return nil, fmt.Errorf("bootstrap policy %s: %w", name, err)
	}
	return l.Items, nil
}

// Load returns the bootstrap policy.
func Load() (*Policy, error) {
	p := &Policy{}
	for _, f := range []string{"cluster-roles.yaml", "controller-roles.yaml"} {
		items, err := load[rbacv1.ClusterRole](f)
		if err != nil {
			return nil, err
		}
		p.ClusterRoles = append(p.ClusterRoles, items...)
	}
	for _, f := range []string{"cluster-role-bindings.yaml", "controller-role-bindings.yaml"} {
		items, err := load[rbacv1.ClusterRoleBinding](f)
		if err != nil {
			return nil, err
		}
		p.ClusterRoleBindings = append(p.ClusterRoleBindings, items...)
	}
	roles, err := load[rbacv1.Role]("namespace-roles.yaml")
	if err != nil {
		return nil, err
	}
	p.Roles = roles
	bindings, err := load[rbacv1.RoleBinding]("namespace-role-bindings.yaml")
	if err != nil {
		return nil, err
	}
	p.RoleBindings = bindings
	p.ClusterRoles = append(p.ClusterRoles, SkiffClusterRoles()...)
	p.ClusterRoleBindings = append(p.ClusterRoleBindings, SkiffClusterRoleBindings()...)
	p.addServiceIdentities()
	return p, nil
}

// KubeletServingApproverRole lets the controller manager approve kubelet
// serving certificates (Skiff's csrapproving addition).
const KubeletServingApproverRole = "skiff:kubelet-serving-approver"

// ControllerManagerUser is the controller manager's identity.
const ControllerManagerUser = "system:kube-controller-manager"

// SharedControllerPrefix names the bindings of ShareControllerIdentity.
const SharedControllerPrefix = "skiff:controller:"

// CertificateControllerAccount is the kube-system service account of the
// csrapproving and csrsigning controllers (upstream's).
const CertificateControllerAccount = "certificate-controller"

// ShareControllerIdentity binds every system:controller:* role (and
// Skiff's kubelet-serving approver role) to the controller manager's own
// user, for a controller manager run without
// --use-service-account-credentials: then every controller uses that one
// identity, which holds the union of their roles
// (skiff:controller:<name>). By default each controller runs as its own
// kube-system service account, which upstream's bindings already name, and
// the controller manager's user keeps only system:kube-controller-manager.
func (p *Policy) ShareControllerIdentity() {
	p.ClusterRoleBindings = append(p.ClusterRoleBindings, rbacv1.ClusterRoleBinding{
		ObjectMeta: defaults(SharedControllerPrefix + "kubelet-serving-approver"),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: KubeletServingApproverRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: ControllerManagerUser}},
	})
	p.addControllerManagerBindings()
}

func (p *Policy) addControllerManagerBindings() {
	const prefix = "system:controller:"
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: ControllerManagerUser}}
	for _, r := range p.ClusterRoles {
		if name, ok := strings.CutPrefix(r.Name, prefix); ok {
			p.ClusterRoleBindings = append(p.ClusterRoleBindings, rbacv1.ClusterRoleBinding{
				ObjectMeta: defaults("skiff:controller:" + name),
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.Name},
				Subjects:   subject,
			})
		}
	}
	for _, r := range p.Roles {
		if name, ok := strings.CutPrefix(r.Name, prefix); ok {
			b := rbacv1.RoleBinding{
				ObjectMeta: defaults("skiff:controller:" + name),
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: r.Name},
				Subjects:   subject,
			}
			b.Namespace = r.Namespace
			p.RoleBindings = append(p.RoleBindings, b)
		}
	}
}

// ClusterRole returns the named cluster role of the policy.
func (p *Policy) ClusterRole(name string) (rbacv1.ClusterRole, bool) {
	for _, r := range p.ClusterRoles {
		if r.Name == name {
			return r, true
		}
	}
	return rbacv1.ClusterRole{}, false
}

// NodeRules are the rules of system:node: what the Node authorizer allows
// a node on the resources it does not subdivide by graph.
func NodeRules() []rbacv1.PolicyRule {
	r, err := nodeRole()
	if err != nil {
		panic(err) // the embedded policy is tested to load
	}
	return r.Rules
}

var nodeRole = sync.OnceValues(func() (rbacv1.ClusterRole, error) {
	roles, err := load[rbacv1.ClusterRole]("cluster-roles.yaml")
	for _, r := range roles {
		if r.Name == "system:node" {
			return r, nil
		}
	}
	return rbacv1.ClusterRole{}, fmt.Errorf("system:node: not in the policy (%v)", err)
})

func defaults(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:        name,
		Labels:      map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"},
		Annotations: map[string]string{AutoUpdateAnnotation: "true"},
	}
}

// Skiff's additions. A joined node agent runs its service proxy and
// network policy under the node's identity (system:node:<name>, group
// system:nodes) rather than as system:kube-proxy, and a joining node asks
// for its certificate with a bootstrap token (group system:bootstrappers),
// as kubeadm's kubeadm:kubelet-bootstrap binding allows.
const (
	// NodeNetworkRole lets the agents' service proxy, network policy and
	// pod routes read what they program: EndpointSlices (Services and
	// events are in system:node's rules), pods, namespaces,
	// NetworkPolicies, ServiceCIDRs, and every Node (internal/agent/routes routes each
	// other node's podCIDR via its InternalIP, as flannel's role allows).
	NodeNetworkRole = "skiff:node-network"
	// NodeLocalPathRole lets each agent's local-path provisioner
	// (internal/localpath) make and delete the volumes of its node:
	// claims and classes read, volumes created, read, resized and deleted,
	// claims' status written when a volume grows.
	NodeLocalPathRole = "skiff:node-local-path"
)

// SkiffClusterRoles are the roles Skiff adds to upstream's.
func SkiffClusterRoles() []rbacv1.ClusterRole {
	return []rbacv1.ClusterRole{{
		ObjectMeta: defaults(NodeNetworkRole),
		Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods", "namespaces", "nodes"}},
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies", "servicecidrs"}},
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}},
		},
	}, {
		// Skiff's csrapproving controller approves a node's own kubelet
		// serving certificate (upstream leaves that to the administrator),
		// so the controller manager may approve for that signer too.
		ObjectMeta: defaults(KubeletServingApproverRole),
		Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"approve"}, APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"}, ResourceNames: []string{"kubernetes.io/kubelet-serving"}},
		},
	}, {
		// The API server serves metrics.k8s.io itself; metrics-server's
		// manifest adds this role so that view, edit and admin (and so
		// `kubectl top`) can read it.
		ObjectMeta: withLabels(defaults("system:aggregated-metrics-reader"), map[string]string{
			"rbac.authorization.k8s.io/aggregate-to-view":  "true",
			"rbac.authorization.k8s.io/aggregate-to-edit":  "true",
			"rbac.authorization.k8s.io/aggregate-to-admin": "true",
		}),
		Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"metrics.k8s.io"}, Resources: []string{"pods", "nodes"}},
		},
	}, {
		ObjectMeta: defaults(NodeLocalPathRole),
		Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}},
			// The agent is its volumes' resizer (internal/localpath).
			{Verbs: []string{"update", "patch"}, APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims/status"}},
			{Verbs: []string{"get", "list", "watch", "create", "update", "delete"}, APIGroups: []string{""}, Resources: []string{"persistentvolumes"}},
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}},
		},
	}}
}

func withLabels(m metav1.ObjectMeta, labels map[string]string) metav1.ObjectMeta {
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	for k, v := range labels {
		m.Labels[k] = v
	}
	return m
}

// KubeletAPIAdminBinding binds system:kubelet-api-admin to the API
// server's kubelet client identity (KubeletAPIClientUser, the CN of
// pki's apiserver-kubelet-client certificate).
const (
	KubeletAPIAdminBinding = "skiff:kubelet-api-admin"
	KubeletAPIClientUser   = "kube-apiserver-kubelet-client"
)

// SkiffClusterRoleBindings are the bindings Skiff adds to upstream's.
func SkiffClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	group := func(name string) []rbacv1.Subject {
		return []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}}
	}
	ref := func(name string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
	}
	return []rbacv1.ClusterRoleBinding{
		{ObjectMeta: defaults("skiff:node-bootstrapper"), RoleRef: ref("system:node-bootstrapper"), Subjects: group("system:bootstrappers")},
		{ObjectMeta: defaults(NodeNetworkRole), RoleRef: ref(NodeNetworkRole), Subjects: group("system:nodes")},
		{ObjectMeta: defaults(KubeletServingApproverRole), RoleRef: ref(KubeletServingApproverRole), Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: CertificateControllerAccount, Namespace: "kube-system"}}},
		{ObjectMeta: defaults(NodeLocalPathRole), RoleRef: ref(NodeLocalPathRole), Subjects: group("system:nodes")},
		// Kubelets authorize every request with a SubjectAccessReview; the
		// API server's kubelet client (logs, exec, port-forward, metrics)
		// uses their whole API, as kubeadm's admin-group certificate may.
		{ObjectMeta: defaults(KubeletAPIAdminBinding), RoleRef: ref("system:kubelet-api-admin"), Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: KubeletAPIClientUser}}},
	}
}
