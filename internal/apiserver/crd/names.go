package crd

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/apiextensions"
)

// Status computes a CRD's status as upstream's naming, establishing and
// finalizer controllers leave it: the names it may use (acceptedNames:
// those no other CRD of its group already holds), NamesAccepted,
// Established (once names are accepted; it stays true), and Terminating
// while it is being deleted. others are the group's other CRDs. It changes
// nothing; it returns the new status.
func Status(crd *apiextensionsv1.CustomResourceDefinition, others []*apiextensionsv1.CustomResourceDefinition, now metav1.Time) apiextensionsv1.CustomResourceDefinitionStatus {
	out := crd.DeepCopy()
	cond := func(t apiextensionsv1.CustomResourceDefinitionConditionType, st apiextensionsv1.ConditionStatus, reason, msg string) {
		apiextensions.SetCondition(out, apiextensionsv1.CustomResourceDefinitionCondition{
			Type: t, Status: st, Reason: reason, Message: msg, LastTransitionTime: now})
	}
	if msg := nameConflict(crd, others); msg != "" {
		cond(apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionFalse, "NameConflict", msg)
	} else {
		out.Status.AcceptedNames = crd.Spec.Names
		cond(apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionTrue, "NoConflicts", "no conflicts found")
	}
	est := apiextensions.Condition(out, apiextensionsv1.Established)
	accepted := apiextensions.Condition(out, apiextensionsv1.NamesAccepted).Status == apiextensionsv1.ConditionTrue
	switch {
	case est != nil && est.Status == apiextensionsv1.ConditionTrue:
	case accepted && out.Status.AcceptedNames.Plural != "":
		cond(apiextensionsv1.Established, apiextensionsv1.ConditionTrue, "InitialNamesAccepted", "the initial names have been accepted")
	default:
		cond(apiextensionsv1.Established, apiextensionsv1.ConditionFalse, "NotAccepted", "not all names are accepted")
	}
	if crd.DeletionTimestamp != nil {
		if c := apiextensions.Condition(out, apiextensionsv1.Terminating); c == nil || c.Status != apiextensionsv1.ConditionTrue {
			cond(apiextensionsv1.Terminating, apiextensionsv1.ConditionTrue, "InstanceDeletionInProgress", "CustomResource deletion is in progress")
		}
	}
	return out.Status
}

// nameConflict says which requested name another CRD of the group already
// uses, as upstream's naming controller words it; "" when none.
func nameConflict(crd *apiextensionsv1.CustomResourceDefinition, others []*apiextensionsv1.CustomResourceDefinition) string {
	resources := map[string]bool{}
	kinds := map[string]bool{}
	for _, o := range others {
		if o.Name == crd.Name || o.Spec.Group != crd.Spec.Group {
			continue
		}
		n := o.Status.AcceptedNames
		for _, s := range append([]string{n.Plural, n.Singular}, n.ShortNames...) {
			if s != "" {
				resources[s] = true
			}
		}
		for _, k := range []string{n.Kind, n.ListKind} {
			if k != "" {
				kinds[k] = true
			}
		}
	}
	req := crd.Spec.Names
	switch {
	case resources[req.Plural]:
		return fmt.Sprintf("%q is already in use", req.Plural)
	case resources[req.Singular]:
		return fmt.Sprintf("%q is already in use", req.Singular)
	case kinds[req.Kind]:
		return fmt.Sprintf("%q is already in use", req.Kind)
	case kinds[req.ListKind]:
		return fmt.Sprintf("%q is already in use", req.ListKind)
	}
	for _, s := range req.ShortNames {
		if resources[s] {
			return fmt.Sprintf("%q is already in use", s)
		}
	}
	return ""
}
