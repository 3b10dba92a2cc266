// Package node holds the registry rules of core/v1 nodes: the status
// subresource, the not-ready taint every new node gets, validation of
// taints, pod CIDRs and provider IDs, field selectors and the table kubectl
// prints. Nodes are stored under /registry/minions, as upstream does.
package node

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Role labels kubectl reads for the ROLES column.
const (
	labelNodeRolePrefix = "node-role.kubernetes.io/"
	labelNodeRole       = "kubernetes.io/role"
)

// Resource describes core/v1 nodes.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:  corev1.SchemeGroupVersion,
		Resource:      "nodes",
		Kind:          "Node",
		ListKind:      "NodeList",
		SingularName:  "node",
		ShortNames:    []string{"no"},
		Namespaced:    false,
		StoragePrefix: "minions",
		New:           func() runtime.Object { return &corev1.Node{} },
		NewList:       func() runtime.Object { return &corev1.NodeList{} },
		Strategy:      Strategy{},
		Subresources:  map[string]registry.Subresource{"status": registry.StatusSubresource(), "proxy": registry.ProxySubresource("NodeProxyOptions")},
	}
}

// Strategy is the registry strategy of nodes.
type Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = Strategy{}

// PrepareForCreate keeps the status a kubelet registers with, defaults
// allocatable to capacity, and adds the not-ready:NoSchedule taint as
// upstream's TaintNodesByCondition admission plugin does.
func (Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	node := obj.(*corev1.Node)
	syncPodCIDRs(&node.Spec)
	defaultStatus(&node.Status)
	AddNotReadyTaint(node)
}

// AddNotReadyTaint adds node.kubernetes.io/not-ready:NoSchedule unless the
// node already has it.
func AddNotReadyTaint(node *corev1.Node) {
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady && t.Effect == corev1.TaintEffectNoSchedule {
			return
		}
	}
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
}

func defaultStatus(s *corev1.NodeStatus) {
	if s.Allocatable == nil && s.Capacity != nil {
		s.Allocatable = make(corev1.ResourceList, len(s.Capacity))
		for k, v := range s.Capacity {
			s.Allocatable[k] = v.DeepCopy()
		}
	}
}

// syncPodCIDRs keeps podCIDR and podCIDRs in step, as upstream's v1
// conversion does: the list wins when both are set.
func syncPodCIDRs(spec *corev1.NodeSpec) {
	if len(spec.PodCIDRs) == 0 && spec.PodCIDR != "" {
		spec.PodCIDRs = []string{spec.PodCIDR}
	}
	if len(spec.PodCIDRs) > 0 {
		spec.PodCIDR = spec.PodCIDRs[0]
	}
}

// PrepareForUpdate keeps the old status.
func (Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	node := obj.(*corev1.Node)
	node.Status = old.(*corev1.Node).Status
	syncPodCIDRs(&node.Spec)
}

// PrepareForStatusUpdate keeps the old spec.
func (Strategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	node := obj.(*corev1.Node)
	node.Spec = old.(*corev1.Node).Spec
	defaultStatus(&node.Status)
}

// Validate checks a new node.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	node := obj.(*corev1.Node)
	return append(validateSpec(&node.Spec), validateStatus(&node.Status)...)
}

// ValidateUpdate checks a node update: pod CIDRs and the provider ID may
// only be set once.
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	node, oldNode := obj.(*corev1.Node), old.(*corev1.Node)
	errs := append(validateSpec(&node.Spec), validateStatus(&node.Status)...)
	specPath := field.NewPath("spec")
	if len(oldNode.Spec.PodCIDRs) > 0 && !equalStrings(node.Spec.PodCIDRs, oldNode.Spec.PodCIDRs) {
		errs = append(errs, field.Forbidden(specPath.Child("podCIDRs"), "node updates may not change podCIDR except from \"\" to valid"))
	}
	if oldNode.Spec.ProviderID != "" && node.Spec.ProviderID != oldNode.Spec.ProviderID {
		errs = append(errs, field.Forbidden(specPath.Child("providerID"), "node updates may not change providerID except from \"\" to valid"))
	}
	return errs
}

// ValidateStatusUpdate checks an update through nodes/status.
func (Strategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validateStatus(&obj.(*corev1.Node).Status)
}

