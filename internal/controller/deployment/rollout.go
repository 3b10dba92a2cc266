package deployment

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// allReplicaSets returns the new ReplicaSet (created if asked and missing,
// its revision annotations brought up to date) and every old one.
func (c *Controller) allReplicaSets(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet, error) {
	existing := findNewReplicaSet(d, rsList)
	old := findOldReplicaSets(rsList, existing)
	newRS, err := c.newReplicaSet(ctx, d, existing, old, create)
	if err != nil {
		return nil, nil, err
	}
	return newRS, old, nil
}

func (c *Controller) newReplicaSet(ctx context.Context, d *appsv1.Deployment, existing *appsv1.ReplicaSet, old []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, error) {
	newRevision := strconv.FormatInt(maxRevision(old)+1, 10)
	now := c.clock.Now()

	if existing != nil {
		rs := existing.DeepCopy()
		annotationsChanged := setNewReplicaSetAnnotations(d, rs, newRevision, true)
		minReadyChanged := rs.Spec.MinReadySeconds != d.Spec.MinReadySeconds
		if annotationsChanged || minReadyChanged {
			rs.Spec.MinReadySeconds = d.Spec.MinReadySeconds
			return c.client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, rs, metav1.UpdateOptions{})
		}
		revChanged := setDeploymentRevision(d, rs.Annotations[RevisionAnnotation])
		statusChanged := false
		if hasProgressDeadline(d) && getCondition(d.Status, appsv1.DeploymentProgressing) == nil {
			msg := fmt.Sprintf("Found new replica set %q", rs.Name)
			setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonFoundNewReplicaSet, msg, now))
			statusChanged = true
		}
		if revChanged || statusChanged {
			if err := c.updateDeployment(ctx, d, revChanged, statusChanged); err != nil {
				return nil, err
			}
		}
		return rs, nil
	}
	if !create {
		return nil, nil
	}

	hash := ComputeHash(&d.Spec.Template, d.Status.CollisionCount)
	template := d.Spec.Template.DeepCopy()
	template.Labels = withLabel(template.Labels, PodTemplateHashLabel, hash)
	selector := d.Spec.Selector.DeepCopy()
	selector.MatchLabels = withLabel(selector.MatchLabels, PodTemplateHashLabel, hash)
	yes := true
	zero := int32(0)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:      d.Name + "-" + hash,
			Namespace: d.Namespace,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: controllerKind.GroupVersion().String(), Kind: controllerKind.Kind,
				Name: d.Name, UID: d.UID, Controller: &yes, BlockOwnerDeletion: &yes,
			}},
			Labels: template.Labels,
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        &zero,
			MinReadySeconds: d.Spec.MinReadySeconds,
			Selector:        selector,
			Template:        *template,
		},
	}
	replicas := newRSNewReplicas(d, append(append([]*appsv1.ReplicaSet(nil), old...), rs), rs)
	rs.Spec.Replicas = &replicas
	setNewReplicaSetAnnotations(d, rs, newRevision, false)

	created, err := c.client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, rs, metav1.CreateOptions{})
	alreadyExists := false
	switch {
	case apierrors.IsAlreadyExists(err):
		alreadyExists = true
		found, getErr := c.rsLister.ReplicaSets(rs.Namespace).Get(rs.Name)
		if getErr != nil {
			return nil, getErr
		}
		if ref := metav1.GetControllerOf(found); ref != nil && ref.UID == d.UID && EqualIgnoreHash(&d.Spec.Template, &found.Spec.Template) {
			created, err = found.DeepCopy(), nil // the sync may scale it (scaleReplicaSet)
			break
		}
		// A hash collision: bump collisionCount so the next sync picks another name.
		if d.Status.CollisionCount == nil {
			d.Status.CollisionCount = new(int32)
		}
		*d.Status.CollisionCount++
		if _, uerr := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{}); uerr == nil {
			klog.FromContext(ctx).V(2).Info("Found a hash collision; bumped collisionCount", "deployment", klog.KObj(d), "collisionCount", *d.Status.CollisionCount)
		}
		return nil, err
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil, err
	case err != nil:
		msg := fmt.Sprintf("Failed to create new replica set %q: %v", rs.Name, err)
		if hasProgressDeadline(d) {
			setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, ReasonFailedRSCreate, msg, now))
			_, _ = c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		}
		c.recorder.Event(d, corev1.EventTypeWarning, ReasonFailedRSCreate, msg)
		return nil, err
	}
	if !alreadyExists && replicas > 0 {
		c.recorder.Eventf(d, corev1.EventTypeNormal, ReasonScalingReplicaSet, "Scaled up replica set %s from 0 to %d", created.Name, replicas)
	}
	revChanged := setDeploymentRevision(d, newRevision)
	statusChanged := false
	if !alreadyExists && hasProgressDeadline(d) {
		msg := fmt.Sprintf("Created new replica set %q", created.Name)
		setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonNewReplicaSetCreated, msg, now))
		statusChanged = true
	}
	if revChanged || statusChanged {
		if err := c.updateDeployment(ctx, d, revChanged, statusChanged); err != nil {
			return nil, err
		}
	}
	return created, nil
}

