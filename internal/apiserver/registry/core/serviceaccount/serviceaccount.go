// Package serviceaccount holds the registry rules of core/v1 service
// accounts: secret references and the table kubectl prints.
package serviceaccount

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resource describes core/v1 serviceaccounts.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:        corev1.SchemeGroupVersion,
		Resource:            "serviceaccounts",
		Kind:                "ServiceAccount",
		ListKind:            "ServiceAccountList",
		SingularName:        "serviceaccount",
		ShortNames:          []string{"sa"},
		Namespaced:          true,
		StoragePrefix:       "serviceaccounts",
		ReturnDeletedObject: true, // as upstream
		New:                 func() runtime.Object { return &corev1.ServiceAccount{} },
		NewList:             func() runtime.Object { return &corev1.ServiceAccountList{} },
		Strategy:            Strategy{},
		// TokenRequest: internal/apiserver/serviceaccounts.go with
		// registry/tokenrequest.
		Subresources: map[string]registry.Subresource{"token": registry.TokenRequestSubresource()},
	}
}

// Strategy is the registry strategy of service accounts.
type Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = Strategy{}

// Validate checks the secret references.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validate(obj.(*corev1.ServiceAccount))
}

// ValidateUpdate checks an update like a create.
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validate(obj.(*corev1.ServiceAccount))
}

func validate(sa *corev1.ServiceAccount) field.ErrorList {
	var errs field.ErrorList
	for i, ref := range sa.ImagePullSecrets {
		if ref.Name == "" {
			errs = append(errs, field.Required(field.NewPath("imagePullSecrets").Index(i).Child("name"), ""))
		}
	}
	return errs
}

// TableColumns are the columns of `kubectl get serviceaccounts`.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Secrets", Type: "string", Description: corev1.ServiceAccount{}.SwaggerDoc()["secrets"]},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
	}
}

// TableRow renders one service account.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	sa, ok := obj.(*corev1.ServiceAccount)
	if !ok {
		return nil, fmt.Errorf("serviceaccount table: unexpected object %T", obj)
	}
	return []interface{}{sa.Name, int64(len(sa.Secrets)), registry.Age(sa.CreationTimestamp)}, nil
}
