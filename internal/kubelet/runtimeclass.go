package kubelet

import (
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// runtimeHandler is the CRI runtime handler of a pod's RuntimeClass, as
// upstream's RuntimeClass manager resolves it: "" (the runtime's default)
// without a runtimeClassName, else the RuntimeClass's handler from the
// kubelet's informer. A RuntimeClass that does not exist is the lister's
// NotFound error (`runtimeclass.node.k8s.io "x" not found`), which fails
// the sandbox with a FailedCreatePodSandBox event; a handler the runtime
// does not have fails in RunPodSandbox the same way (containerd: "no
// runtime for "x" is configured").
func (k *Kubelet) runtimeHandler(pod *corev1.Pod) (string, error) {
	name := pod.Spec.RuntimeClassName
	if name == nil || *name == "" {
		return "", nil
	}
	if k.runtimeClasses == nil {
		return "", apierrors.NewNotFound(nodev1.Resource("runtimeclass"), *name)
	}
	rc, err := k.runtimeClasses.Get(*name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return "", err
		}
		return "", fmt.Errorf("failed to lookup RuntimeClass %s: %v", *name, err)
	}
	return rc.Handler, nil
}

// setRuntimeHandlers records the handlers the runtime reports in its
// status (containerd: "" for the default, then each configured runtime),
// for the node's status.runtimeHandlers.
func (k *Kubelet) setRuntimeHandlers(hs []*runtimeapi.RuntimeHandler) {
	out := make([]corev1.NodeRuntimeHandler, 0, len(hs))
	for _, h := range hs {
		rro := h.GetFeatures().GetRecursiveReadOnlyMounts()
		userns := h.GetFeatures().GetUserNamespaces()
		out = append(out, corev1.NodeRuntimeHandler{
			Name:     h.GetName(),
			Features: &corev1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: &rro, UserNamespaces: &userns},
		})
	}
	k.mu.Lock()
	k.handlers = out
	k.mu.Unlock()
}

// nodeRuntimeHandlers is status.runtimeHandlers, as upstream's setter
// fills it from the runtime's status; nil until the runtime reported any.
func (k *Kubelet) nodeRuntimeHandlers() []corev1.NodeRuntimeHandler {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.handlers
}