// updateDeployment writes d's metadata (the revision annotation) and/or its
// status; d is replaced by what the server returned.
func (c *Controller) updateDeployment(ctx context.Context, d *appsv1.Deployment, meta, status bool) error {
	want := d.Status
	updated := d
	if meta {
		var err error
		updated, err = c.client.AppsV1().Deployments(d.Namespace).Update(ctx, d, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
	}
	if status && !reflect.DeepEqual(updated.Status, want) {
		updated = updated.DeepCopy()
		updated.Status = want
		var err error
		updated, err = c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
	}
	*d = *updated
	return nil
}

func withLabel(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for kk, vv := range m {
		out[kk] = vv
	}
	out[k] = v
	return out
}

// isScalingEvent: an active ReplicaSet was sized for other replicas.
func (c *Controller) isScalingEvent(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) (bool, error) {
	newRS, old, err := c.allReplicaSets(ctx, d, rsList, false)
	if err != nil {
		return false, err
	}
	for _, rs := range activeReplicaSets(append(old, newRS)) {
		if desired, ok := intAnnotation(rs, DesiredReplicasAnnotation); ok && desired != replicasOf(d) {
			return true, nil
		}
	}
	return false, nil
}

// sync handles scaling and paused Deployments: it resizes without rolling.
func (c *Controller) sync(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, old, err := c.allReplicaSets(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	if err := c.scale(ctx, d, newRS, old); err != nil {
		return err
	}
	if d.Spec.Paused {
		if err := c.cleanup(ctx, d, old); err != nil {
			return err
		}
	}
	return c.syncStatus(ctx, d, append(old, newRS), newRS)
}

func (c *Controller) syncStatusOnly(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, old, err := c.allReplicaSets(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	return c.syncStatus(ctx, d, append(old, newRS), newRS)
}

// activeOrLatest is the only active ReplicaSet, or the newest when none is
// active; nil when several are active.
func activeOrLatest(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	if newRS == nil && len(old) == 0 {
		return nil
	}
	sorted := append([]*appsv1.ReplicaSet(nil), old...)
	sort.Sort(sort.Reverse(byCreation(sorted)))
	active := activeReplicaSets(append(sorted, newRS))
	switch len(active) {
	case 0:
		if newRS != nil {
			return newRS
		}
		return sorted[0]
	case 1:
		return active[0]
	}
	return nil
}

func isSaturated(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	desired, ok := intAnnotation(rs, DesiredReplicasAnnotation)
	return ok && rsReplicas(rs) == replicasOf(d) && desired == replicasOf(d) && rs.Status.AvailableReplicas == replicasOf(d)
}

// scale resizes the ReplicaSets to the Deployment's replicas: the only
// active one directly, otherwise proportionally to their sizes.
func (c *Controller) scale(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) error {
	if rs := activeOrLatest(newRS, old); rs != nil {
		if rsReplicas(rs) == replicasOf(d) {
			return nil
		}
		_, _, err := c.scaleAndRecord(ctx, rs, replicasOf(d), d)
		return err
	}
	if isSaturated(d, newRS) {
		for _, rs := range activeReplicaSets(old) {
			if _, _, err := c.scaleAndRecord(ctx, rs, 0, d); err != nil {
				return err
			}
		}
		return nil
	}
	if !isRollingUpdate(d) {
		return nil
	}
	all := activeReplicaSets(append(append([]*appsv1.ReplicaSet(nil), old...), newRS))
	allowed := int32(0)
	if replicasOf(d) > 0 {
		allowed = replicasOf(d) + maxSurge(d)
	}
	toAdd := allowed - sumSpec(all)
	op := ""
	switch {
	case toAdd > 0:
		sortBySize(all, true)
		op = "up"
	case toAdd < 0:
		sortBySize(all, false)
		op = "down"
	}
	sizes := map[string]int32{}
	added := int32(0)
	for _, rs := range all {
		if toAdd != 0 {
			p := proportion(rs, d, toAdd, added)
			sizes[rs.Name] = rsReplicas(rs) + p
			added += p
		} else {
			sizes[rs.Name] = rsReplicas(rs)
		}
	}
	if toAdd != 0 && len(all) > 0 {
		sizes[all[0].Name] += toAdd - added
		if sizes[all[0].Name] < 0 {
			sizes[all[0].Name] = 0
		}
	}
	for _, rs := range all {
		if _, _, err := c.scaleReplicaSet(ctx, rs, sizes[rs.Name], d, op); err != nil {
			return err
		}
	}
	return nil
}

// proportion is rs's share of toAdd, bounded by what is left to add.
func proportion(rs *appsv1.ReplicaSet, d *appsv1.Deployment, toAdd, added int32) int32 {
	if rs == nil || rsReplicas(rs) == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	fraction := fraction(rs, d)
	left := toAdd - added
	if toAdd > 0 {
		return min(fraction, left)
	}
	return max(fraction, left)
}

func fraction(rs *appsv1.ReplicaSet, d *appsv1.Deployment) int32 {
	if replicasOf(d) == 0 {
		return -rsReplicas(rs)
	}
	target := replicasOf(d) + maxSurge(d)
	annotated, ok := intAnnotation(rs, MaxReplicasAnnotation)
	if !ok || annotated == 0 {
		annotated = d.Status.Replicas
	}
	if annotated == 0 {
		return 0
	}
	size := float64(rsReplicas(rs)*target) / float64(annotated)
	return int32(math.Round(size)) - rsReplicas(rs)
}

func (c *Controller) scaleAndRecord(ctx context.Context, rs *appsv1.ReplicaSet, size int32, d *appsv1.Deployment) (bool, *appsv1.ReplicaSet, error) {
	if rsReplicas(rs) == size {
		return false, rs, nil
	}
	op := "down"
	if rsReplicas(rs) < size {
		op = "up"
	}
	return c.scaleReplicaSet(ctx, rs, size, d, op)
}

// scaleReplicaSet sets rs's size and its desired/max annotations, and
// records ScalingReplicaSet when the size changed.
func (c *Controller) scaleReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet, size int32, d *appsv1.Deployment, op string) (bool, *appsv1.ReplicaSet, error) {
	sizeChanged := rsReplicas(rs) != size
	annotationsChanged := replicasAnnotationsNeedUpdate(rs, replicasOf(d), replicasOf(d)+maxSurge(d))
	if !sizeChanged && !annotationsChanged {
		return false, rs, nil
	}
	from := rsReplicas(rs)
	cp := rs.DeepCopy()
	cp.Spec.Replicas = &size
	setReplicasAnnotations(cp, replicasOf(d), replicasOf(d)+maxSurge(d))
	updated, err := c.client.AppsV1().ReplicaSets(cp.Namespace).Update(ctx, cp, metav1.UpdateOptions{})
	if err != nil {
		return false, rs, fmt.Errorf("scale replica set %s: %w", rs.Name, err)
	}
	*rs = *updated // a copy the sync made (Sync), not the informer's
	if sizeChanged {
		c.recorder.Eventf(d, corev1.EventTypeNormal, ReasonScalingReplicaSet, "Scaled %s replica set %s from %d to %d", op, rs.Name, from, size)
	}
	return sizeChanged, updated, nil
}

// --- rolling update

func (c *Controller) rolloutRolling(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, old, err := c.allReplicaSets(ctx, d, rsList, true)
	if err != nil {
		return err
	}
	all := append(append([]*appsv1.ReplicaSet(nil), old...), newRS)

	scaledUp, err := c.reconcileNewReplicaSet(ctx, all, newRS, d)
	if err != nil {
		return err
	}
	if scaledUp {
		return c.syncRolloutStatus(ctx, all, newRS, d)
	}
	scaledDown, err := c.reconcileOldReplicaSets(ctx, all, activeReplicaSets(old), newRS, d)
	if err != nil {
		return err
	}
	if scaledDown {
		return c.syncRolloutStatus(ctx, all, newRS, d)
	}
	if deploymentComplete(d, &d.Status) {
		if err := c.cleanup(ctx, d, old); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, all, newRS, d)
}

func (c *Controller) reconcileNewReplicaSet(ctx context.Context, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) (bool, error) {
	if rsReplicas(newRS) == replicasOf(d) {
		return false, nil
	}
	if rsReplicas(newRS) > replicasOf(d) {
		scaled, _, err := c.scaleAndRecord(ctx, newRS, replicasOf(d), d)
		return scaled, err
	}
	scaled, _, err := c.scaleAndRecord(ctx, newRS, newRSNewReplicas(d, all, newRS), d)
	return scaled, err
}

func (c *Controller) reconcileOldReplicaSets(ctx context.Context, all, old []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) (bool, error) {
	if sumSpec(old) == 0 {
		return false, nil
	}
	minAvailable := replicasOf(d) - maxUnavailable(d)
	newUnavailable := rsReplicas(newRS) - newRS.Status.AvailableReplicas
	maxScaledDown := sumSpec(all) - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return false, nil
	}
	cleaned, err := c.cleanupUnhealthyReplicas(ctx, old, d, maxScaledDown)
	if err != nil {
		return false, err
	}
	all = append(append([]*appsv1.ReplicaSet(nil), old...), newRS)
	scaled, err := c.scaleDownOldForRollingUpdate(ctx, all, old, d)
	if err != nil {
		return false, err
	}
	return cleaned+scaled > 0, nil
}

// cleanupUnhealthyReplicas scales old ReplicaSets down by their unavailable
// pods first, at most max in all.
func (c *Controller) cleanupUnhealthyReplicas(ctx context.Context, old []*appsv1.ReplicaSet, d *appsv1.Deployment, max int32) (int32, error) {
	sort.Sort(byCreation(old))
	total := int32(0)
	for _, rs := range old {
		if total >= max {
			break
		}
		if rsReplicas(rs) == 0 || rsReplicas(rs) == rs.Status.AvailableReplicas {
			continue
		}
		down := min(max-total, rsReplicas(rs)-rs.Status.AvailableReplicas)
		if _, _, err := c.scaleAndRecord(ctx, rs, rsReplicas(rs)-down, d); err != nil {
			return total, err
		}
		total += down
	}
	return total, nil
}

// scaleDownOldForRollingUpdate scales old ReplicaSets down, oldest first,
// as far as availability above replicas-maxUnavailable allows.
func (c *Controller) scaleDownOldForRollingUpdate(ctx context.Context, all, old []*appsv1.ReplicaSet, d *appsv1.Deployment) (int32, error) {
	minAvailable := replicasOf(d) - maxUnavailable(d)
	available := sumStatus(all, statusAvailable)
	if available <= minAvailable {
		return 0, nil
	}
	sort.Sort(byCreation(old))
	budget := available - minAvailable
	total := int32(0)
	for _, rs := range old {
		if total >= budget {
			break
		}
		if rsReplicas(rs) == 0 {
			continue
		}
		down := min(rsReplicas(rs), budget-total)
		if _, _, err := c.scaleAndRecord(ctx, rs, rsReplicas(rs)-down, d); err != nil {
			return total, err
		}
		total += down
	}
	return total, nil
}

// --- recreate

func (c *Controller) rolloutRecreate(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, old, err := c.allReplicaSets(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	all := append(append([]*appsv1.ReplicaSet(nil), old...), newRS)

	scaledDown := false
	for _, rs := range activeReplicaSets(old) {
		scaled, _, err := c.scaleAndRecord(ctx, rs, 0, d)
		if err != nil {
			return err
		}
		scaledDown = scaledDown || scaled
	}
	if scaledDown {
		return c.syncRolloutStatus(ctx, all, newRS, d)
	}
	podMap, err := c.podsByReplicaSet(d, rsList)
	if err != nil {
		return err
	}
	if oldPodsRunning(newRS, old, podMap) {
		return c.syncRolloutStatus(ctx, all, newRS, d)
	}
	if newRS == nil {
		newRS, old, err = c.allReplicaSets(ctx, d, rsList, true)
		if err != nil {
			return err
		}
		all = append(append([]*appsv1.ReplicaSet(nil), old...), newRS)
	}
	if _, _, err := c.scaleAndRecord(ctx, newRS, replicasOf(d), d); err != nil {
		return err
	}
	if deploymentComplete(d, &d.Status) {
		if err := c.cleanup(ctx, d, old); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, all, newRS, d)
}

// oldPodsRunning: an old ReplicaSet still reports pods, or one of its pods
// is not terminal yet.
func oldPodsRunning(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet, podMap map[types.UID][]*corev1.Pod) bool {
	if sumStatus(old, statusReplicas) > 0 {
		return true
	}
	for uid, pods := range podMap {
		if newRS != nil && newRS.UID == uid {
			continue
		}
		for _, p := range pods {
			if p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
				return true
			}
		}
	}
	return false
}

// --- history

// cleanup deletes the oldest scaled-down ReplicaSets beyond
// revisionHistoryLimit.
func (c *Controller) cleanup(ctx context.Context, d *appsv1.Deployment, old []*appsv1.ReplicaSet) error {
	if d.Spec.RevisionHistoryLimit == nil {
		return nil
	}
	var cleanable []*appsv1.ReplicaSet
	for _, rs := range old {
		if rs != nil && rs.DeletionTimestamp == nil {
			cleanable = append(cleanable, rs)
		}
	}
	diff := len(cleanable) - int(*d.Spec.RevisionHistoryLimit)
	if diff <= 0 {
		return nil
	}
	sort.Sort(byRevision(cleanable))
	for _, rs := range cleanable[:diff] {
		if rs.Status.Replicas != 0 || rsReplicas(rs) != 0 || rs.Generation > rs.Status.ObservedGeneration {
			continue
		}
		err := c.client.AppsV1().ReplicaSets(rs.Namespace).Delete(ctx, rs.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &rs.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete old replica set %s: %w", rs.Name, err)
		}
	}
	return nil
}

// --- status

func (c *Controller) calculateStatus(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) appsv1.DeploymentStatus {
	available := sumStatus(all, statusAvailable)
	unavailable := max(sumSpec(all)-available, 0)
	s := appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            sumStatus(all, statusReplicas),
		UpdatedReplicas:     sumStatus([]*appsv1.ReplicaSet{newRS}, statusReplicas),
		ReadyReplicas:       sumStatus(all, statusReady),
		AvailableReplicas:   available,
		UnavailableReplicas: unavailable,
		CollisionCount:      d.Status.CollisionCount,
	}
	s.Conditions = append(s.Conditions, d.Status.Conditions...)
	now := c.clock.Now()
	if available >= replicasOf(d)-maxUnavailable(d) {
		setCondition(&s, newCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue, ReasonMinimumReplicasAvail, "Deployment has minimum availability.", now))
	} else {
		setCondition(&s, newCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse, ReasonMinimumReplicasUnavail, "Deployment does not have minimum availability.", now))
	}
	return s
}

