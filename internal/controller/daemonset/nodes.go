package daemonset

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// Labels and annotations upstream's DaemonSet controller uses.
const (
	// HashLabel carries the revision hash on pods and revisions.
	HashLabel = appsv1.DefaultDaemonSetUniqueLabelKey // controller-revision-hash
	// TemplateGenerationLabel carries the template generation on pods
	// when the DaemonSet has the deprecated generation annotation.
	TemplateGenerationLabel = "pod-template-generation"
	// TemplateGenerationAnnotation is the deprecated annotation on the
	// DaemonSet that TemplateGenerationLabel copies.
	TemplateGenerationAnnotation = appsv1.DeprecatedTemplateGeneration
)

// daemonTolerations are the tolerations upstream adds to every daemon pod
// (and assumes when deciding where the DaemonSet should run): not-ready and
// unreachable NoExecute without tolerationSeconds, so daemon pods are never
// evicted; the pressure and unschedulable NoSchedule taints; network
// unavailable for host-network pods.
func daemonTolerations(spec *corev1.PodSpec) []corev1.Toleration {
	add := []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
	if spec.HostNetwork {
		add = append(add, corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	out := append([]corev1.Toleration(nil), spec.Tolerations...)
	for _, t := range add {
		out = addOrReplaceToleration(out, t)
	}
	return out
}

// addOrReplaceToleration replaces the tolerations that match t (same key,
// operator, value and effect) with t, or appends t.
func addOrReplaceToleration(ts []corev1.Toleration, t corev1.Toleration) []corev1.Toleration {
	var out []corev1.Toleration
	replaced := false
	for _, have := range ts {
		if t.MatchToleration(&have) {
			out = append(out, t)
			replaced = true
			continue
		}
		out = append(out, have)
	}
	if !replaced {
		out = append(out, t)
	}
	return out
}

// placement is what the DaemonSet's pod template demands of a node, built
// once a sync.
type placement struct {
	nodeName    string
	affinity    nodeaffinity.RequiredNodeAffinity
	tolerations []corev1.Toleration
}

func placementOf(ds *appsv1.DaemonSet) placement {
	spec := &ds.Spec.Template.Spec
	return placement{
		nodeName:    spec.NodeName,
		affinity:    nodeaffinity.NewRequiredNodeAffinity(spec.NodeSelector, spec.Affinity),
		tolerations: daemonTolerations(spec),
	}
}

// shouldRun says whether a daemon pod should be created on node (shouldRun)
// and whether one already there may stay (shouldContinue): the template's
// nodeName, node selector and required node affinity must match; every
// NoSchedule and NoExecute taint must be tolerated to run, every NoExecute
// taint to continue running.
func (p placement) shouldRun(node *corev1.Node) (shouldRun, shouldContinue bool) {
	if p.nodeName != "" && p.nodeName != node.Name {
		return false, false
	}
	if ok, _ := p.affinity.Match(node); !ok {
		return false, false
	}
	logger := klog.Background()
	if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, p.tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoExecute || t.Effect == corev1.TaintEffectNoSchedule
	}, false); !untolerated {
		return true, true
	}
	_, untoleratedNoExecute := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, p.tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoExecute
	}, false)
	return false, !untoleratedNoExecute
}

// templateGeneration is the DaemonSet's deprecated template generation
// annotation, if it has a valid one.
func templateGeneration(ds *appsv1.DaemonSet) *int64 {
	v, ok := ds.Annotations[TemplateGenerationAnnotation]
	if !ok {
		return nil
	}
	g, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil
	}
	return &g
}

// isUpdated says whether pod runs the DaemonSet's current template: its
// hash label is hash, or its generation label is the template generation.
func isUpdated(pod *corev1.Pod, hash string, generation *int64) bool {
	if hash != "" && pod.Labels[HashLabel] == hash {
		return true
	}
	return generation != nil && pod.Labels[TemplateGenerationLabel] == fmt.Sprint(*generation)
}

// podTemplate is the template daemon pods are created from: the
// DaemonSet's, with the daemon tolerations and the hash and generation
// labels.
func podTemplate(ds *appsv1.DaemonSet, hash string) corev1.PodTemplateSpec {
	t := *ds.Spec.Template.DeepCopy()
	t.Spec.Tolerations = daemonTolerations(&t.Spec)
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	if g := templateGeneration(ds); g != nil {
		t.Labels[TemplateGenerationLabel] = fmt.Sprint(*g)
	}
	if hash != "" {
		t.Labels[HashLabel] = hash
	}
	return t
}

// pinToNode makes affinity require the node named nodeName (a matchFields
// term on metadata.name replacing the required terms), so that the
// scheduler places the pod there and nowhere else.
func pinToNode(affinity *corev1.Affinity, nodeName string) *corev1.Affinity {
	term := corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{
		Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{nodeName},
	}}}
	if affinity == nil {
		affinity = &corev1.Affinity{}
	}
	if affinity.NodeAffinity == nil {
		affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	if affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = []corev1.NodeSelectorTerm{term}
	return affinity
}

// targetNode is the node a daemon pod runs on or is pinned to.
func targetNode(pod *corev1.Pod) (string, bool) {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName, true
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return "", false
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, req := range term.MatchFields {
			if req.Key == metav1.ObjectNameField && req.Operator == corev1.NodeSelectorOpIn {
				if len(req.Values) != 1 {
					return "", false
				}
				return req.Values[0], true
			}
		}
	}
	return "", false
}

// surgeCount and unavailableCount resolve the rolling update's maxSurge
// and maxUnavailable against the number of nodes that should run a pod.
func surgeCount(ds *appsv1.DaemonSet, desired int) (int, error) {
	r := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || r == nil || r.MaxSurge == nil {
		return 0, nil
	}
	return intstr.GetScaledValueFromIntOrPercent(r.MaxSurge, desired, true)
}

func unavailableCount(ds *appsv1.DaemonSet, desired int) (int, error) {
	r := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || r == nil {
		return 0, nil
	}
	return intstr.GetScaledValueFromIntOrPercent(r.MaxUnavailable, desired, true)
}

func allowsSurge(ds *appsv1.DaemonSet) bool {
	n, err := surgeCount(ds, 1)
	return err == nil && n > 0
}
