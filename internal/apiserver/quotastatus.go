package apiserver

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/apiserver/admission"
	"github.com/skiff-sh/skiff/internal/storage"
)

var _ admission.QuotaStatusWriter = reader{}

// UpdateQuotaStatus writes the status of q if q's resourceVersion is
// still the stored one (409 otherwise): the ResourceQuota admission
// plugin's charge.
func (r reader) UpdateQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) error {
	h, err := r.handler(corev1.SchemeGroupVersion.WithResource("resourcequotas"))
	if err != nil {
		return err
	}
	rv := q.ResourceVersion
	out := &corev1.ResourceQuota{}
	err = h.store.GuaranteedUpdate(ctx, h.key(q.Namespace, q.Name), out, &storage.Preconditions{ResourceVersion: &rv},
		func(cur runtime.Object) (runtime.Object, error) {
			next, ok := cur.(*corev1.ResourceQuota)
			if !ok {
				return nil, apierrors.NewInternalError(fmt.Errorf("resourcequota: unexpected type %T", cur))
			}
			next = next.DeepCopy()
			next.Status = *q.Status.DeepCopy()
			return next, nil
		})
	if err != nil {
		return h.apiErr(err, q.Name)
	}
	*q = *out
	return nil
}
