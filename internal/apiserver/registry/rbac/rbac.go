// Package rbac holds the rules of rbac.authorization.k8s.io/v1 roles,
// clusterroles, rolebindings and clusterrolebindings: names that are path
// segments rather than DNS names, policy rule and subject validation,
// binding defaults, an immutable roleRef, and kubectl's tables.
package rbac

import (
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resources lists the four RBAC resources. Writes are checked for
// escalation (escalation.go) against deps.Authorizer.
func Resources(deps registry.Deps) []registry.Resource {
	gv := rbacv1.SchemeGroupVersion
	ns := nameStrategy{esc: NewEscalation(deps.Authorizer, deps.Reader)}
	return []registry.Resource{
		{
			GroupVersion: gv, Resource: "roles", Kind: "Role", ListKind: "RoleList", SingularName: "role",
			Namespaced: true, StoragePrefix: "roles",
			New:      func() runtime.Object { return &rbacv1.Role{} },
			NewList:  func() runtime.Object { return &rbacv1.RoleList{} },
			Strategy: RoleStrategy{ns},
		},
		{
			GroupVersion: gv, Resource: "clusterroles", Kind: "ClusterRole", ListKind: "ClusterRoleList", SingularName: "clusterrole",
			StoragePrefix: "clusterroles",
			New:           func() runtime.Object { return &rbacv1.ClusterRole{} },
			NewList:       func() runtime.Object { return &rbacv1.ClusterRoleList{} },
			Strategy:      ClusterRoleStrategy{ns},
		},
		{
			GroupVersion: gv, Resource: "rolebindings", Kind: "RoleBinding", ListKind: "RoleBindingList", SingularName: "rolebinding",
			Namespaced: true, StoragePrefix: "rolebindings",
			New:      func() runtime.Object { return &rbacv1.RoleBinding{} },
			NewList:  func() runtime.Object { return &rbacv1.RoleBindingList{} },
			Strategy: RoleBindingStrategy{ns},
		},
		{
			GroupVersion: gv, Resource: "clusterrolebindings", Kind: "ClusterRoleBinding", ListKind: "ClusterRoleBindingList",
			SingularName: "clusterrolebinding", StoragePrefix: "clusterrolebindings",
			New:      func() runtime.Object { return &rbacv1.ClusterRoleBinding{} },
			NewList:  func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
			Strategy: ClusterRoleBindingStrategy{ns},
		},
	}
}

// nameStrategy is shared by the four RBAC strategies: names are path
// segments, roles show NAME and CREATED AT (upstream's default table), and
// writes are checked for escalation (nil: not checked).
type nameStrategy struct {
	registry.DefaultStrategy
	esc *Escalation
}

// ValidateName accepts any name that can be a URL path segment: not "."
// or "..", and without "/" or "%".
func (nameStrategy) ValidateName(name string, prefix bool) []string {
	return NameIsPathSegment(name, prefix)
}

// NameIsPathSegment validates an RBAC name (or generateName prefix).
func NameIsPathSegment(name string, prefix bool) []string {
	var msgs []string
	if !prefix {
		for _, bad := range []string{".", ".."} {
			if name == bad {
				msgs = append(msgs, "may not be '"+bad+"'")
			}
		}
	}
	for i := 0; i < len(name); i++ {
		switch name[i] {
		case '/':
			msgs = appendOnce(msgs, "may not contain '/'")
		case '%':
			msgs = appendOnce(msgs, "may not contain '%'")
		}
	}
	return msgs
}

func appendOnce(msgs []string, m string) []string {
	for _, have := range msgs {
		if have == m {
			return msgs
		}
	}
	return append(msgs, m)
}

// TableColumns are upstream's default columns: NAME and CREATED AT.
func (nameStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Created At", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	}
}

// TableRow renders the name and the creation time in RFC 3339, UTC.
func (nameStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	m := obj.(metav1.Object)
	return []interface{}{m.GetName(), m.GetCreationTimestamp().UTC().Format(time.RFC3339)}, nil
}
