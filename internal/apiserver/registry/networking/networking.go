// Package networking holds the rules of the networking.k8s.io/v1
// resources: networkpolicies, ingresses (with status) and ingressclasses.
// Each has upstream's defaults, validation with the field paths a client
// sees, generation tracking and kubectl's table columns.
package networking

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resources lists the networking.k8s.io/v1 resources.
func Resources(registry.Deps) []registry.Resource {
	return []registry.Resource{NetworkPolicyResource(), IngressResource(), IngressClassResource()}
}

func nameColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]}
}

func ageColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}
}
