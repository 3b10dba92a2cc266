package dra

import (
	"context"
	"fmt"
	"strings"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// ResourceSliceResource describes resource.k8s.io/v1 resourceslices: the
// devices a driver publishes for a node (or for all nodes), in pools.
// Field selectors: spec.nodeName, spec.driver, spec.pool.name.
func ResourceSliceResource() registry.Resource {
	return registry.Resource{
		GroupVersion:        groupVersion,
		Resource:            "resourceslices",
		Kind:                "ResourceSlice",
		ListKind:            "ResourceSliceList",
		SingularName:        "resourceslice",
		StoragePrefix:       "resourceslices",
		ReturnDeletedObject: true, // as upstream
		New:                 func() runtime.Object { return &resourcev1.ResourceSlice{} },
		NewList:             func() runtime.Object { return &resourcev1.ResourceSliceList{} },
		Strategy:            ResourceSliceStrategy{},
	}
}

// ResourceSliceStrategy is the resourceslices strategy.
type ResourceSliceStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = ResourceSliceStrategy{}

// defaultTaintTime is upstream's DeviceTaint default: timeAdded now, in
// whole seconds.
func defaultTaintTime(t *resourcev1.DeviceTaint) {
	if t.TimeAdded == nil {
		t.TimeAdded = &metav1.Time{Time: time.Now().Truncate(time.Second)}
	}
}

func defaultSlice(s *resourcev1.ResourceSlice) {
	for i := range s.Spec.Devices {
		for j := range s.Spec.Devices[i].Taints {
			defaultTaintTime(&s.Spec.Devices[i].Taints[j])
		}
	}
}

// PrepareForCreate sets generation 1 and the taints' timeAdded.
func (ResourceSliceStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	s := obj.(*resourcev1.ResourceSlice)
	s.Generation = 1
	defaultSlice(s)
}

// PrepareForUpdate bumps the generation when the spec changed.
func (ResourceSliceStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	s, o := obj.(*resourcev1.ResourceSlice), old.(*resourcev1.ResourceSlice)
	defaultSlice(s)
	if !apiequality.Semantic.DeepEqual(s.Spec, o.Spec) {
		s.Generation = o.Generation + 1
	}
}

// Validate checks a new slice.
func (ResourceSliceStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validateSliceSpec(&obj.(*resourcev1.ResourceSlice).Spec, nil, field.NewPath("spec"))
}

// ValidateUpdate keeps driver, pool name and node name immutable.
func (ResourceSliceStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validateSliceSpec(&obj.(*resourcev1.ResourceSlice).Spec, &old.(*resourcev1.ResourceSlice).Spec, field.NewPath("spec"))
}

func validateSliceSpec(spec, old *resourcev1.ResourceSliceSpec, path *field.Path) field.ErrorList {
	errs := validateDriverName(spec.Driver, path.Child("driver"))
	pp := path.Child("pool")
	errs = append(errs, validatePoolName(spec.Pool.Name, pp.Child("name"))...)
	if spec.Pool.ResourceSliceCount <= 0 {
		errs = append(errs, field.Invalid(pp.Child("resourceSliceCount"), spec.Pool.ResourceSliceCount, "must be greater than zero"))
	}
	if spec.Pool.Generation < 0 {
		errs = append(errs, field.Invalid(pp.Child("generation"), spec.Pool.Generation, "must be greater than or equal to zero"))
	}
	if old != nil {
		errs = append(errs, immutable(spec.Pool.Name, old.Pool.Name, pp.Child("name"))...)
		errs = append(errs, immutable(spec.Driver, old.Driver, path.Child("driver"))...)
		errs = append(errs, immutable(spec.NodeName, old.NodeName, path.Child("nodeName"))...)
	}
	var set []string
	if spec.NodeName != nil {
		if *spec.NodeName != "" {
			set = append(set, "`nodeName`")
			errs = append(errs, validateNodeName(*spec.NodeName, path.Child("nodeName"))...)
		} else {
			errs = append(errs, field.Invalid(path.Child("nodeName"), *spec.NodeName, "must be either unset or set to a non-empty string"))
		}
	}
	if spec.NodeSelector != nil {
		set = append(set, "`nodeSelector`")
		if len(spec.NodeSelector.NodeSelectorTerms) != 1 {
			errs = append(errs, field.Invalid(path.Child("nodeSelector", "nodeSelectorTerms"), spec.NodeSelector.NodeSelectorTerms, "must have exactly one node selector term"))
		}
	}
	trueOrUnset := func(b *bool, name string) {
		if b == nil {
			return
		}
		if *b {
			set = append(set, "`"+name+"`")
		} else {
			errs = append(errs, field.Invalid(path.Child(name), *b, "must be either unset or set to true"))
		}
	}
	trueOrUnset(spec.AllNodes, "allNodes")
	trueOrUnset(spec.PerDeviceNodeSelection, "perDeviceNodeSelection")
	switch len(set) {
	case 0:
		errs = append(errs, field.Required(path, "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"))
	case 1:
	default:
		errs = append(errs, field.Invalid(path, fmt.Sprintf("{%s}", strings.Join(set, ", ")), "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set"))
	}
	if spec.SharedCounters != nil && spec.Devices != nil {
		errs = append(errs, field.Invalid(path, "", "only one of `sharedCounters` or `devices` is allowed"))
	}
	dp := path.Child("devices")
	if len(spec.Devices) > resourcev1.ResourceSliceMaxDevices {
		errs = append(errs, field.TooMany(dp, len(spec.Devices), resourcev1.ResourceSliceMaxDevices))
	}
	names := sets.New[string]()
	for i, d := range spec.Devices {
		p := dp.Index(i)
		errs = append(errs, validateDNSLabel(d.Name, p.Child("name"))...)
		if names.Has(d.Name) {
			errs = append(errs, field.Duplicate(p, d.Name))
		}
		names.Insert(d.Name)
		if n := len(d.Attributes) + len(d.Capacity); n > resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
			errs = append(errs, field.Invalid(p, n, fmt.Sprintf("the total number of attributes and capacities must not exceed %d", resourcev1.ResourceSliceMaxAttributesAndCapacitiesPerDevice)))
		}
		if len(d.Taints) > resourcev1.DeviceTaintsMaxLength {
			errs = append(errs, field.TooMany(p.Child("taints"), len(d.Taints), resourcev1.DeviceTaintsMaxLength))
		}
		for j, t := range d.Taints {
			errs = append(errs, validateTaint(t, nil, p.Child("taints").Index(j))...)
		}
	}
	if len(spec.SharedCounters) > resourcev1.ResourceSliceMaxCounterSets {
		errs = append(errs, field.TooMany(path.Child("sharedCounters"), len(spec.SharedCounters), resourcev1.ResourceSliceMaxCounterSets))
	}
	counterSets := sets.New[string]()
	for i, cs := range spec.SharedCounters {
		p := path.Child("sharedCounters").Index(i)
		if cs.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		} else {
			errs = append(errs, validateDNSLabel(cs.Name, p.Child("name"))...)
		}
		if counterSets.Has(cs.Name) {
			errs = append(errs, field.Duplicate(p, cs.Name))
		}
		counterSets.Insert(cs.Name)
		if len(cs.Counters) == 0 {
			errs = append(errs, field.Required(p.Child("counters"), ""))
		}
	}
	return errs
}

