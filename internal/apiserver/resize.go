package apiserver

import (
	"context"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	podregistry "github.com/skiff-sh/skiff/internal/apiserver/registry/core/pod"
)

// serveResize serves pods/resize as upstream: get returns the Pod; update
// and patch (`kubectl patch --subresource resize`, client-go's
// UpdateResize) take only the containers' resources and resizePolicy and
// the pod-level resources, checked by the resize rules (the pod strategy
// under WithResizeUpdate), then admission (LimitRanger, ResourceQuota and
// PodResizeValidator look at resizes), and answer with the Pod. The node
// agent carries the resize out and reports it in the pod's status.
func serveResize(ctx context.Context, h *resourceHandler, w http.ResponseWriter, r *http.Request, info RequestInfo, out output) {
	servePodSpecPart(ctx, h, w, r, info, out, func(want, _ *corev1.Pod) (*corev1.Pod, field.ErrorList) {
		return want, nil // the strategy keeps the resize part
	}, podregistry.WithResizeUpdate)
}
