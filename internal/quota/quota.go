// Package quota measures what objects charge to a ResourceQuota, as
// upstream's quota evaluators do (k8s.io/kubernetes pkg/quota/v1): the
// usage of pods (compute requests and limits, counts), services (counts,
// node ports, load balancers), persistent volume claims (counts and
// storage, also per storage class) and the object count of any resource
// (count/<resource>.<group>), the quota scopes a pod matches, and the
// arithmetic on resource lists. It is pure: the ResourceQuota admission
// plugin and the resource-quota controller share it.
package quota

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/kubectl/pkg/util/qos"
)

var (
	// Pods, Services and PersistentVolumeClaims are the resources with
	// usage beyond a count.
	Pods                   = schema.GroupResource{Resource: "pods"}
	Services               = schema.GroupResource{Resource: "services"}
	PersistentVolumeClaims = schema.GroupResource{Resource: "persistentvolumeclaims"}
)

// legacyCounts are the object-count names from before count/<resource>.
var legacyCounts = map[schema.GroupResource]corev1.ResourceName{
	{Resource: "configmaps"}:             corev1.ResourceConfigMaps,
	{Resource: "resourcequotas"}:         corev1.ResourceQuotas,
	{Resource: "replicationcontrollers"}: corev1.ResourceReplicationControllers,
	{Resource: "secrets"}:                corev1.ResourceSecrets,
}

// Ignored resources are never charged (virtual ones, and events).
func Ignored(gr schema.GroupResource) bool {
	switch gr.Group {
	case "authentication.k8s.io", "authorization.k8s.io":
		return true
	case "":
		return gr.Resource == "bindings" || gr.Resource == "componentstatuses" || gr.Resource == "events"
	case "events.k8s.io":
		return gr.Resource == "events"
	}
	return false
}

// ObjectCountName is the count/<resource>[.<group>] name of gr.
func ObjectCountName(gr schema.GroupResource) corev1.ResourceName {
	if gr.Group == "" {
		return corev1.ResourceName("count/" + gr.Resource)
	}
	return corev1.ResourceName("count/" + gr.Resource + "." + gr.Group)
}

// ParseObjectCountName is the resource a count/ name counts.
func ParseObjectCountName(name corev1.ResourceName) (schema.GroupResource, bool) {
	s, ok := strings.CutPrefix(string(name), "count/")
	if !ok {
		return schema.GroupResource{}, false
	}
	return schema.ParseGroupResource(s), true
}

// LegacyCountResource is the resource a legacy count name ("secrets")
// counts.
func LegacyCountResource(name corev1.ResourceName) (schema.GroupResource, bool) {
	for gr, n := range legacyCounts {
		if n == name {
			return gr, true
		}
	}
	return schema.GroupResource{}, false
}

var podResources = map[corev1.ResourceName]bool{
	ObjectCountName(Pods): true, corev1.ResourcePods: true,
	corev1.ResourceCPU: true, corev1.ResourceMemory: true, corev1.ResourceEphemeralStorage: true,
	corev1.ResourceRequestsCPU: true, corev1.ResourceRequestsMemory: true, corev1.ResourceRequestsEphemeralStorage: true,
	corev1.ResourceLimitsCPU: true, corev1.ResourceLimitsMemory: true, corev1.ResourceLimitsEphemeralStorage: true,
}

var serviceResources = map[corev1.ResourceName]bool{
	ObjectCountName(Services): true, corev1.ResourceServices: true,
	corev1.ResourceServicesLoadBalancers: true, corev1.ResourceServicesNodePorts: true,
}

const storageClassSuffix = ".storageclass.storage.k8s.io/"

// MatchingResources are the names among names that objects of gr are
// charged for.
func MatchingResources(gr schema.GroupResource, names []corev1.ResourceName) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, n := range names {
		if matchesResource(gr, n) {
			out = append(out, n)
		}
	}
	return out
}

