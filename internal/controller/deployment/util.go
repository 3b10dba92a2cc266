package deployment

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/dump"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
)

// Labels, annotations and condition reasons, as upstream (kubectl reads them).
const (
	PodTemplateHashLabel = appsv1.DefaultDeploymentUniqueLabelKey // "pod-template-hash"

	RevisionAnnotation        = "deployment.kubernetes.io/revision"
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	MaxReplicasAnnotation     = "deployment.kubernetes.io/max-replicas"
	lastAppliedAnnotation     = corev1.LastAppliedConfigAnnotation
	rollbackToAnnotation      = "deprecated.deployment.rollback.to"

	// maxRevisionHistoryChars bounds the revision-history annotation.
	maxRevisionHistoryChars = 2000

	ReasonReplicaSetUpdated      = "ReplicaSetUpdated"
	ReasonFailedRSCreate         = "ReplicaSetCreateError"
	ReasonNewReplicaSetCreated   = "NewReplicaSetCreated"
	ReasonFoundNewReplicaSet     = "FoundNewReplicaSet"
	ReasonNewRSAvailable         = "NewReplicaSetAvailable"
	ReasonTimedOut               = "ProgressDeadlineExceeded"
	ReasonPaused                 = "DeploymentPaused"
	ReasonResumed                = "DeploymentResumed"
	ReasonMinimumReplicasAvail   = "MinimumReplicasAvailable"
	ReasonMinimumReplicasUnavail = "MinimumReplicasUnavailable"
	ReasonScalingReplicaSet      = "ScalingReplicaSet"
	ReasonSelectingAll           = "SelectingAll"
)

// ComputeHash is the pod-template-hash of template with collisionCount, as
// upstream computes it: FNV-32a over the template's deep-hash dump and the
// collision count's 8 little-endian bytes, encoded with SafeEncodeString.
func ComputeHash(template *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(*template))
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		h.Write(b)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// EqualIgnoreHash compares two pod templates, ignoring pod-template-hash.
func EqualIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, PodTemplateHashLabel)
	delete(b.Labels, PodTemplateHashLabel)
	if len(a.Labels) == 0 {
		a.Labels = nil
	}
	if len(b.Labels) == 0 {
		b.Labels = nil
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

func replicasOf(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func rsReplicas(rs *appsv1.ReplicaSet) int32 {
	if rs == nil || rs.Spec.Replicas == nil {
		return 0
	}
	return *rs.Spec.Replicas
}

// revision is the revision annotation of obj, 0 when absent or invalid.
func revision(m metav1.Object) int64 {
	v, err := strconv.ParseInt(m.GetAnnotations()[RevisionAnnotation], 10, 64)
	if err != nil {
		return 0
	}
	return v
}

func maxRevision(rss []*appsv1.ReplicaSet) int64 {
	var max int64
	for _, rs := range rss {
		if v := revision(rs); v > max {
			max = v
		}
	}
	return max
}

// byCreation sorts ReplicaSets oldest first (name breaks ties).
type byCreation []*appsv1.ReplicaSet

func (o byCreation) Len() int      { return len(o) }
func (o byCreation) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o byCreation) Less(i, j int) bool {
	if o[i].CreationTimestamp.Equal(&o[j].CreationTimestamp) {
		return o[i].Name < o[j].Name
	}
	return o[i].CreationTimestamp.Before(&o[j].CreationTimestamp)
}

// byRevision sorts ReplicaSets by revision, oldest first.
type byRevision []*appsv1.ReplicaSet

func (o byRevision) Len() int      { return len(o) }
func (o byRevision) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o byRevision) Less(i, j int) bool {
	ri, rj := revision(o[i]), revision(o[j])
	if ri == rj {
		return byCreation(o).Less(i, j)
	}
	return ri < rj
}

// bySize sorts larger first; ties go newer first (newerFirst) or older first.
func sortBySize(rss []*appsv1.ReplicaSet, newerFirst bool) {
	sort.SliceStable(rss, func(i, j int) bool {
		if rsReplicas(rss[i]) != rsReplicas(rss[j]) {
			return rsReplicas(rss[i]) > rsReplicas(rss[j])
		}
		if newerFirst {
			return byCreation(rss).Less(j, i)
		}
		return byCreation(rss).Less(i, j)
	})
}

// findNewReplicaSet is the oldest ReplicaSet whose template equals the
// Deployment's, ignoring the hash label.
func findNewReplicaSet(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	sorted := append([]*appsv1.ReplicaSet(nil), rss...)
	sort.Sort(byCreation(sorted))
	for _, rs := range sorted {
		if EqualIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			return rs
		}
	}
	return nil
}