func (c *Controller) syncStatus(ctx context.Context, d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) error {
	s := c.calculateStatus(all, newRS, d)
	if reflect.DeepEqual(d.Status, s) {
		return nil
	}
	d.Status = s
	_, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	return err
}

// syncRolloutStatus writes status with the Progressing condition, and
// re-checks a rollout that may pass its progress deadline.
func (c *Controller) syncRolloutStatus(ctx context.Context, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) error {
	s := c.calculateStatus(all, newRS, d)
	now := c.clock.Now()
	if !hasProgressDeadline(d) {
		removeCondition(&s, appsv1.DeploymentProgressing)
	}
	cur := getCondition(d.Status, appsv1.DeploymentProgressing)
	complete := s.Replicas == s.UpdatedReplicas && cur != nil && cur.Reason == ReasonNewRSAvailable
	if hasProgressDeadline(d) && !complete {
		switch {
		case deploymentComplete(d, &s):
			msg := fmt.Sprintf("Deployment %q has successfully progressed.", d.Name)
			if newRS != nil {
				msg = fmt.Sprintf("ReplicaSet %q has successfully progressed.", newRS.Name)
			}
			setCondition(&s, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonNewRSAvailable, msg, now))
		case deploymentProgressing(d, &s):
			msg := fmt.Sprintf("Deployment %q is progressing.", d.Name)
			if newRS != nil {
				msg = fmt.Sprintf("ReplicaSet %q is progressing.", newRS.Name)
			}
			cond := newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonReplicaSetUpdated, msg, now)
			// Progress refreshes lastUpdateTime even if the reason is the same.
			if cur != nil {
				if cur.Status == corev1.ConditionTrue {
					cond.LastTransitionTime = cur.LastTransitionTime
				}
				removeCondition(&s, appsv1.DeploymentProgressing)
			}
			setCondition(&s, cond)
		case deploymentTimedOut(d, &s, now):
			msg := fmt.Sprintf("Deployment %q has timed out progressing.", d.Name)
			if newRS != nil {
				msg = fmt.Sprintf("ReplicaSet %q has timed out progressing.", newRS.Name)
			}
			setCondition(&s, newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, ReasonTimedOut, msg, now))
		}
	}
	if failure := replicaFailure(all, newRS); failure != nil {
		setCondition(&s, *failure)
	} else {
		removeCondition(&s, appsv1.DeploymentReplicaFailure)
	}
	if reflect.DeepEqual(d.Status, s) {
		c.requeueStuck(d, s)
		return nil
	}
	d.Status = s
	_, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	return err
}