func matchesResource(gr schema.GroupResource, n corev1.ResourceName) bool {
	if n == ObjectCountName(gr) || (legacyCounts[gr] != "" && legacyCounts[gr] == n) {
		return true
	}
	s := string(n)
	switch gr {
	case Pods:
		return podResources[n] || strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) ||
			strings.HasPrefix(s, corev1.ResourceRequestsHugePagesPrefix) || isExtendedRequest(n)
	case Services:
		return serviceResources[n]
	case PersistentVolumeClaims:
		return n == corev1.ResourcePersistentVolumeClaims || n == corev1.ResourceRequestsStorage ||
			(strings.Contains(s, storageClassSuffix) &&
				(strings.HasSuffix(s, "/"+string(corev1.ResourcePersistentVolumeClaims)) || strings.HasSuffix(s, "/"+string(corev1.ResourceRequestsStorage))))
	}
	return false
}

// isExtendedRequest is requests.<extended resource> (a name with a
// domain that is not kubernetes.io's).
func isExtendedRequest(n corev1.ResourceName) bool {
	rest, ok := strings.CutPrefix(string(n), corev1.DefaultResourceRequestsPrefix)
	if !ok || !strings.Contains(rest, "/") {
		return false
	}
	return !strings.Contains(rest, "kubernetes.io/") || strings.HasPrefix(rest, "deviceclass.resource.kubernetes.io/")
}

// Usage is what obj, of resource gr, charges at time now.
func Usage(gr schema.GroupResource, obj runtime.Object, now time.Time) corev1.ResourceList {
	one := *resource.NewQuantity(1, resource.DecimalSI)
	out := corev1.ResourceList{ObjectCountName(gr): one}
	if n, ok := legacyCounts[gr]; ok {
		out[n] = one
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		if gr == Pods {
			addPodUsage(out, o, now)
		}
	case *corev1.Service:
		if gr == Services {
			addServiceUsage(out, o)
		}
	case *corev1.PersistentVolumeClaim:
		if gr == PersistentVolumeClaims {
			addClaimUsage(out, o)
		}
	}
	return out
}

// PodCharged says a pod's compute resources count: it is not terminal,
// and not past the end of its graceful deletion.
func PodCharged(pod *corev1.Pod, now time.Time) bool {
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return false
	}
	if pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil {
		end := pod.DeletionTimestamp.Add(time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second)
		if now.After(end) {
			return false
		}
	}
	return true
}

func addPodUsage(out corev1.ResourceList, pod *corev1.Pod, now time.Time) {
	if !PodCharged(pod, now) {
		return
	}
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	for k, v := range podComputeUsage(requests, limits) {
		out[k] = v
	}
}

// podComputeUsage is the charge of requests and limits (of a pod or one
// container).
func podComputeUsage(requests, limits corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1, resource.DecimalSI)}
	for _, r := range []struct{ name, req, lim corev1.ResourceName }{
		{corev1.ResourceCPU, corev1.ResourceRequestsCPU, corev1.ResourceLimitsCPU},
		{corev1.ResourceMemory, corev1.ResourceRequestsMemory, corev1.ResourceLimitsMemory},
		{corev1.ResourceEphemeralStorage, corev1.ResourceRequestsEphemeralStorage, corev1.ResourceLimitsEphemeralStorage},
	} {
		if v, ok := requests[r.name]; ok {
			out[r.name] = v
			out[r.req] = v
		}
		if v, ok := limits[r.name]; ok {
			out[r.lim] = v
		}
	}
	for k, v := range requests {
		if strings.HasPrefix(string(k), corev1.ResourceHugePagesPrefix) {
			out[k] = v
			out[corev1.DefaultResourceRequestsPrefix+k] = v
		} else if isExtendedRequest(corev1.DefaultResourceRequestsPrefix + k) {
			out[corev1.DefaultResourceRequestsPrefix+k] = v
		}
	}
	return out
}

func addServiceUsage(out corev1.ResourceList, svc *corev1.Service) {
	out[corev1.ResourceServices] = *resource.NewQuantity(1, resource.DecimalSI)
	lbs, nodePorts := 0, 0
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		nodePorts = len(svc.Spec.Ports)
	case corev1.ServiceTypeLoadBalancer:
		lbs = 1
		if svc.Spec.AllocateLoadBalancerNodePorts != nil && !*svc.Spec.AllocateLoadBalancerNodePorts {
			for _, p := range svc.Spec.Ports {
				if p.NodePort != 0 {
					nodePorts++
				}
			}
		} else {
			nodePorts = len(svc.Spec.Ports)
		}
	}
	out[corev1.ResourceServicesLoadBalancers] = *resource.NewQuantity(int64(lbs), resource.DecimalSI)
	out[corev1.ResourceServicesNodePorts] = *resource.NewQuantity(int64(nodePorts), resource.DecimalSI)
}

