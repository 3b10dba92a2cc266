package storagek8s

import (
	"context"

	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// csiNodeIDMaxLength is the longest nodeID a CSI driver may report.
const csiNodeIDMaxLength = 256

// CSINodeResource describes storage.k8s.io/v1 csinodes.
func CSINodeResource() registry.Resource {
	return registry.Resource{
		GroupVersion:        storagev1.SchemeGroupVersion,
		Resource:            "csinodes",
		Kind:                "CSINode",
		ListKind:            "CSINodeList",
		SingularName:        "csinode",
		StoragePrefix:       "csinodes",
		ReturnDeletedObject: true, // as upstream
		New:                 func() runtime.Object { return &storagev1.CSINode{} },
		NewList:             func() runtime.Object { return &storagev1.CSINodeList{} },
		Strategy:            CSINodeStrategy{},
	}
}

// CSINodeStrategy is the csinodes strategy.
type CSINodeStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = CSINodeStrategy{}

// Validate checks a new CSINode.
func (CSINodeStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateCSINodeSpec(&obj.(*storagev1.CSINode).Spec, field.NewPath("spec"))
}

// ValidateUpdate also keeps each registered driver's nodeID and
// topologyKeys immutable.
func (CSINodeStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	n, o := obj.(*storagev1.CSINode), old.(*storagev1.CSINode)
	path := field.NewPath("spec", "drivers")
	errs := ValidateCSINodeSpec(&n.Spec, field.NewPath("spec"))
	oldDrivers := map[string]storagev1.CSINodeDriver{}
	for _, d := range o.Spec.Drivers {
		oldDrivers[d.Name] = d
	}
	for i, d := range n.Spec.Drivers {
		od, ok := oldDrivers[d.Name]
		if !ok {
			continue
		}
		if d.NodeID != od.NodeID {
			errs = append(errs, field.Invalid(path.Index(i).Child("nodeID"), d.NodeID, "field is immutable"))
		}
		if !apiequality.Semantic.DeepEqual(d.TopologyKeys, od.TopologyKeys) {
			errs = append(errs, field.Invalid(path.Index(i).Child("topologyKeys"), d.TopologyKeys, "field is immutable"))
		}
	}
	return errs
}

// ValidateCSINodeSpec checks the drivers: unique valid names, a nodeID,
// qualified topology keys and a non-negative allocatable count.
func ValidateCSINodeSpec(spec *storagev1.CSINodeSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, d := range spec.Drivers {
		dp := path.Child("drivers").Index(i)
		errs = append(errs, validateCSIDriverName(d.Name, dp.Child("name"))...)
		if names.Has(d.Name) {
			errs = append(errs, field.Duplicate(dp.Child("name"), d.Name))
		}
		names.Insert(d.Name)
		switch {
		case d.NodeID == "":
			errs = append(errs, field.Required(dp.Child("nodeID"), ""))
		case len(d.NodeID) > csiNodeIDMaxLength:
			errs = append(errs, field.TooLong(dp.Child("nodeID"), d.NodeID, csiNodeIDMaxLength))
		}
		keys := sets.New[string]()
		for j, k := range d.TopologyKeys {
			kp := dp.Child("topologyKeys").Index(j)
			if k == "" {
				errs = append(errs, field.Required(kp, ""))
				continue
			}
			if keys.Has(k) {
				errs = append(errs, field.Duplicate(kp, k))
			}
			keys.Insert(k)
			for _, msg := range validation.IsQualifiedName(k) {
				errs = append(errs, field.Invalid(kp, k, msg))
			}
		}
		if d.Allocatable != nil && d.Allocatable.Count != nil && *d.Allocatable.Count < 0 {
			errs = append(errs, field.Invalid(dp.Child("allocatable", "count"), *d.Allocatable.Count, "must be greater than or equal to 0"))
		}
	}
	return errs
}

// TableColumns are kubectl's columns for CSINodes.
func (CSINodeStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Drivers", Type: "integer", Description: "Drivers indicates the number of CSI drivers registered on the node"},
		ageColumn(),
	}
}

// TableRow renders one CSINode.
func (CSINodeStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	n := obj.(*storagev1.CSINode)
	return []interface{}{n.Name, int64(len(n.Spec.Drivers)), registry.Age(n.CreationTimestamp)}, nil
}
