package rbac

import (
	"context"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// RoleBindingStrategy is the rolebindings strategy.
type RoleBindingStrategy struct{ nameStrategy }

// ClusterRoleBindingStrategy is the clusterrolebindings strategy.
type ClusterRoleBindingStrategy struct{ nameStrategy }

var (
	_ registry.Strategy = RoleBindingStrategy{}
	_ registry.Strategy = ClusterRoleBindingStrategy{}
)

// DefaultRoleRef sets roleRef.apiGroup to rbac.authorization.k8s.io.
func DefaultRoleRef(ref *rbacv1.RoleRef) {
	if ref.APIGroup == "" {
		ref.APIGroup = rbacv1.GroupName
	}
}

// DefaultSubjects sets each subject's apiGroup: "" for service accounts,
// rbac.authorization.k8s.io for users and groups.
func DefaultSubjects(subjects []rbacv1.Subject) {
	for i := range subjects {
		s := &subjects[i]
		if s.APIGroup != "" {
			continue
		}
		switch s.Kind {
		case rbacv1.UserKind, rbacv1.GroupKind:
			s.APIGroup = rbacv1.GroupName
		}
	}
}

// PrepareForCreate applies defaults.
func (RoleBindingStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	b := obj.(*rbacv1.RoleBinding)
	DefaultRoleRef(&b.RoleRef)
	DefaultSubjects(b.Subjects)
}

// PrepareForUpdate applies defaults.
func (s RoleBindingStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	s.PrepareForCreate(ctx, obj)
}

// Validate checks a new role binding.
func (RoleBindingStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	b := obj.(*rbacv1.RoleBinding)
	return ValidateBinding(b.RoleRef, b.Subjects, true)
}

// ValidateUpdate also keeps roleRef immutable.
func (s RoleBindingStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	b, o := obj.(*rbacv1.RoleBinding), old.(*rbacv1.RoleBinding)
	return append(s.Validate(ctx, obj), validateRoleRefUnchanged(b.RoleRef, o.RoleRef)...)
}

// PrepareForCreate applies defaults.
func (ClusterRoleBindingStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	b := obj.(*rbacv1.ClusterRoleBinding)
	DefaultRoleRef(&b.RoleRef)
	DefaultSubjects(b.Subjects)
}

// PrepareForUpdate applies defaults.
func (s ClusterRoleBindingStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	s.PrepareForCreate(ctx, obj)
}

// Validate checks a new cluster role binding.
func (ClusterRoleBindingStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	b := obj.(*rbacv1.ClusterRoleBinding)
	return ValidateBinding(b.RoleRef, b.Subjects, false)
}

// ValidateUpdate also keeps roleRef immutable.
func (s ClusterRoleBindingStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	b, o := obj.(*rbacv1.ClusterRoleBinding), old.(*rbacv1.ClusterRoleBinding)
	return append(s.Validate(ctx, obj), validateRoleRefUnchanged(b.RoleRef, o.RoleRef)...)
}

func validateRoleRefUnchanged(ref, old rbacv1.RoleRef) field.ErrorList {
	if apiequality.Semantic.DeepEqual(ref, old) {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("roleRef"), ref, "cannot change roleRef")}
}

// ValidateBinding checks a (defaulted) roleRef and the subjects. A
// namespaced binding may refer to a Role or a ClusterRole, a cluster one
// only to a ClusterRole; service account subjects of a cluster binding need
// a namespace.
func ValidateBinding(ref rbacv1.RoleRef, subjects []rbacv1.Subject, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	rp := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(rp.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	kinds := []string{"ClusterRole"}
	if namespaced {
		kinds = []string{"Role", "ClusterRole"}
	}
	if !contains(kinds, ref.Kind) {
		errs = append(errs, field.NotSupported(rp.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(rp.Child("name"), ""))
	} else {
		for _, msg := range NameIsPathSegment(ref.Name, false) {
			errs = append(errs, field.Invalid(rp.Child("name"), ref.Name, msg))
		}
	}
	for i, s := range subjects {
		errs = append(errs, validateSubject(s, namespaced, field.NewPath("subjects").Index(i))...)
	}
	return errs
}

var subjectKinds = []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}

func validateSubject(s rbacv1.Subject, namespaced bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), ""))
	}
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		if s.Name != "" {
			for _, msg := range validation.IsDNS1123Subdomain(s.Name) {
				errs = append(errs, field.Invalid(path.Child("name"), s.Name, msg))
			}
		}
		if s.APIGroup != "" {
			errs = append(errs, field.NotSupported(path.Child("apiGroup"), s.APIGroup, []string{""}))
		}
		if !namespaced && s.Namespace == "" {
			errs = append(errs, field.Required(path.Child("namespace"), ""))
		}
	case rbacv1.UserKind, rbacv1.GroupKind:
		if s.APIGroup != rbacv1.GroupName {
			errs = append(errs, field.NotSupported(path.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("kind"), s.Kind, subjectKinds))
	}
	return errs
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// bindingColumns are kubectl's columns for both kinds of binding; the
// subjects are wide columns.
func bindingColumns(kind string) []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Role", Type: "string", Description: rbacv1.RoleBinding{}.SwaggerDoc()["roleRef"]},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		{Name: "Users", Type: "string", Priority: 1, Description: "Users in the " + kind},
		{Name: "Groups", Type: "string", Priority: 1, Description: "Groups in the " + kind},
		{Name: "ServiceAccounts", Type: "string", Priority: 1, Description: "ServiceAccounts in the " + kind},
	}
}

func bindingRow(m metav1.ObjectMeta, ref rbacv1.RoleRef, subjects []rbacv1.Subject) []interface{} {
	var users, groups, sas []string
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		case rbacv1.ServiceAccountKind:
			if s.Namespace != "" {
				sas = append(sas, s.Namespace+"/"+s.Name)
			} else {
				sas = append(sas, s.Name)
			}
		}
	}
	return []interface{}{
		m.Name, ref.Kind + "/" + ref.Name, registry.Age(m.CreationTimestamp),
		strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", "),
	}
}

// TableColumns are kubectl's columns for role bindings.
func (RoleBindingStrategy) TableColumns() []metav1.TableColumnDefinition {
	return bindingColumns("roleBinding")
}

// TableRow renders one role binding.
func (RoleBindingStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	b := obj.(*rbacv1.RoleBinding)
	return bindingRow(b.ObjectMeta, b.RoleRef, b.Subjects), nil
}

// TableColumns are kubectl's columns for cluster role bindings.
func (ClusterRoleBindingStrategy) TableColumns() []metav1.TableColumnDefinition {
	return bindingColumns("clusterRoleBinding")
}

// TableRow renders one cluster role binding.
func (ClusterRoleBindingStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	b := obj.(*rbacv1.ClusterRoleBinding)
	return bindingRow(b.ObjectMeta, b.RoleRef, b.Subjects), nil
}
