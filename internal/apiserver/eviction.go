package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/apiserver/admission"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/policy"
	"github.com/skiff-sh/skiff/internal/storage"
)

// servePodEviction serves POST pods/{name}/eviction: the pod is deleted
// only if no PodDisruptionBudget forbids it (429 otherwise), and the budget
// that allowed it records the disruption first. As upstream's, the pod's
// status gets the DisruptionTarget condition (EvictionByEvictionAPI) just
// before the delete, so that a Job's podFailurePolicy can tell an eviction
// from a failure.
func servePodEviction(ctx context.Context, h *resourceHandler, w http.ResponseWriter, r *http.Request, info RequestInfo, out output) {
	if info.Verb != "create" {
		h.codecs.writeError(w, methodNotSupported(h.gr, info.Verb))
		return
	}
	body, err := readBody(r)
	if err != nil {
		h.codecs.writeError(w, err)
		return
	}
	ev := &policyv1.Eviction{}
	if _, err := h.codecs.decodeBody(r, body, ev, policyv1.SchemeGroupVersion.WithKind("Eviction")); err != nil {
		h.codecs.writeError(w, err)
		return
	}
	dry, err := dryRun(r)
	if err != nil {
		h.codecs.writeError(w, err)
		return
	}
	if err := objectNamespace(ev, info.Namespace); err != nil {
		h.codecs.writeError(w, err)
		return
	}
	// Admission sees the Eviction (CREATE of pods/eviction; a dry run when
	// the query says so), mutating first; the validating phase runs once
	// the request is checked, before any budget or the pod is touched, as
	// upstream's EvictionREST. The pod's delete then runs no admission.
	a := h.subresourceAdmission(ctx, admission.Create, ev, info, dry)
	if err := h.runAdmission(ctx, a, h.srv.admission.Admit); err != nil {
		h.codecs.writeError(w, err)
		return
	}
	if ev.Name != "" && ev.Name != info.Name {
		h.codecs.writeError(w, apierrors.NewBadRequest(fmt.Sprintf("name in URL does not match name in Eviction object")))
		return
	}
	opts := ev.DeleteOptions
	if opts == nil {
		opts = &metav1.DeleteOptions{}
	}
	if vals := r.URL.Query()["dryRun"]; len(vals) > 0 {
		if len(opts.DryRun) > 0 && !slices.Equal(opts.DryRun, vals) {
			h.codecs.writeError(w, apierrors.NewInternalError(fmt.Errorf("Non-matching dry-run options in request and content: %v and %v", vals, opts.DryRun)))
			return
		}
		opts.DryRun = vals
	}
	if err := h.runAdmission(ctx, a, h.srv.admission.Validate); err != nil {
		h.codecs.writeError(w, err)
		return
	}
	pdbs := h.srv.handlers[policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")]
	for attempt := 0; ; attempt++ {
		obj, err := h.get(ctx, r, RequestInfo{Namespace: info.Namespace, Name: info.Name})
		if err != nil {
			h.codecs.writeError(w, err)
			return
		}
		pod := obj.(*corev1.Pod)
		var budgets []policyv1.PodDisruptionBudget
		if pdbs != nil {
			list := &policyv1.PodDisruptionBudgetList{}
			if err := pdbs.store.List(ctx, pdbs.listPrefix(info.Namespace), storage.ListOptions{}, list); err != nil {
				h.codecs.writeError(w, apierrors.NewInternalError(err))
				return
			}
			budgets = list.Items
		}
		allowed, pdb, err := policy.CheckEviction(pod, budgets, time.Now())
		if err != nil {
			h.codecs.writeError(w, err)
			return
		}
		if !allowed {
			h.codecs.writeError(w, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10))
			return
		}
		if pdb != nil && len(opts.DryRun) == 0 {
			rv := pdb.ResourceVersion
			out := &policyv1.PodDisruptionBudget{}
			err := pdbs.store.GuaranteedUpdate(ctx, pdbs.key(pdb.Namespace, pdb.Name), out, &storage.Preconditions{ResourceVersion: &rv},
				func(runtime.Object) (runtime.Object, error) { return pdb, nil })
			if storage.IsConflict(err) && attempt < 5 {
				continue
			}
			if err != nil {
				h.codecs.writeError(w, pdbs.apiErr(err, pdb.Name))
				return
			}
		}
		if opts.Preconditions == nil {
			uid := pod.UID
			opts.Preconditions = &metav1.Preconditions{UID: &uid}
		}
		if len(opts.DryRun) == 0 {
			rv, err := h.markDisruptionTarget(ctx, info.Namespace, info.Name, opts.Preconditions)
			if err != nil {
				h.codecs.writeError(w, err)
				return
			}
			if opts.Preconditions.ResourceVersion != nil {
				// Our own write moved the pod on: the delete expects it.
				opts.Preconditions.ResourceVersion = &rv
			}
		}
		if _, _, err := h.deleteWithoutAdmission(ctx, info.Namespace, info.Name, opts); err != nil {
			h.codecs.writeError(w, err)
			return
		}
		h.codecs.writeObject(w, http.StatusCreated, output{mediaType: out.mediaType}, &metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusSuccess, Code: http.StatusCreated,
		})
		return
	}
}

// markDisruptionTarget adds the eviction's DisruptionTarget condition to
// the latest pod's status (a status write: nothing else changes), after
// checking the delete's preconditions against that pod as upstream's
// eviction does; it returns the pod's new resourceVersion. A condition
// already there with the same status keeps its transition time.
func (h *resourceHandler) markDisruptionTarget(ctx context.Context, ns, name string, pre *metav1.Preconditions) (string, error) {
	var sp *storage.Preconditions
	if pre != nil {
		sp = &storage.Preconditions{UID: pre.UID, ResourceVersion: pre.ResourceVersion}
		if sp.UID != nil && *sp.UID == "" {
			sp.UID = nil
		}
		if sp.ResourceVersion != nil && *sp.ResourceVersion == "" {
			sp.ResourceVersion = nil
		}
	}
	out := &corev1.Pod{}
	err := h.store.GuaranteedUpdate(ctx, h.key(ns, name), out, sp, func(cur runtime.Object) (runtime.Object, error) {
		pod := cur.(*corev1.Pod).DeepCopy()
		cond := policy.DisruptionTargetCondition(h.srv.clock.Now())
		i := slices.IndexFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.DisruptionTarget })
		if i < 0 {
			pod.Status.Conditions = append(pod.Status.Conditions, cond)
			return pod, nil
		}
		if pod.Status.Conditions[i].Status == cond.Status {
			cond.LastTransitionTime = pod.Status.Conditions[i].LastTransitionTime
		}
		cond.ObservedGeneration = pod.Status.Conditions[i].ObservedGeneration
		pod.Status.Conditions[i] = cond
		return pod, nil
	})
	if err != nil {
		return "", h.apiErr(err, name)
	}
	return out.ResourceVersion, nil
}