func addClaimUsage(out corev1.ResourceList, pvc *corev1.PersistentVolumeClaim) {
	one := *resource.NewQuantity(1, resource.DecimalSI)
	out[corev1.ResourcePersistentVolumeClaims] = one
	class := ""
	if pvc.Spec.StorageClassName != nil {
		class = *pvc.Spec.StorageClassName
	} else if c, ok := pvc.Annotations[corev1.BetaStorageClassAnnotation]; ok {
		class = c
	}
	if class != "" {
		out[corev1.ResourceName(class+storageClassSuffix+string(corev1.ResourcePersistentVolumeClaims))] = one
	}
	req, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return
	}
	storage := req.DeepCopy()
	storage.RoundUp(0) // whole bytes, as upstream counts them
	if alloc, ok := pvc.Status.AllocatedResources[corev1.ResourceStorage]; ok && alloc.Cmp(storage) > 0 {
		storage = alloc.DeepCopy()
	}
	out[corev1.ResourceRequestsStorage] = storage
	if class != "" {
		out[corev1.ResourceName(class+storageClassSuffix+string(corev1.ResourceRequestsStorage))] = storage
	}
}

// ScopeSelectors are a quota's scopes and scope selector as one list
// (a scope alone means Exists).
func ScopeSelectors(q *corev1.ResourceQuota) []corev1.ScopedResourceSelectorRequirement {
	var out []corev1.ScopedResourceSelectorRequirement
	for _, s := range q.Spec.Scopes {
		out = append(out, corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists})
	}
	if q.Spec.ScopeSelector != nil {
		out = append(out, q.Spec.ScopeSelector.MatchExpressions...)
	}
	return out
}

