package admission

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// limitRangerAnnotation names the defaults LimitRanger set on a pod.
const limitRangerAnnotation = "kubernetes.io/limit-ranger"

var limitRangesGVR = corev1.SchemeGroupVersion.WithResource("limitranges")

// LimitRanger applies the LimitRanges of a pod's namespace, as upstream's
// plugin of that name does: it fills in container requests and limits
// from the Container defaults (Admit), and refuses pods and
// PersistentVolumeClaims outside a range's min, max and
// maxLimitRequestRatio for Container, Pod and PersistentVolumeClaim
// (Validate), with upstream's messages.
type LimitRanger struct {
	ranges *namespacedLister
}

var (
	_ Mutator   = (*LimitRanger)(nil)
	_ Validator = (*LimitRanger)(nil)
)

// NewLimitRanger reads LimitRanges through r.
func NewLimitRanger(r registry.Reader, c clock.PassiveClock) *LimitRanger {
	return &LimitRanger{ranges: newNamespacedLister(r, limitRangesGVR, c, func() runtime.Object { return &corev1.LimitRangeList{} })}
}

// Name is the upstream name.
func (*LimitRanger) Name() string { return "LimitRanger" }

// Handles creates and updates.
func (*LimitRanger) Handles(op Operation) bool { return op == Create || op == Update }

// applies says the request is one LimitRanger looks at: pod creates
// (containers cannot change afterwards, except by the resize
// subresource) and PVC writes, of objects not being deleted.
func (*LimitRanger) applies(a *Attributes) bool {
	if old, err := meta.Accessor(a.OldObject); a.OldObject != nil && err == nil && old.GetDeletionTimestamp() != nil {
		return false
	}
	switch a.Object.(type) {
	case *corev1.Pod:
		if a.Operation == Update {
			return a.Subresource == "resize"
		}
		return a.Subresource == ""
	case *corev1.PersistentVolumeClaim:
		return a.Subresource == ""
	}
	return false
}

func (l *LimitRanger) limitRanges(ctx context.Context, a *Attributes) ([]*corev1.LimitRange, error) {
	items, err := l.ranges.list(ctx, a.Namespace)
	if err != nil {
		return nil, forbidden(a, fmt.Errorf("unable to %s %v at this time because there was an error enforcing limit ranges", a.Operation, a.Resource))
	}
	out := make([]*corev1.LimitRange, 0, len(items))
	for _, o := range items {
		out = append(out, o.(*corev1.LimitRange))
	}
	return out, nil
}

// Admit sets the Container defaults of every LimitRange on a new pod's
// containers and init containers that do not set them, and notes what it
// set in the kubernetes.io/limit-ranger annotation.
func (l *LimitRanger) Admit(ctx context.Context, a *Attributes) error {
	pod, ok := a.Object.(*corev1.Pod)
	if !ok || !l.applies(a) {
		return nil
	}
	ranges, err := l.limitRanges(ctx, a)
	if err != nil {
		return err
	}
	for _, lr := range ranges {
		defaultPodResources(pod, lr)
	}
	return nil
}

// Validate checks the pod or claim against each LimitRange.
func (l *LimitRanger) Validate(ctx context.Context, a *Attributes) error {
	if !l.applies(a) {
		return nil
	}
	ranges, err := l.limitRanges(ctx, a)
	if err != nil {
		return err
	}
	for _, lr := range ranges {
		var errs []error
		switch obj := a.Object.(type) {
		case *corev1.Pod:
			errs = validatePodLimits(lr, obj)
		case *corev1.PersistentVolumeClaim:
			errs = validateClaimLimits(lr, obj)
		}
		if len(errs) > 0 {
			return forbidden(a, joinErrors(errs))
		}
	}
	return nil
}

// joinErrors is apimachinery's aggregate format: one error alone, or
// "[a, b]".
func joinErrors(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return errors.New("[" + strings.Join(msgs, ", ") + "]")
}

// defaultPodResources merges the Container defaults of lr into pod.
func defaultPodResources(pod *corev1.Pod, lr *corev1.LimitRange) {
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	for _, item := range lr.Spec.Limits {
		if item.Type != corev1.LimitTypeContainer {
			continue
		}
		for k, v := range item.DefaultRequest {
			requests[k] = v.DeepCopy()
		}
		for k, v := range item.Default {
			limits[k] = v.DeepCopy()
		}
	}
	var notes []string
	for i := range pod.Spec.Containers {
		notes = defaultContainer(&pod.Spec.Containers[i], "container", requests, limits, notes)
	}
	for i := range pod.Spec.InitContainers {
		notes = defaultContainer(&pod.Spec.InitContainers[i], "init container", requests, limits, notes)
	}
	if len(notes) > 0 {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[limitRangerAnnotation] = "LimitRanger plugin set: " + strings.Join(notes, "; ")
	}
}

func defaultContainer(c *corev1.Container, what string, requests, limits corev1.ResourceList, notes []string) []string {
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	fill := func(into, from corev1.ResourceList) []string {
		var set []string
		for k, v := range from {
			if _, ok := into[k]; !ok {
				into[k] = v.DeepCopy()
				set = append(set, string(k))
			}
		}
		sort.Strings(set)
		return set
	}
	setLimits := fill(c.Resources.Limits, limits)
	setRequests := fill(c.Resources.Requests, requests)
	if len(setRequests) > 0 {
		notes = append(notes, fmt.Sprintf("%s request for %s %s", strings.Join(setRequests, ", "), what, c.Name))
	}
	if len(setLimits) > 0 {
		notes = append(notes, fmt.Sprintf("%s limit for %s %s", strings.Join(setLimits, ", "), what, c.Name))
	}
	return notes
}

