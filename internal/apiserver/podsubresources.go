package apiserver

import (
	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// servePodStream answers the streaming pod subresources. They are proxied
// to the kubelet of the pod's node; until node agents exist, a scheduled
// pod gets a clear 503 and an unscheduled one upstream's 400.
func servePodStream(ctx context.Context, h *resourceHandler, w http.ResponseWriter, r *http.Request, info RequestInfo, out output) {
	allowed := map[string][]string{"log": {"get"}, "exec": {"get", "create"}, "attach": {"get", "create"}, "portforward": {"get", "create"}}
	ok := false
	for _, v := range allowed[info.Subresource] {
		if v == info.Verb {
			ok = true
		}
	}
	if !ok {
		h.codecs.writeError(w, methodNotSupported(h.gr, info.Verb))
		return
	}
	obj, err := h.get(ctx, r, RequestInfo{Namespace: info.Namespace, Name: info.Name})
	if err != nil {
		h.codecs.writeError(w, err)
		return
	}
	pod := obj.(*corev1.Pod)
	if pod.Spec.NodeName == "" {
		h.codecs.writeError(w, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name)))
		return
	}
	se := apierrors.NewServiceUnavailable(fmt.Sprintf("cannot reach the node agent of node %q for pods/%s: this cluster has no kubelet connection yet", pod.Spec.NodeName, info.Subresource))
	h.codecs.writeError(w, se)
}