// findOldReplicaSets are every ReplicaSet but newRS.
func findOldReplicaSets(rss []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var old []*appsv1.ReplicaSet
	for _, rs := range rss {
		if newRS != nil && rs.UID == newRS.UID {
			continue
		}
		old = append(old, rs)
	}
	return old
}

func activeReplicaSets(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if rs != nil && rsReplicas(rs) > 0 {
			out = append(out, rs)
		}
	}
	return out
}

func sumSpec(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		n += rsReplicas(rs)
	}
	return n
}

func sumStatus(rss []*appsv1.ReplicaSet, f func(appsv1.ReplicaSetStatus) int32) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += f(rs.Status)
		}
	}
	return n
}

func statusReplicas(s appsv1.ReplicaSetStatus) int32  { return s.Replicas }
func statusReady(s appsv1.ReplicaSetStatus) int32     { return s.ReadyReplicas }
func statusAvailable(s appsv1.ReplicaSetStatus) int32 { return s.AvailableReplicas }

func isRollingUpdate(d *appsv1.Deployment) bool {
	return d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType
}

// resolveFenceposts turns maxSurge (rounded up) and maxUnavailable (rounded
// down) into counts; both zero would deadlock, so unavailable becomes 1.
func resolveFenceposts(maxSurge, maxUnavailable *intstr.IntOrString, desired int32) (int32, int32, error) {
	zero := intstr.FromInt32(0)
	if maxSurge == nil {
		maxSurge = &zero
	}
	if maxUnavailable == nil {
		maxUnavailable = &zero
	}
	surge, err := intstr.GetScaledValueFromIntOrPercent(maxSurge, int(desired), true)
	if err != nil {
		return 0, 0, err
	}
	unavailable, err := intstr.GetScaledValueFromIntOrPercent(maxUnavailable, int(desired), false)
	if err != nil {
		return 0, 0, err
	}
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return int32(surge), int32(unavailable), nil
}

// maxSurge is how many pods above replicas a rolling update may run.
func maxSurge(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) || d.Spec.Strategy.RollingUpdate == nil {
		return 0
	}
	s, _, _ := resolveFenceposts(d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable, replicasOf(d))
	return s
}

// maxUnavailable is how many pods below replicas a rolling update may go.
func maxUnavailable(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) || replicasOf(d) == 0 || d.Spec.Strategy.RollingUpdate == nil {
		return 0
	}
	_, u, _ := resolveFenceposts(d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable, replicasOf(d))
	return min(u, replicasOf(d))
}

// newRSNewReplicas is the size the new ReplicaSet may grow to now.
func newRSNewReplicas(d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) int32 {
	if !isRollingUpdate(d) {
		return replicasOf(d)
	}
	current := sumSpec(all)
	maxTotal := replicasOf(d) + maxSurge(d)
	if current >= maxTotal {
		return rsReplicas(newRS)
	}
	up := min(maxTotal-current, replicasOf(d)-rsReplicas(newRS))
	return rsReplicas(newRS) + up
}

// setReplicasAnnotations records desired and max replicas on rs.
func setReplicasAnnotations(rs *appsv1.ReplicaSet, desired, max int32) bool {
	changed := false
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	for k, v := range map[string]string{DesiredReplicasAnnotation: strconv.Itoa(int(desired)), MaxReplicasAnnotation: strconv.Itoa(int(max))} {
		if rs.Annotations[k] != v {
			rs.Annotations[k] = v
			changed = true
		}
	}
	return changed
}

func replicasAnnotationsNeedUpdate(rs *appsv1.ReplicaSet, desired, max int32) bool {
	return rs.Annotations[DesiredReplicasAnnotation] != strconv.Itoa(int(desired)) ||
		rs.Annotations[MaxReplicasAnnotation] != strconv.Itoa(int(max))
}

func intAnnotation(rs *appsv1.ReplicaSet, name string) (int32, bool) {
	v, ok := rs.Annotations[name]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}

// skipCopyAnnotation are the Deployment annotations not copied to its
// ReplicaSets.
func skipCopyAnnotation(k string) bool {
	switch k {
	case lastAppliedAnnotation, RevisionAnnotation, RevisionHistoryAnnotation,
		DesiredReplicasAnnotation, MaxReplicasAnnotation, rollbackToAnnotation:
		return true
	}
	return false
}