func validateSpec(spec *corev1.NodeSpec) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec")
	for i, cidr := range spec.PodCIDRs {
		if _, _, err := net.ParseCIDR(cidr); err != nil {
			errs = append(errs, field.Invalid(path.Child("podCIDRs").Index(i), cidr, "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"))
		}
	}
	if len(spec.PodCIDRs) > 2 {
		errs = append(errs, field.Invalid(path.Child("podCIDRs"), spec.PodCIDRs, "may specify no more than one CIDR for each IP family"))
	}
	errs = append(errs, ValidateTaints(spec.Taints, path.Child("taints"))...)
	return errs
}

var taintEffects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}

// ValidateTaints checks taint keys, values and effects, and that no
// key/effect pair repeats.
func ValidateTaints(taints []corev1.Taint, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, t := range taints {
		idx := path.Index(i)
		errs = append(errs, metavalidation.ValidateLabelName(t.Key, idx.Child("key"))...)
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(idx.Child("value"), t.Value, msg))
		}
		switch {
		case t.Effect == "":
			errs = append(errs, field.Required(idx.Child("effect"), ""))
		case !containsEffect(t.Effect):
			errs = append(errs, field.NotSupported(idx.Child("effect"), t.Effect, taintEffects))
		}
		key := t.Key + "\x00" + string(t.Effect)
		if seen.Has(key) {
			errs = append(errs, field.Duplicate(idx, "taints must be unique by key and effect pair"))
		}
		seen.Insert(key)
	}
	return errs
}

func containsEffect(e corev1.TaintEffect) bool {
	for _, v := range taintEffects {
		if v == e {
			return true
		}
	}
	return false
}

func validateStatus(s *corev1.NodeStatus) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("status")
	for _, l := range []struct {
		name string
		list corev1.ResourceList
	}{{"capacity", s.Capacity}, {"allocatable", s.Allocatable}} {
		for name, q := range l.list {
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(path.Child(l.name).Key(string(name)), q.String(), "must be greater than or equal to 0"))
			}
		}
	}
	return errs
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FieldSet adds spec.unschedulable to the selectable fields.
func (Strategy) FieldSet(obj runtime.Object) fields.Set {
	return fields.Set{"spec.unschedulable": strconv.FormatBool(obj.(*corev1.Node).Spec.Unschedulable)}
}

// TableColumns are the columns of `kubectl get nodes`.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	info := corev1.NodeSystemInfo{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Status", Type: "string", Description: "The status of the node"},
		{Name: "Roles", Type: "string", Description: "The roles of the node"},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
		{Name: "Version", Type: "string", Description: info["kubeletVersion"]},
		{Name: "Internal-IP", Type: "string", Priority: 1, Description: corev1.NodeStatus{}.SwaggerDoc()["addresses"]},
		{Name: "External-IP", Type: "string", Priority: 1, Description: corev1.NodeStatus{}.SwaggerDoc()["addresses"]},
		{Name: "OS-Image", Type: "string", Priority: 1, Description: info["osImage"]},
		{Name: "Kernel-Version", Type: "string", Priority: 1, Description: info["kernelVersion"]},
		{Name: "Container-Runtime", Type: "string", Priority: 1, Description: info["containerRuntimeVersion"]},
	}
}

// TableRow renders one node the way kubectl shows it.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return nil, fmt.Errorf("node table: unexpected object %T", obj)
	}
	info := node.Status.NodeInfo
	return []interface{}{
		node.Name,
		status(node),
		roles(node),
		registry.Age(node.CreationTimestamp),
		info.KubeletVersion,
		address(node, corev1.NodeInternalIP),
		address(node, corev1.NodeExternalIP),
		orUnknown(info.OSImage),
		orUnknown(info.KernelVersion),
		orUnknown(info.ContainerRuntimeVersion),
	}, nil
}

func status(node *corev1.Node) string {
	var parts []string
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			parts = append(parts, "Ready")
		} else {
			parts = append(parts, "NotReady")
		}
		break
	}
	if len(parts) == 0 {
		parts = append(parts, "Unknown")
	}
	if node.Spec.Unschedulable {
		parts = append(parts, "SchedulingDisabled")
	}
	return strings.Join(parts, ",")
}

func roles(node *corev1.Node) string {
	set := sets.New[string]()
	for k, v := range node.Labels {
		switch {
		case strings.HasPrefix(k, labelNodeRolePrefix):
			if role := strings.TrimPrefix(k, labelNodeRolePrefix); role != "" {
				set.Insert(role)
			}
		case k == labelNodeRole && v != "":
			set.Insert(v)
		}
	}
	if set.Len() == 0 {
		return "<none>"
	}
	list := set.UnsortedList()
	sort.Strings(list)
	return strings.Join(list, ",")
}

func address(node *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range node.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}
