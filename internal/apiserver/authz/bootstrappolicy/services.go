package bootstrappolicy

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

// The identities `skiff server` runs cluster DNS and the load-balancer
// allocator under (client certificates from the cluster CA, as the
// scheduler's), each with least privilege instead of admin:
//   - cluster DNS (internal/dns) reads what it answers from, as upstream's
//     system:kube-dns does for CoreDNS (plus EndpointSlices, which CoreDNS
//     reads today), and keeps Service, Endpoints and EndpointSlice
//     kube-system/kube-dns pointing at itself: it may create those kinds in
//     kube-system and change only the objects named kube-dns;
//   - the load-balancer allocator (internal/proxy/lb) holds upstream's
//     service controller role (system:controller:service-controller:
//     Services read, their status written, events, Nodes read).
const (
	ClusterDNSUser          = "system:skiff:cluster-dns"
	ClusterDNSRole          = "skiff:cluster-dns"
	ClusterDNSPublisherRole = "skiff:cluster-dns-publisher"
	ServiceLBUser           = "system:skiff:service-lb"
	ServiceLBBinding        = "skiff:service-lb"
	serviceControllerRole   = "system:controller:service-controller"
)

// addServiceIdentities adds the roles and bindings of cluster DNS and the
// load-balancer allocator.
func (p *Policy) addServiceIdentities() {
	user := func(name string) []rbacv1.Subject {
		return []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}
	}
	ref := func(name string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
	}
	p.ClusterRoles = append(p.ClusterRoles, rbacv1.ClusterRole{
		ObjectMeta: defaults(ClusterDNSRole),
		Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"services", "endpoints"}},
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}},
		},
	}, rbacv1.ClusterRole{
		// Bound in kube-system only.
		ObjectMeta: defaults(ClusterDNSPublisherRole),
		Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"create"}, APIGroups: []string{""}, Resources: []string{"services", "endpoints"}},
			{Verbs: []string{"create"}, APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}},
			{Verbs: []string{"get", "update", "patch"}, APIGroups: []string{""}, Resources: []string{"services", "endpoints"}, ResourceNames: []string{"kube-dns"}},
			{Verbs: []string{"get", "update", "patch"}, APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, ResourceNames: []string{"kube-dns"}},
		},
	})
	p.ClusterRoleBindings = append(p.ClusterRoleBindings,
		rbacv1.ClusterRoleBinding{ObjectMeta: defaults(ClusterDNSRole), RoleRef: ref(ClusterDNSRole), Subjects: user(ClusterDNSUser)},
		rbacv1.ClusterRoleBinding{ObjectMeta: defaults(ServiceLBBinding), RoleRef: ref(serviceControllerRole), Subjects: user(ServiceLBUser)},
	)
	b := rbacv1.RoleBinding{ObjectMeta: defaults(ClusterDNSPublisherRole), RoleRef: ref(ClusterDNSPublisherRole), Subjects: user(ClusterDNSUser)}
	b.Namespace = "kube-system"
	p.RoleBindings = append(p.RoleBindings, b)
}
