// Package storagek8s holds the rules of the storage.k8s.io/v1 resources:
// storageclasses, csinodes, csidrivers, volumeattachments (with status) and
// csistoragecapacities. Each has upstream's defaults, validation with the
// field paths a client sees, and kubectl's table columns.
package storagek8s

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resources lists the storage.k8s.io/v1 resources.
func Resources(registry.Deps) []registry.Resource {
	return []registry.Resource{
		StorageClassResource(),
		CSINodeResource(),
		CSIDriverResource(),
		VolumeAttachmentResource(),
		CSIStorageCapacityResource(),
		VolumeAttributesClassResource(),
	}
}

// csiDriverNameMaxLength is the longest CSI driver name upstream accepts.
const csiDriverNameMaxLength = 63

// validateCSIDriverName checks a CSI driver name: required, at most 63
// characters, and a DNS-1123 subdomain once lower-cased.
func validateCSIDriverName(name string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		return append(errs, field.Required(path, ""))
	}
	if len(name) > csiDriverNameMaxLength {
		errs = append(errs, field.TooLong(path, name, csiDriverNameMaxLength))
	}
	for _, msg := range validation.IsDNS1123Subdomain(strings.ToLower(name)) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

// nameIsCSIDriverName validates a CSIDriver's metadata.name.
func nameIsCSIDriverName(name string, prefix bool) []string {
	var msgs []string
	if len(name) > csiDriverNameMaxLength {
		msgs = append(msgs, validation.MaxLenError(csiDriverNameMaxLength))
	}
	return append(msgs, registry.NameIsDNSSubdomain(strings.ToLower(name), prefix)...)
}

func nameColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]}
}

func ageColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}
}
