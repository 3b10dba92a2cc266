// Package dra holds the resource.k8s.io/v1 resources of Dynamic Resource
// Allocation: deviceclasses, resourceclaims (with status),
// resourceclaimtemplates, resourceslices and devicetaintrules (with
// status). Each has upstream v1.37's defaults, status rules, field
// selectors and kubectl's table columns, and the structural part of
// upstream's validation (required fields, names, sizes, immutable fields);
// CEL selector expressions are checked for presence and length, not
// compiled. Upstream serves only v1 of this group by default (v1beta1,
// v1beta2 and v1alpha3 are off), and so does Skiff.
package dra

import (
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resources lists the resource.k8s.io/v1 resources.
func Resources(registry.Deps) []registry.Resource {
	return []registry.Resource{
		DeviceClassResource(),
		ResourceClaimResource(),
		ResourceClaimTemplateResource(),
		ResourceSliceResource(),
		DeviceTaintRuleResource(),
	}
}

var groupVersion = resourcev1.SchemeGroupVersion

func nameColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]}
}

func ageColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}
}
