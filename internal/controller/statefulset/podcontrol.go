package statefulset

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// Event reasons, as upstream: Successful/Failed + Create, Update, Delete
// for pods and claims, and ConflictingController.
const (
	ReasonSuccessfulCreate      = "SuccessfulCreate"
	ReasonFailedCreate          = "FailedCreate"
	ReasonSuccessfulUpdate      = "SuccessfulUpdate"
	ReasonFailedUpdate          = "FailedUpdate"
	ReasonSuccessfulDelete      = "SuccessfulDelete"
	ReasonFailedDelete          = "FailedDelete"
	ReasonConflictingController = "ConflictingController"
)

// verbs title-case the verb in reasons and messages ("SuccessfulCreate").
var verbs = map[string]string{"create": "Create", "update": "Update", "delete": "Delete"}

func (c *Controller) podEvent(verb string, set *appsv1.StatefulSet, pod *corev1.Pod, err error) {
	v := verbs[verb]
	if err == nil {
		c.recorder.Eventf(set, corev1.EventTypeNormal, "Successful"+v, "%s Pod %s in StatefulSet %s successful", v, pod.Name, set.Name)
		return
	}
	c.recorder.Eventf(set, corev1.EventTypeWarning, "Failed"+v, "%s Pod %s in StatefulSet %s failed error: %s", v, pod.Name, set.Name, err)
}

func (c *Controller) claimEvent(set *appsv1.StatefulSet, pod *corev1.Pod, claim *corev1.PersistentVolumeClaim, err error) {
	if err == nil {
		c.recorder.Eventf(set, corev1.EventTypeNormal, ReasonSuccessfulCreate, "Create Claim %s Pod %s in StatefulSet %s success", claim.Name, pod.Name, set.Name)
		return
	}
	c.recorder.Eventf(set, corev1.EventTypeWarning, ReasonFailedCreate, "Create Claim %s for Pod %s in StatefulSet %s failed error: %s", claim.Name, pod.Name, set.Name, err)
}

// createPod creates the pod's claims, then the pod, then sets the claims'
// owners for the retention policy.
func (c *Controller) createPod(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	if err := c.createClaims(ctx, set, pod); err != nil {
		c.podEvent("create", set, pod, err)
		return err
	}
	created, err := c.client.CoreV1().Pods(set.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return err
	}
	if err == nil {
		pod = created
		if err := c.fixClaimOwners(ctx, set, pod); err != nil {
			c.podEvent("update", set, pod, err)
			return err
		}
	}
	c.podEvent("create", set, pod, err)
	if err != nil {
		return fmt.Errorf("create pod %s: %w", pod.Name, err)
	}
	return nil
}

// createClaims creates the pod's missing claims; a claim being deleted is
// an error (the pod waits for it to go).
func (c *Controller) createClaims(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	var errs []error
	for _, claim := range claimsFor(set, pod) {
		existing, err := c.pvcLister.PersistentVolumeClaims(claim.Namespace).Get(claim.Name)
		switch {
		case apierrors.IsNotFound(err):
			_, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Create(ctx, &claim, metav1.CreateOptions{})
			if err != nil {
				errs = append(errs, fmt.Errorf("failed to create PVC %s: %w", claim.Name, err))
			}
			if err == nil || !apierrors.IsAlreadyExists(err) {
				c.claimEvent(set, pod, &claim, err)
			}
		case err != nil:
			errs = append(errs, fmt.Errorf("failed to retrieve PVC %s: %w", claim.Name, err))
			c.claimEvent(set, pod, &claim, err)
		case existing.DeletionTimestamp != nil:
			errs = append(errs, fmt.Errorf("pvc %s is being deleted", claim.Name))
		}
	}
	return errors.Join(errs...)
}

// repairPod restores a pod's identity, storage and claim owners.
func (c *Controller) repairPod(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	attempted := false
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		consistent := true
		if !identityMatches(set, pod) {
			updateIdentity(set, pod)
			consistent = false
		}
		if !storageMatches(set, pod) {
			updateStorage(set, pod)
			consistent = false
			if err := c.createClaims(ctx, set, pod); err != nil {
				c.podEvent("update", set, pod, err)
				return err
			}
		}
		if match, err := c.claimsMatchPolicy(set, pod); err != nil {
			c.podEvent("update", set, pod, err)
			return err
		} else if !match {
			if err := c.fixClaimOwners(ctx, set, pod); err != nil {
				c.podEvent("update", set, pod, err)
				return err
			}
			consistent = false
		}
		if consistent {
			return nil
		}
		attempted = true
		_, err := c.client.CoreV1().Pods(pod.Namespace).Update(ctx, pod, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if fresh, getErr := c.podLister.Pods(set.Namespace).Get(pod.Name); getErr == nil {
			pod = fresh.DeepCopy()
		}
		return err
	})
	if attempted {
		c.podEvent("update", set, pod, err)
	}
	return err
}

// deletePod deletes the pod it saw (a UID precondition, so a stale cache
// never deletes a pod created since).
func (c *Controller) deletePod(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	opts := metav1.DeleteOptions{}
	if pod.UID != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &pod.UID}
	}
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		c.podEvent("delete", set, pod, err)
		return fmt.Errorf("delete pod %s: %w", pod.Name, err)
	}
	c.podEvent("delete", set, pod, nil)
	return nil
}

// claimsMatchPolicy says whether every existing claim of the pod has the
// owners the retention policy wants.
func (c *Controller) claimsMatchPolicy(set *appsv1.StatefulSet, pod *corev1.Pod) (bool, error) {
	for _, want := range claimsFor(set, pod) {
		claim, err := c.pvcLister.PersistentVolumeClaims(set.Namespace).Get(want.Name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return false, fmt.Errorf("get claim %s for %s: %w", want.Name, pod.Name, err)
		case !claimOwnerUpToDate(claim, set, pod):
			return false, nil
		}
	}
	return true, nil
}

// fixClaimOwners rewrites the owners of the pod's claims for the policy.
func (c *Controller) fixClaimOwners(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod) error {
	for _, want := range claimsFor(set, pod) {
		claim, err := c.pvcLister.PersistentVolumeClaims(set.Namespace).Get(want.Name)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("get claim %s for %s: %w", want.Name, pod.Name, err)
		}
		if hasUnexpectedController(claim, set, pod) {
			c.recorder.Eventf(set, corev1.EventTypeWarning, ReasonConflictingController,
				"PersistentVolumeClaim %s has a conflicting OwnerReference that acts as a manging controller, the retention policy is ignored for this claim", claim.Name)
		}
		if claimOwnerUpToDate(claim, set, pod) {
			continue
		}
		claim = claim.DeepCopy()
		setClaimOwners(claim, set, pod)
		if _, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("could not update claim %s for delete policy ownerRefs: %w", claim.Name, err)
		}
	}
	return nil
}

// claimIsStale: with whenScaled=Delete, a claim still owned by an earlier
// pod of this name is about to be collected; the pod waits for it.
func (c *Controller) claimIsStale(set *appsv1.StatefulSet, pod *corev1.Pod) (bool, error) {
	if retentionPolicy(set).WhenScaled == retain {
		return false, nil
	}
	for _, want := range claimsFor(set, pod) {
		claim, err := c.pvcLister.PersistentVolumeClaims(want.Namespace).Get(want.Name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return false, err
		case hasStaleOwnerRef(claim, pod, podKind):
			return true, nil
		}
	}
	return false, nil
}
