package storagek8s

import (
	"context"

	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

const (
	// maxAttachedMetadataSize bounds status.attachmentMetadata.
	maxAttachedMetadataSize = 256 * 1024
	// maxVolumeErrorMessageSize bounds attachError/detachError messages.
	maxVolumeErrorMessageSize = 1024
	msgExactlyOneSource       = "must specify exactly one of inlineVolumeSpec and persistentVolumeName"
)

// VolumeAttachmentResource describes storage.k8s.io/v1 volumeattachments.
func VolumeAttachmentResource() registry.Resource {
	return registry.Resource{
		GroupVersion:        storagev1.SchemeGroupVersion,
		Resource:            "volumeattachments",
		Kind:                "VolumeAttachment",
		ListKind:            "VolumeAttachmentList",
		SingularName:        "volumeattachment",
		StoragePrefix:       "volumeattachments",
		ReturnDeletedObject: true, // as upstream
		New:                 func() runtime.Object { return &storagev1.VolumeAttachment{} },
		NewList:             func() runtime.Object { return &storagev1.VolumeAttachmentList{} },
		Strategy:            VolumeAttachmentStrategy{},
		Subresources:        map[string]registry.Subresource{"status": registry.StatusSubresource()},
	}
}

// VolumeAttachmentStrategy is the volumeattachments strategy.
type VolumeAttachmentStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = VolumeAttachmentStrategy{}

// PrepareForCreate clears the status.
func (VolumeAttachmentStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	obj.(*storagev1.VolumeAttachment).Status = storagev1.VolumeAttachmentStatus{}
}

// PrepareForUpdate keeps the status.
func (VolumeAttachmentStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*storagev1.VolumeAttachment).Status = old.(*storagev1.VolumeAttachment).Status
}

// PrepareForStatusUpdate keeps the spec.
func (VolumeAttachmentStrategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*storagev1.VolumeAttachment).Spec = old.(*storagev1.VolumeAttachment).Spec
}

// Validate checks a new volume attachment.
func (VolumeAttachmentStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	va := obj.(*storagev1.VolumeAttachment)
	errs := ValidateVolumeAttachmentSpec(&va.Spec, field.NewPath("spec"))
	return append(errs, ValidateVolumeAttachmentStatus(&va.Status, field.NewPath("status"))...)
}

// ValidateUpdate refuses any change to the spec.
func (VolumeAttachmentStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	va, o := obj.(*storagev1.VolumeAttachment), old.(*storagev1.VolumeAttachment)
	errs := ValidateVolumeAttachmentSpec(&va.Spec, field.NewPath("spec"))
	if !apiequality.Semantic.DeepEqual(va.Spec, o.Spec) {
		errs = append(errs, field.Invalid(field.NewPath("spec"), va.Spec, "field is immutable"))
	}
	return errs
}

// ValidateStatusUpdate checks the status sizes.
func (VolumeAttachmentStrategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateVolumeAttachmentStatus(&obj.(*storagev1.VolumeAttachment).Status, field.NewPath("status"))
}

// ValidateVolumeAttachmentSpec checks attacher, source and nodeName.
func ValidateVolumeAttachmentSpec(s *storagev1.VolumeAttachmentSpec, path *field.Path) field.ErrorList {
	errs := validateCSIDriverName(s.Attacher, path.Child("attacher"))
	sp := path.Child("source")
	switch {
	case s.Source.PersistentVolumeName == nil && s.Source.InlineVolumeSpec == nil:
		errs = append(errs, field.Required(sp, msgExactlyOneSource))
	case s.Source.PersistentVolumeName != nil && s.Source.InlineVolumeSpec != nil:
		errs = append(errs, field.Forbidden(sp, msgExactlyOneSource))
	case s.Source.PersistentVolumeName != nil && *s.Source.PersistentVolumeName == "":
		errs = append(errs, field.Required(sp.Child("persistentVolumeName"), "must specify non empty persistentVolumeName"))
	}
	if s.NodeName == "" {
		errs = append(errs, field.Required(path.Child("nodeName"), ""))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(s.NodeName) {
			errs = append(errs, field.Invalid(path.Child("nodeName"), s.NodeName, msg))
		}
	}
	return errs
}

// ValidateVolumeAttachmentStatus bounds the metadata and error messages.
func ValidateVolumeAttachmentStatus(st *storagev1.VolumeAttachmentStatus, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	size := 0
	for k, v := range st.AttachmentMetadata {
		size += len(k) + len(v)
	}
	if size > maxAttachedMetadataSize {
		errs = append(errs, field.TooLong(path.Child("attachmentMetadata"), "", maxAttachedMetadataSize))
	}
	for _, ve := range []struct {
		name string
		err  *storagev1.VolumeError
	}{{"attachError", st.AttachError}, {"detachError", st.DetachError}} {
		if ve.err != nil && len(ve.err.Message) > maxVolumeErrorMessageSize {
			errs = append(errs, field.TooLong(path.Child(ve.name, "message"), ve.err.Message, maxVolumeErrorMessageSize))
		}
	}
	return errs
}

// TableColumns are kubectl's columns for volume attachments.
func (VolumeAttachmentStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Attacher", Type: "string", Format: "name", Description: storagev1.VolumeAttachmentSpec{}.SwaggerDoc()["attacher"]},
		{Name: "PV", Type: "string", Description: storagev1.VolumeAttachmentSource{}.SwaggerDoc()["persistentVolumeName"]},
		{Name: "Node", Type: "string", Description: storagev1.VolumeAttachmentSpec{}.SwaggerDoc()["nodeName"]},
		{Name: "Attached", Type: "boolean", Description: storagev1.VolumeAttachmentStatus{}.SwaggerDoc()["attached"]},
		ageColumn(),
	}
}

// TableRow renders one volume attachment.
func (VolumeAttachmentStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	va := obj.(*storagev1.VolumeAttachment)
	pv := ""
	if va.Spec.Source.PersistentVolumeName != nil {
		pv = *va.Spec.Source.PersistentVolumeName
	}
	return []interface{}{va.Name, va.Spec.Attacher, pv, va.Spec.NodeName, va.Status.Attached, registry.Age(va.CreationTimestamp)}, nil
}
