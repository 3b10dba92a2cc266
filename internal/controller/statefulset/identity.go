package statefulset

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/kubectl/pkg/util/podutils"
)

var (
	controllerKind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")
	podKind        = corev1.SchemeGroupVersion.WithKind("Pod")
	podNameRegexp  = regexp.MustCompile("(.*)-([0-9]+)$")
)

// parentAndOrdinal splits a pod name <set>-<ordinal>; ordinal is -1 when
// the name has none.
func parentAndOrdinal(pod *corev1.Pod) (string, int) {
	m := podNameRegexp.FindStringSubmatch(pod.Name)
	if len(m) < 3 {
		return "", -1
	}
	i, err := strconv.ParseInt(m[2], 10, 32)
	if err != nil {
		return m[1], -1
	}
	return m[1], int(i)
}

func ordinalOf(pod *corev1.Pod) int { _, o := parentAndOrdinal(pod); return o }

func replicasOf(set *appsv1.StatefulSet) int {
	if set.Spec.Replicas == nil {
		return 1
	}
	return int(*set.Spec.Replicas)
}

func startOrdinal(set *appsv1.StatefulSet) int {
	if set.Spec.Ordinals != nil {
		return int(set.Spec.Ordinals.Start)
	}
	return 0
}

func endOrdinal(set *appsv1.StatefulSet) int { return startOrdinal(set) + replicasOf(set) - 1 }

func inOrdinalRange(pod *corev1.Pod, set *appsv1.StatefulSet) bool {
	o := ordinalOf(pod)
	return o >= startOrdinal(set) && o <= endOrdinal(set)
}

func podName(set *appsv1.StatefulSet, ordinal int) string {
	return fmt.Sprintf("%s-%d", set.Name, ordinal)
}

// claimName is <template>-<set>-<ordinal>.
func claimName(set *appsv1.StatefulSet, template *corev1.PersistentVolumeClaim, ordinal int) string {
	return fmt.Sprintf("%s-%s-%d", template.Name, set.Name, ordinal)
}

func isMemberOf(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	parent, _ := parentAndOrdinal(pod)
	return parent == set.Name
}

func identityMatches(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	parent, ordinal := parentAndOrdinal(pod)
	return ordinal >= 0 && parent == set.Name && pod.Name == podName(set, ordinal) &&
		pod.Namespace == set.Namespace && pod.Labels[appsv1.StatefulSetPodNameLabel] == pod.Name
}

func storageMatches(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	ordinal := ordinalOf(pod)
	if ordinal < 0 {
		return false
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	for i := range set.Spec.VolumeClaimTemplates {
		t := &set.Spec.VolumeClaimTemplates[i]
		v, ok := volumes[t.Name]
		if !ok || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != claimName(set, t, ordinal) {
			return false
		}
	}
	return true
}

// claimsFor are the PVCs the pod's ordinal gets from the claim templates,
// keyed by template name, labelled with the set's selector labels.
func claimsFor(set *appsv1.StatefulSet, pod *corev1.Pod) map[string]corev1.PersistentVolumeClaim {
	ordinal := ordinalOf(pod)
	out := map[string]corev1.PersistentVolumeClaim{}
	for i := range set.Spec.VolumeClaimTemplates {
		claim := set.Spec.VolumeClaimTemplates[i].DeepCopy()
		claim.Name = claimName(set, &set.Spec.VolumeClaimTemplates[i], ordinal)
		claim.Namespace = set.Namespace
		if claim.Labels == nil {
			claim.Labels = map[string]string{}
		}
		if set.Spec.Selector != nil {
			for k, v := range set.Spec.Selector.MatchLabels {
				claim.Labels[k] = v
			}
		}
		claim.ResourceVersion, claim.UID, claim.CreationTimestamp = "", "", metav1.Time{}
		claim.Status = corev1.PersistentVolumeClaimStatus{}
		out[set.Spec.VolumeClaimTemplates[i].Name] = *claim
	}
	return out
}

// updateStorage points the pod's template-named volumes at its claims.
func updateStorage(set *appsv1.StatefulSet, pod *corev1.Pod) {
	claims := claimsFor(set, pod)
	var vols []corev1.Volume
	for i := range set.Spec.VolumeClaimTemplates {
		name := set.Spec.VolumeClaimTemplates[i].Name
		vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claims[name].Name},
		}})
	}
	for _, v := range pod.Spec.Volumes {
		if _, ok := claims[v.Name]; !ok {
			vols = append(vols, v)
		}
	}
	pod.Spec.Volumes = vols
}