// Matches says quota q charges obj (of resource gr): q limits something
// gr is charged for (in status.hard), and obj is in every scope of q.
// Only pods and claims have scopes; a scoped quota matches nothing else.
func Matches(q *corev1.ResourceQuota, gr schema.GroupResource, obj runtime.Object) (bool, error) {
	if len(MatchingResources(gr, ResourceNames(q.Status.Hard))) == 0 {
		return false, nil
	}
	for _, s := range ScopeSelectors(q) {
		ok, err := matchesScope(s, gr, obj)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func matchesScope(s corev1.ScopedResourceSelectorRequirement, gr schema.GroupResource, obj runtime.Object) (bool, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		if gr != Pods {
			return false, nil
		}
		switch s.ScopeName {
		case corev1.ResourceQuotaScopeTerminating:
			return IsTerminating(o), nil
		case corev1.ResourceQuotaScopeNotTerminating:
			return !IsTerminating(o), nil
		case corev1.ResourceQuotaScopeBestEffort:
			return qos.GetPodQOS(o) == corev1.PodQOSBestEffort, nil
		case corev1.ResourceQuotaScopeNotBestEffort:
			return qos.GetPodQOS(o) != corev1.PodQOSBestEffort, nil
		case corev1.ResourceQuotaScopePriorityClass:
			if s.Operator == corev1.ScopeSelectorOpExists {
				return o.Spec.PriorityClassName != "", nil
			}
			var set labels.Set
			if o.Spec.PriorityClassName != "" {
				set = labels.Set{string(corev1.ResourceQuotaScopePriorityClass): o.Spec.PriorityClassName}
			}
			return selectorMatches(s, set)
		case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
			return crossNamespaceAffinity(o), nil
		}
	case *corev1.PersistentVolumeClaim:
		if gr != PersistentVolumeClaims || s.ScopeName != corev1.ResourceQuotaScopeVolumeAttributesClass {
			return false, nil
		}
		names := []string{}
		if o.Spec.VolumeAttributesClassName != nil {
			names = append(names, *o.Spec.VolumeAttributesClassName)
		}
		if o.Status.CurrentVolumeAttributesClassName != nil {
			names = append(names, *o.Status.CurrentVolumeAttributesClassName)
		}
		if o.Status.ModifyVolumeStatus != nil && o.Status.ModifyVolumeStatus.TargetVolumeAttributesClassName != "" {
			names = append(names, o.Status.ModifyVolumeStatus.TargetVolumeAttributesClassName)
		}
		if len(names) == 0 {
			return selectorMatches(s, nil)
		}
		for _, n := range names {
			if ok, err := selectorMatches(s, labels.Set{string(s.ScopeName): n}); err != nil || ok {
				return ok, err
			}
		}
	}
	return false, nil
}

// selectorMatches evaluates one scope selector requirement on the value
// set (scope name → value).
func selectorMatches(s corev1.ScopedResourceSelectorRequirement, set labels.Set) (bool, error) {
	var op selection.Operator
	switch s.Operator {
	case corev1.ScopeSelectorOpIn:
		op = selection.In
	case corev1.ScopeSelectorOpNotIn:
		op = selection.NotIn
	case corev1.ScopeSelectorOpExists:
		op = selection.Exists
	case corev1.ScopeSelectorOpDoesNotExist:
		op = selection.DoesNotExist
	default:
		return false, fmt.Errorf("%q is not a valid scope selector operator", s.Operator)
	}
	r, err := labels.NewRequirement(string(s.ScopeName), op, s.Values)
	if err != nil {
		return false, err
	}
	return r.Matches(set), nil
}

// IsTerminating says a pod has an active deadline (the Terminating scope).
func IsTerminating(pod *corev1.Pod) bool {
	return pod.Spec.ActiveDeadlineSeconds != nil && *pod.Spec.ActiveDeadlineSeconds >= 0
}

func crossNamespaceAffinity(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil {
		return false
	}
	cross := func(t corev1.PodAffinityTerm) bool { return len(t.Namespaces) > 0 || t.NamespaceSelector != nil }
	var terms []corev1.PodAffinityTerm
	var weighted []corev1.WeightedPodAffinityTerm
	if a.PodAffinity != nil {
		terms = append(terms, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		weighted = append(weighted, a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution...)
	}
	if a.PodAntiAffinity != nil {
		terms = append(terms, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		weighted = append(weighted, a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution...)
	}
	for _, w := range weighted {
		terms = append(terms, w.PodAffinityTerm)
	}
	for _, t := range terms {
		if cross(t) {
			return true
		}
	}
	return false
}

// computeNames are the resources that, when a quota limits them, every
// container must request or limit (upstream's historical rule).
var computeNames = []corev1.ResourceName{
	corev1.ResourceCPU, corev1.ResourceMemory,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory,
}

// Constraints checks that a pod sets what a quota limiting required
// needs: each container must request (or limit) the cpu and memory the
// quota limits, unless the pod sets pod-level resources. The error is
// upstream's "must specify ..." text.
func Constraints(gr schema.GroupResource, required []corev1.ResourceName, obj runtime.Object) error {
	pod, ok := obj.(*corev1.Pod)
	if !ok || gr != Pods || resourcehelper.IsPodLevelResourcesSet(pod) {
		return nil
	}
	req := map[corev1.ResourceName]bool{}
	for _, n := range required {
		for _, c := range computeNames {
			if n == c {
				req[n] = true
			}
		}
	}
	missing := map[corev1.ResourceName][]string{}
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range cs {
			has := podComputeUsage(c.Resources.Requests, c.Resources.Limits)
			for n := range req {
				if _, ok := has[n]; !ok {
					missing[n] = append(missing[n], c.Name)
				}
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	names := make([]string, 0, len(missing))
	for n := range missing {
		names = append(names, string(n))
	}
	sort.Strings(names)
	msgs := make([]string, len(names))
	for i, n := range names {
		cs := missing[corev1.ResourceName(n)]
		sort.Strings(cs)
		msgs[i] = fmt.Sprintf("%s for: %s", n, strings.Join(dedupe(cs), ","))
	}
	return fmt.Errorf("must specify %s", strings.Join(msgs, "; "))
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
