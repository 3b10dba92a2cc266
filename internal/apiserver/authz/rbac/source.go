package rbac

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Reader reads served objects; the API server's registry.Reader (its watch
// cache) is one.
type Reader interface {
	List(ctx context.Context, gvr schema.GroupVersionResource, ns string, latest bool, into runtime.Object) error
	Get(ctx context.Context, gvr schema.GroupVersionResource, ns, name string, live bool, into runtime.Object) error
}

// ReaderSource reads the RBAC objects through r from the cache.
func ReaderSource(r Reader) Source { return readerSource{r} }

type readerSource struct{ r Reader }

func gvr(resource string) schema.GroupVersionResource {
	return rbacv1.SchemeGroupVersion.WithResource(resource)
}

func (s readerSource) GetRole(ctx context.Context, namespace, name string) (*rbacv1.Role, error) {
	var r rbacv1.Role
	if err := s.r.Get(ctx, gvr("roles"), namespace, name, false, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func (s readerSource) GetClusterRole(ctx context.Context, name string) (*rbacv1.ClusterRole, error) {
	var r rbacv1.ClusterRole
	if err := s.r.Get(ctx, gvr("clusterroles"), "", name, false, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func (s readerSource) ListRoleBindings(ctx context.Context, namespace string) ([]*rbacv1.RoleBinding, error) {
	var l rbacv1.RoleBindingList
	if err := s.r.List(ctx, gvr("rolebindings"), namespace, false, &l); err != nil {
		return nil, err
	}
	out := make([]*rbacv1.RoleBinding, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out, nil
}

func (s readerSource) ListClusterRoleBindings(ctx context.Context) ([]*rbacv1.ClusterRoleBinding, error) {
	var l rbacv1.ClusterRoleBindingList
	if err := s.r.List(ctx, gvr("clusterrolebindings"), "", false, &l); err != nil {
		return nil, err
	}
	out := make([]*rbacv1.ClusterRoleBinding, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out, nil
}

// StaticSource serves fixed objects (tests, and policy known up front).
type StaticSource struct {
	Roles               []*rbacv1.Role
	RoleBindings        []*rbacv1.RoleBinding
	ClusterRoles        []*rbacv1.ClusterRole
	ClusterRoleBindings []*rbacv1.ClusterRoleBinding
}

var _ Source = (*StaticSource)(nil)

func (s *StaticSource) GetRole(_ context.Context, namespace, name string) (*rbacv1.Role, error) {
	for _, r := range s.Roles {
		if r.Namespace == namespace && r.Name == name {
			return r, nil
		}
	}
	return nil, notFound("roles", name)
}

func (s *StaticSource) GetClusterRole(_ context.Context, name string) (*rbacv1.ClusterRole, error) {
	for _, r := range s.ClusterRoles {
		if r.Name == name {
			return r, nil
		}
	}
	return nil, notFound("clusterroles", name)
}

func (s *StaticSource) ListRoleBindings(_ context.Context, namespace string) ([]*rbacv1.RoleBinding, error) {
	var out []*rbacv1.RoleBinding
	for _, b := range s.RoleBindings {
		if b.Namespace == namespace {
			out = append(out, b)
		}
	}
	return out, nil
}

func (s *StaticSource) ListClusterRoleBindings(context.Context) ([]*rbacv1.ClusterRoleBinding, error) {
	return s.ClusterRoleBindings, nil
}

func notFound(resource, name string) error {
	return apierrors.NewNotFound(schema.GroupResource{Group: rbacv1.GroupName, Resource: resource}, name)
}