// FieldSet: spec.nodeName ("" when unset), spec.driver, spec.pool.name.
func (ResourceSliceStrategy) FieldSet(obj runtime.Object) fields.Set {
	s := obj.(*resourcev1.ResourceSlice)
	node := ""
	if s.Spec.NodeName != nil {
		node = *s.Spec.NodeName
	}
	return fields.Set{"spec.nodeName": node, "spec.driver": s.Spec.Driver, "spec.pool.name": s.Spec.Pool.Name}
}

// TableColumns are kubectl's: NAME NODE DRIVER POOL AGE.
func (ResourceSliceStrategy) TableColumns() []metav1.TableColumnDefinition {
	doc := resourcev1.ResourceSliceSpec{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Node", Type: "string", Description: doc["nodeName"]},
		{Name: "Driver", Type: "string", Description: doc["driver"]},
		{Name: "Pool", Type: "string", Description: resourcev1.ResourcePool{}.SwaggerDoc()["name"]},
		ageColumn(),
	}
}

// TableRow renders one slice.
func (s ResourceSliceStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	rs, ok := obj.(*resourcev1.ResourceSlice)
	if !ok {
		return nil, fmt.Errorf("resourceslice table: unexpected object %T", obj)
	}
	f := s.FieldSet(rs)
	return []interface{}{rs.Name, f["spec.nodeName"], rs.Spec.Driver, rs.Spec.Pool.Name, registry.Age(rs.CreationTimestamp)}, nil
}