// setNewReplicaSetAnnotations copies the Deployment's annotations to the new
// ReplicaSet, raises its revision to newRevision (remembering the previous
// one in revision-history) and, for a ReplicaSet being created, records
// desired/max replicas. It reports whether anything changed.
func setNewReplicaSetAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet, newRevision string, exists bool) bool {
	changed := false
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	for k, v := range d.Annotations {
		if skipCopyAnnotation(k) {
			continue
		}
		if cur, ok := rs.Annotations[k]; !ok || cur != v {
			rs.Annotations[k] = v
			changed = true
		}
	}
	oldRevision := rs.Annotations[RevisionAnnotation]
	oldInt, err := strconv.ParseInt(oldRevision, 10, 64)
	if err != nil {
		if oldRevision != "" {
			return changed
		}
		oldInt = 0
	}
	newInt, err := strconv.ParseInt(newRevision, 10, 64)
	if err != nil {
		return changed
	}
	if oldInt < newInt {
		rs.Annotations[RevisionAnnotation] = newRevision
		changed = true
		if oldRevision != "" {
			history := rs.Annotations[RevisionHistoryAnnotation]
			entries := []string{}
			if history != "" {
				entries = strings.Split(history, ",")
			}
			entries = append(entries, oldRevision)
			for len(entries) > 1 && len(strings.Join(entries, ",")) > maxRevisionHistoryChars {
				entries = entries[1:]
			}
			rs.Annotations[RevisionHistoryAnnotation] = strings.Join(entries, ",")
		}
	}
	if !exists && setReplicasAnnotations(rs, replicasOf(d), replicasOf(d)+maxSurge(d)) {
		changed = true
	}
	return changed
}

// setDeploymentRevision sets the revision annotation of d.
func setDeploymentRevision(d *appsv1.Deployment, rev string) bool {
	if d.Annotations[RevisionAnnotation] == rev {
		return false
	}
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[RevisionAnnotation] = rev
	return true
}

// --- conditions

func newCondition(t appsv1.DeploymentConditionType, s corev1.ConditionStatus, reason, msg string, now time.Time) appsv1.DeploymentCondition {
	ts := metav1.NewTime(now)
	return appsv1.DeploymentCondition{Type: t, Status: s, Reason: reason, Message: msg, LastUpdateTime: ts, LastTransitionTime: ts}
}

func getCondition(s appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

// setCondition replaces the condition of the same type unless status and
// reason are unchanged; the transition time is kept if status is.
func setCondition(s *appsv1.DeploymentStatus, c appsv1.DeploymentCondition) {
	cur := getCondition(*s, c.Type)
	if cur != nil && cur.Status == c.Status && cur.Reason == c.Reason {
		return
	}
	if cur != nil && cur.Status == c.Status {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	removeCondition(s, c.Type)
	s.Conditions = append(s.Conditions, c)
}

func removeCondition(s *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) {
	var out []appsv1.DeploymentCondition
	for _, c := range s.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	s.Conditions = out
}

func hasProgressDeadline(d *appsv1.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != math.MaxInt32
}

// deploymentComplete: every replica updated and available, nothing old left.
func deploymentComplete(d *appsv1.Deployment, s *appsv1.DeploymentStatus) bool {
	return s.UpdatedReplicas == replicasOf(d) && s.Replicas == replicasOf(d) &&
		s.AvailableReplicas == replicasOf(d) && s.ObservedGeneration >= d.Generation
}

// deploymentProgressing: the new status moved the rollout forward.
func deploymentProgressing(d *appsv1.Deployment, s *appsv1.DeploymentStatus) bool {
	old := d.Status
	return s.UpdatedReplicas > old.UpdatedReplicas ||
		s.Replicas-s.UpdatedReplicas < old.Replicas-old.UpdatedReplicas ||
		s.ReadyReplicas > old.ReadyReplicas ||
		s.AvailableReplicas > old.AvailableReplicas
}

// deploymentTimedOut: no progress for progressDeadlineSeconds.
func deploymentTimedOut(d *appsv1.Deployment, s *appsv1.DeploymentStatus, now time.Time) bool {
	if !hasProgressDeadline(d) {
		return false
	}
	c := getCondition(*s, appsv1.DeploymentProgressing)
	if c == nil || c.Reason == ReasonNewRSAvailable {
		return false
	}
	if c.Reason == ReasonTimedOut {
		return true
	}
	deadline := c.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second)
	return deadline.Before(now)
}
