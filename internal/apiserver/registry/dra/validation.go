package dra

import (
	"fmt"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The structural part of upstream's pkg/apis/resource/validation, with its
// field paths and messages. Not done: compiling CEL expressions (only
// presence and length are checked), device attributes, capacities and
// counters beyond their names, opaque parameters beyond presence.

// driverNameMaxLength: driver names follow CSI driver names.
const driverNameMaxLength = 63

func validateDriverName(name string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		return append(errs, field.Required(path, ""))
	}
	if len(name) > driverNameMaxLength {
		errs = append(errs, field.TooLong(path, "", driverNameMaxLength))
	}
	for _, msg := range validation.IsDNS1123Subdomain(strings.ToLower(name)) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

func validateDNSLabel(name string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

func validateDNSSubdomain(name string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

// validatePoolName: required, at most 253 characters, DNS subdomains
// separated by slashes.
func validatePoolName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	if len(name) > resourcev1.PoolNameMaxLength {
		errs = append(errs, field.TooLong(path, "", resourcev1.PoolNameMaxLength))
	}
	for _, part := range strings.Split(name, "/") {
		errs = append(errs, validateDNSSubdomain(part, path)...)
	}
	return errs
}

func validateNodeName(name string, path *field.Path) field.ErrorList {
	return validateDNSSubdomain(name, path)
}

func validateDeviceClassName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	return validateDNSSubdomain(name, path)
}

func validateSelectors(selectors []resourcev1.DeviceSelector, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(selectors) > resourcev1.DeviceSelectorsMaxSize {
		errs = append(errs, field.TooMany(path, len(selectors), resourcev1.DeviceSelectorsMaxSize))
	}
	for i, s := range selectors {
		p := path.Index(i)
		switch {
		case s.CEL == nil:
			errs = append(errs, field.Required(p.Child("cel"), ""))
		case strings.TrimSpace(s.CEL.Expression) == "":
			errs = append(errs, field.Required(p.Child("cel", "expression"), ""))
		case len(s.CEL.Expression) > resourcev1.CELSelectorExpressionMaxLength:
			errs = append(errs, field.TooLong(p.Child("cel", "expression"), "", resourcev1.CELSelectorExpressionMaxLength))
		}
	}
	return errs
}

func validateDeviceConfiguration(c resourcev1.DeviceConfiguration, path *field.Path) field.ErrorList {
	if c.Opaque == nil {
		return field.ErrorList{field.Required(path.Child("opaque"), "")}
	}
	errs := validateDriverName(c.Opaque.Driver, path.Child("opaque", "driver"))
	raw := c.Opaque.Parameters.Raw
	switch {
	case len(raw) == 0 && c.Opaque.Parameters.Object == nil:
		errs = append(errs, field.Required(path.Child("opaque", "parameters"), ""))
	case len(raw) > resourcev1.OpaqueParametersMaxLength:
		errs = append(errs, field.TooLong(path.Child("opaque", "parameters"), "", resourcev1.OpaqueParametersMaxLength))
	}
	return errs
}

var (
	validTaintEffects        = sets.New(resourcev1.DeviceTaintEffectNoSchedule, resourcev1.DeviceTaintEffectNoExecute, resourcev1.DeviceTaintEffectNone)
	validTolerationOperators = []resourcev1.DeviceTolerationOperator{resourcev1.DeviceTolerationOpEqual, resourcev1.DeviceTolerationOpExists}
	validAllocationModes     = []resourcev1.DeviceAllocationMode{resourcev1.DeviceAllocationModeAll, resourcev1.DeviceAllocationModeExactCount}
)

func validateLabelValue(v string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidLabelValue(v) {
		errs = append(errs, field.Invalid(path, v, msg))
	}
	return errs
}

// validateTaint: a label-name key, a label-value value, and an effect
// that must be known when it is new or changed.
func validateTaint(t resourcev1.DeviceTaint, old *resourcev1.DeviceTaint, path *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabelName(t.Key, path.Child("key"))
	if t.Value != "" {
		errs = append(errs, validateLabelValue(t.Value, path.Child("value"))...)
	}
	if old == nil || old.Effect != t.Effect {
		switch {
		case t.Effect == "":
			errs = append(errs, field.Required(path.Child("effect"), ""))
		case !validTaintEffects.Has(t.Effect):
			errs = append(errs, field.NotSupported(path.Child("effect"), t.Effect, sets.List(validTaintEffects)))
		}
	}
	return errs
}

func validateToleration(t resourcev1.DeviceToleration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		errs = append(errs, metav1validation.ValidateLabelName(t.Key, path.Child("key"))...)
	}
	switch t.Operator {
	case resourcev1.DeviceTolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(path.Child("value"), t.Value, "must be empty for operator `Exists`"))
		}
	case resourcev1.DeviceTolerationOpEqual:
		errs = append(errs, validateLabelValue(t.Value, path.Child("value"))...)
	case "":
		errs = append(errs, field.Required(path.Child("operator"), ""))
	default:
		errs = append(errs, field.NotSupported(path.Child("operator"), t.Operator, validTolerationOperators))
	}
	if t.Effect != "" && !validTaintEffects.Has(t.Effect) {
		errs = append(errs, field.NotSupported(path.Child("effect"), t.Effect, sets.List(validTaintEffects)))
	}
	return errs
}