// validatePodLimits checks each container (Container ranges) and the
// pod's total (Pod ranges).
func validatePodLimits(lr *corev1.LimitRange, pod *corev1.Pod) []error {
	var errs []error
	for _, item := range lr.Spec.Limits {
		switch item.Type {
		case corev1.LimitTypeContainer:
			for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
				for i := range cs {
					errs = append(errs, checkRange(item, cs[i].Resources.Requests, cs[i].Resources.Limits)...)
				}
			}
		case corev1.LimitTypePod:
			opts := resourcehelper.PodResourcesOptions{ExcludeOverhead: true}
			errs = append(errs, checkRange(item, resourcehelper.PodRequests(pod, opts), resourcehelper.PodLimits(pod, opts))...)
		}
	}
	return errs
}

// validateClaimLimits checks a claim's storage request against the
// PersistentVolumeClaim ranges.
func validateClaimLimits(lr *corev1.LimitRange, pvc *corev1.PersistentVolumeClaim) []error {
	var errs []error
	for _, item := range lr.Spec.Limits {
		if item.Type != corev1.LimitTypePersistentVolumeClaim {
			continue
		}
		kind := string(item.Type)
		for _, k := range sortedNames(item.Min) {
			if err := minConstraint(kind, k, item.Min[k], pvc.Spec.Resources.Requests, nil); err != nil {
				errs = append(errs, err)
			}
		}
		for _, k := range sortedNames(item.Max) {
			req, ok := pvc.Spec.Resources.Requests[k]
			enforced := item.Max[k]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("maximum %s usage per %s is %s.  No request is specified", k, kind, enforced.String()))
			case compareValues(req, enforced) > 0:
				errs = append(errs, fmt.Errorf("maximum %s usage per %s is %s, but request is %s", k, kind, enforced.String(), req.String()))
			}
		}
	}
	return errs
}

// checkRange checks requests and limits against one range's min, max and
// maxLimitRequestRatio.
func checkRange(item corev1.LimitRangeItem, requests, limits corev1.ResourceList) []error {
	kind := string(item.Type)
	var errs []error
	for _, k := range sortedNames(item.Min) {
		if err := minConstraint(kind, k, item.Min[k], requests, limits); err != nil {
			errs = append(errs, err)
		}
	}
	for _, k := range sortedNames(item.Max) {
		if err := maxConstraint(kind, k, item.Max[k], requests, limits); err != nil {
			errs = append(errs, err)
		}
	}
	for _, k := range sortedNames(item.MaxLimitRequestRatio) {
		if err := ratioConstraint(kind, k, item.MaxLimitRequestRatio[k], requests, limits); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for k := range l {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// compareValues compares two quantities in milli-units when they fit,
// in units otherwise, as upstream does.
func compareValues(a, b resource.Quantity) int {
	if a.Value() <= resource.MaxMilliValue && b.Value() <= resource.MaxMilliValue {
		return cmpInt(a.MilliValue(), b.MilliValue())
	}
	return cmpInt(a.Value(), b.Value())
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func minConstraint(kind string, name corev1.ResourceName, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[name]
	lim, hasLim := limits[name]
	switch {
	case !hasReq:
		return fmt.Errorf("minimum %s usage per %s is %s.  No request is specified", name, kind, enforced.String())
	case compareValues(req, enforced) < 0:
		return fmt.Errorf("minimum %s usage per %s is %s, but request is %s", name, kind, enforced.String(), req.String())
	case hasLim && compareValues(lim, enforced) < 0:
		return fmt.Errorf("minimum %s usage per %s is %s, but limit is %s", name, kind, enforced.String(), lim.String())
	}
	return nil
}

func maxConstraint(kind string, name corev1.ResourceName, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[name]
	lim, hasLim := limits[name]
	switch {
	case !hasLim:
		return fmt.Errorf("maximum %s usage per %s is %s.  No limit is specified", name, kind, enforced.String())
	case compareValues(lim, enforced) > 0:
		return fmt.Errorf("maximum %s usage per %s is %s, but limit is %s", name, kind, enforced.String(), lim.String())
	case hasReq && compareValues(req, enforced) > 0:
		return fmt.Errorf("maximum %s usage per %s is %s, but request is %s", name, kind, enforced.String(), req.String())
	}
	return nil
}

func ratioConstraint(kind string, name corev1.ResourceName, enforced resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[name]
	lim, hasLim := limits[name]
	reqV, limV := req.Value(), lim.Value()
	if reqV <= resource.MaxMilliValue && limV <= resource.MaxMilliValue && enforced.Value() <= resource.MaxMilliValue {
		reqV, limV = req.MilliValue(), lim.MilliValue()
	}
	if !hasReq || reqV == 0 {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no request is specified or request is 0", name, kind, enforced.String())
	}
	if !hasLim || limV == 0 {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no limit is specified or limit is 0", name, kind, enforced.String())
	}
	ratio := float64(limV) / float64(reqV)
	observed, allowed := ratio, float64(enforced.Value())
	if enforced.Value() <= resource.MaxMilliValue {
		observed, allowed = ratio*1000, float64(enforced.MilliValue())
	}
	if observed > allowed {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but provided ratio is %f", name, kind, enforced.String(), ratio)
	}
	return nil
}