// updateIdentity gives the pod its name and the pod-name and pod-index
// labels.
func updateIdentity(set *appsv1.StatefulSet, pod *corev1.Pod) {
	ordinal := ordinalOf(pod)
	pod.Name = podName(set, ordinal)
	pod.Namespace = set.Namespace
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[appsv1.StatefulSetPodNameLabel] = pod.Name
	pod.Labels[appsv1.PodIndexLabel] = strconv.Itoa(ordinal)
}

// newPod is the set's pod with ordinal: the template, the identity,
// hostname <pod> and subdomain serviceName, and the claims' volumes.
func newPod(set *appsv1.StatefulSet, ordinal int) *corev1.Pod {
	t := set.Spec.Template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            podName(set, ordinal),
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, controllerKind)},
		},
		Spec: t.Spec,
	}
	updateIdentity(set, pod)
	pod.Spec.Hostname = pod.Name
	pod.Spec.Subdomain = set.Spec.ServiceName
	updateStorage(set, pod)
	return pod
}

// newVersionedPod is the pod for ordinal at the revision it should have:
// below the partition (or, without a rolling update config, below the
// current replicas) the current revision, else the update revision.
func newVersionedPod(currentSet, updateSet *appsv1.StatefulSet, currentRevision, updateRevision string, ordinal int) *corev1.Pod {
	rolling := currentSet.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType
	ru := currentSet.Spec.UpdateStrategy.RollingUpdate
	if (rolling && ru == nil && ordinal < startOrdinal(currentSet)+int(currentSet.Status.CurrentReplicas)) ||
		(ru != nil && ru.Partition != nil && ordinal < startOrdinal(currentSet)+int(*ru.Partition)) {
		pod := newPod(currentSet, ordinal)
		setRevision(pod, currentRevision)
		return pod
	}
	pod := newPod(updateSet, ordinal)
	setRevision(pod, updateRevision)
	return pod
}

func setRevision(pod *corev1.Pod, rev string) {
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[appsv1.StatefulSetRevisionLabel] = rev
}

func podRevision(pod *corev1.Pod) string { return pod.Labels[appsv1.StatefulSetRevisionLabel] }

func isRunningAndReady(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodRunning && podutils.IsPodReady(pod)
}

func isAvailable(pod *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	return podutils.IsPodAvailable(pod, minReadySeconds, metav1.NewTime(now))
}

// isCreated: a pod the API has (a status phase); new pods built here have none.
func isCreated(pod *corev1.Pod) bool     { return pod.Status.Phase != "" }
func isPending(pod *corev1.Pod) bool     { return pod.Status.Phase == corev1.PodPending }
func isTerminating(pod *corev1.Pod) bool { return pod.DeletionTimestamp != nil }
func isTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
}

func isUnavailable(pod *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	return !isAvailable(pod, minReadySeconds, now) || isTerminating(pod)
}

// applyRevision is set with the template its revision stores.
func applyRevision(set *appsv1.StatefulSet, rev *appsv1.ControllerRevision) (*appsv1.StatefulSet, error) {
	clone := set.DeepCopy()
	data, err := json.Marshal(clone)
	if err != nil {
		return nil, err
	}
	patched, err := strategicpatch.StrategicMergePatch(data, rev.Data.Raw, clone)
	if err != nil {
		return nil, err
	}
	restored := &appsv1.StatefulSet{}
	if err := json.Unmarshal(patched, restored); err != nil {
		return nil, err
	}
	clone.Spec = restored.Spec
	return clone, nil
}

// maxUnavailable resolves rollingUpdate.maxUnavailable (default 1, at
// least 1) against the replicas, rounding down.
func maxUnavailable(set *appsv1.StatefulSet) (int, error) {
	var v *intstr.IntOrString
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		v = ru.MaxUnavailable
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(v, intstr.FromInt32(1)), replicasOf(set), false)
	if err != nil {
		return 0, err
	}
	return max(n, 1), nil
}