// replicaFailure carries a ReplicaSet's ReplicaFailure condition (the new
// one's first) to the Deployment.
func replicaFailure(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) *appsv1.DeploymentCondition {
	order := append([]*appsv1.ReplicaSet{newRS}, all...)
	for _, rs := range order {
		if rs == nil {
			continue
		}
		for _, c := range rs.Status.Conditions {
			if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue {
				return &appsv1.DeploymentCondition{
					Type: appsv1.DeploymentReplicaFailure, Status: c.Status, Reason: c.Reason, Message: c.Message,
					LastUpdateTime: c.LastTransitionTime, LastTransitionTime: c.LastTransitionTime,
				}
			}
		}
	}
	return nil
}

// requeueStuck re-checks a progressing Deployment at its deadline.
func (c *Controller) requeueStuck(d *appsv1.Deployment, s appsv1.DeploymentStatus) {
	cur := getCondition(s, appsv1.DeploymentProgressing)
	if !hasProgressDeadline(d) || cur == nil || deploymentComplete(d, &s) || cur.Reason == ReasonTimedOut {
		return
	}
	key := d.Namespace + "/" + d.Name
	after := cur.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Sub(c.clock.Now())
	if after < time.Second {
		c.queue.AddRateLimited(key)
		return
	}
	c.queue.AddAfter(key, after)
}
