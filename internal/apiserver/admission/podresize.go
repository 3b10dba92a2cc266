package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Causes of a refused resize, as upstream's PodResizeValidator reports
// them in the Status details.
const (
	CauseNodeCapacity        metav1.CauseType = "NodeCapacity"
	CauseUnsupportedPlatform metav1.CauseType = "UnsupportedPlatform"
)

// PodResizeValidator refuses a pods/resize of a bound pod whose new
// requests exceed its node's allocatable, or whose node is not Linux
// (403, with the cause NodeCapacity or UnsupportedPlatform), as upstream's
// plugin of that name: such a resize could never be carried out.
type PodResizeValidator struct{ r registry.Reader }

var _ Validator = PodResizeValidator{}

// NewPodResizeValidator reads Nodes through r.
func NewPodResizeValidator(r registry.Reader) PodResizeValidator {
	return PodResizeValidator{r: r}
}

// Name is the upstream name.
func (PodResizeValidator) Name() string { return "PodResizeValidator" }

// Handles updates.
func (PodResizeValidator) Handles(op Operation) bool { return op == Update }

// Validate checks a resize that changed the spec against the pod's node.
func (p PodResizeValidator) Validate(ctx context.Context, a *Attributes) error {
	if a.Resource.Group != "" || a.Resource.Resource != "pods" || a.Subresource != "resize" {
		return nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return nil
	}
	old, ok := a.OldObject.(*corev1.Pod)
	if !ok || old.Generation == pod.Generation {
		return nil
	}
	node := &corev1.Node{}
	if err := p.r.Get(ctx, nodesGVR, "", pod.Spec.NodeName, false, node); err != nil {
		if apierrors.IsNotFound(err) {
			return forbidden(a, fmt.Errorf("node %q not found", pod.Spec.NodeName))
		}
		return forbidden(a, fmt.Errorf("failed to get node %q: %w", pod.Spec.NodeName, err))
	}
	if os, ok := node.Labels[corev1.LabelOSStable]; ok && os != "linux" {
		return resizeRefused(a, fmt.Errorf("pod resize is only supported on linux nodes, node %q is %q", node.Name, os), CauseUnsupportedPlatform)
	}
	if err := requestsWithinAllocatable(pod, node.Status.Allocatable); err != nil {
		return resizeRefused(a, err, CauseNodeCapacity)
	}
	return nil
}

func resizeRefused(a *Attributes, err error, cause metav1.CauseType) error {
	e := forbidden(a, err)
	var se *apierrors.StatusError
	if errors.As(e, &se) {
		if se.ErrStatus.Details == nil {
			se.ErrStatus.Details = &metav1.StatusDetails{}
		}
		se.ErrStatus.Details.Causes = append(se.ErrStatus.Details.Causes, metav1.StatusCause{Type: cause})
	}
	return e
}

// requestsWithinAllocatable compares the pod's effective requests (init
// containers and pod-level resources counted as the scheduler does) with
// the node's allocatable cpu and memory, in upstream's words.
func requestsWithinAllocatable(pod *corev1.Pod, allocatable corev1.ResourceList) error {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	cpu, mem := req[corev1.ResourceCPU], req[corev1.ResourceMemory]
	var msg []string
	if cpu.Cmp(*allocatable.Cpu()) > 0 {
		msg = append(msg, fmt.Sprintf("cpu, requested: %d, allocatable: %d", cpu.MilliValue(), allocatable.Cpu().MilliValue()))
	}
	if mem.Cmp(*allocatable.Memory()) > 0 {
		msg = append(msg, fmt.Sprintf("memory, requested: %d, allocatable: %d", mem.Value(), allocatable.Memory().Value()))
	}
	if len(msg) > 0 {
		return fmt.Errorf("node didn't have enough allocatable resources: %s", strings.Join(msg, "; "))
	}
	return nil
}