func validateAllocationMode(mode resourcev1.DeviceAllocationMode, count int64, modePath, countPath *field.Path) field.ErrorList {
	switch mode {
	case resourcev1.DeviceAllocationModeAll:
		if count != 0 {
			return field.ErrorList{field.Invalid(countPath, count, fmt.Sprintf("must not be specified when allocationMode is '%s'", mode))}
		}
	case resourcev1.DeviceAllocationModeExactCount:
		if count <= 0 {
			return field.ErrorList{field.Invalid(countPath, count, "must be greater than zero")}
		}
	default:
		return field.ErrorList{field.NotSupported(modePath, mode, validAllocationModes)}
	}
	return nil
}

// validateClaimSpec checks spec.devices of a claim (or a template's
// spec.spec.devices): unique DNS-label request names, exactly one of
// exactly or firstAvailable, a device class, selectors, allocation mode,
// tolerations; constraints and config naming known requests.
func validateClaimSpec(spec *resourcev1.ResourceClaimSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	dp := path.Child("devices")
	rp := dp.Child("requests")
	if len(spec.Devices.Requests) > resourcev1.DeviceRequestsMaxSize {
		errs = append(errs, field.TooMany(rp, len(spec.Devices.Requests), resourcev1.DeviceRequestsMaxSize))
	}
	names := sets.New[string]()
	for i, r := range spec.Devices.Requests {
		p := rp.Index(i)
		errs = append(errs, validateDNSLabel(r.Name, p.Child("name"))...)
		if names.Has(r.Name) {
			errs = append(errs, field.Duplicate(p, r.Name))
		}
		names.Insert(r.Name)
		switch {
		case r.Exactly == nil && len(r.FirstAvailable) == 0:
			errs = append(errs, field.Required(p, "exactly one of `exactly` or `firstAvailable` is required"))
		case r.Exactly != nil && len(r.FirstAvailable) > 0:
			errs = append(errs, field.Invalid(p, nil, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"))
		case r.Exactly != nil:
			e, ep := r.Exactly, p.Child("exactly")
			errs = append(errs, validateDeviceClassName(e.DeviceClassName, ep.Child("deviceClassName"))...)
			errs = append(errs, validateSelectors(e.Selectors, ep.Child("selectors"))...)
			errs = append(errs, validateAllocationMode(e.AllocationMode, e.Count, ep.Child("allocationMode"), ep.Child("count"))...)
			for j, t := range e.Tolerations {
				errs = append(errs, validateToleration(t, ep.Child("tolerations").Index(j))...)
			}
		default:
			fp := p.Child("firstAvailable")
			if len(r.FirstAvailable) > resourcev1.FirstAvailableDeviceRequestMaxSize {
				errs = append(errs, field.TooMany(fp, len(r.FirstAvailable), resourcev1.FirstAvailableDeviceRequestMaxSize))
			}
			subNames := sets.New[string]()
			for j, s := range r.FirstAvailable {
				sp := fp.Index(j)
				errs = append(errs, validateDNSLabel(s.Name, sp.Child("name"))...)
				if subNames.Has(s.Name) {
					errs = append(errs, field.Duplicate(sp, s.Name))
				}
				subNames.Insert(s.Name)
				names.Insert(r.Name + "/" + s.Name)
				errs = append(errs, validateDeviceClassName(s.DeviceClassName, sp.Child("deviceClassName"))...)
				errs = append(errs, validateSelectors(s.Selectors, sp.Child("selectors"))...)
				errs = append(errs, validateAllocationMode(s.AllocationMode, s.Count, sp.Child("allocationMode"), sp.Child("count"))...)
				for k, t := range s.Tolerations {
					errs = append(errs, validateToleration(t, sp.Child("tolerations").Index(k))...)
				}
			}
		}
	}
	checkRefs := func(refs []string, p *field.Path) {
		for i, ref := range refs {
			if !names.Has(ref) {
				errs = append(errs, field.Invalid(p.Index(i), ref, "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"))
			}
		}
	}
	cp := dp.Child("constraints")
	if len(spec.Devices.Constraints) > resourcev1.DeviceConstraintsMaxSize {
		errs = append(errs, field.TooMany(cp, len(spec.Devices.Constraints), resourcev1.DeviceConstraintsMaxSize))
	}
	for i, c := range spec.Devices.Constraints {
		p := cp.Index(i)
		checkRefs(c.Requests, p.Child("requests"))
		switch {
		case c.MatchAttribute != nil && c.DistinctAttribute != nil:
			errs = append(errs, field.Required(p, `exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set`))
		case c.MatchAttribute == nil && c.DistinctAttribute == nil:
			errs = append(errs, field.Required(p.Child("matchAttribute"), ""))
		}
	}
	cfp := dp.Child("config")
	if len(spec.Devices.Config) > resourcev1.DeviceConfigMaxSize {
		errs = append(errs, field.TooMany(cfp, len(spec.Devices.Config), resourcev1.DeviceConfigMaxSize))
	}
	for i, c := range spec.Devices.Config {
		p := cfp.Index(i)
		checkRefs(c.Requests, p.Child("requests"))
		errs = append(errs, validateDeviceConfiguration(c.DeviceConfiguration, p)...)
	}
	return errs
}

func immutable(new, old any, path *field.Path) field.ErrorList {
	return apimachineryvalidation.ValidateImmutableField(new, old, path)
}
