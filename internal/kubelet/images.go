package kubelet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/podstatus"
)

// Waiting reasons of a container that cannot start, as upstream.
const (
	ReasonErrImagePull               = "ErrImagePull"
	ReasonImagePullBackOff           = "ImagePullBackOff"
	ReasonErrImageNeverPull          = "ErrImageNeverPull"
	ReasonCrashLoopBackOff           = "CrashLoopBackOff"
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	ReasonCreateContainerError       = "CreateContainerError"
	ReasonRunContainerError          = "RunContainerError"
	ReasonPostStartHookError         = "PostStartHookError"
)

// startError is a container that could not be started: its reason and
// message become the container's waiting state.
type startError struct{ podstatus.Reason }

func (e *startError) Error() string { return e.Reason.Reason + ": " + e.Message }

func newStartError(reason, msg string) *startError {
	return &startError{podstatus.Reason{Reason: reason, Message: msg}}
}

// ensureImage makes the container's image present as its pull policy says
// and returns the image id.
func (k *Kubelet) ensureImage(ctx context.Context, pod *corev1.Pod, c *corev1.Container) (string, error) {
	return k.pullImage(ctx, pod, k.containerRef(pod, c), c.Image, c.ImagePullPolicy)
}

// ensureImageVolumes makes the images of the container's image volumes
// present as their pull policies say, and returns what the runtime mounts
// for each by volume name. As upstream, their events are the pod's, and a
// failed pull fails the container that mounts the volume.
func (k *Kubelet) ensureImageVolumes(ctx context.Context, pod *corev1.Pod, c *corev1.Container) (map[string]*runtimeapi.ImageSpec, error) {
	var out map[string]*runtimeapi.ImageSpec
	for _, vm := range c.VolumeMounts {
		v := podVolume(pod, vm.Name)
		if v == nil || v.Image == nil || out[vm.Name] != nil {
			continue
		}
		id, err := k.pullImage(ctx, pod, podRef(pod), v.Image.Reference, v.Image.PullPolicy)
		if err != nil {
			var se *startError
			if errors.As(err, &se) {
				k.recorder.Eventf(k.containerRef(pod, c), corev1.EventTypeWarning, "Failed", "Error: %s", se.Message)
			}
			return nil, err
		}
		if out == nil {
			out = map[string]*runtimeapi.ImageSpec{}
		}
		out[vm.Name] = &runtimeapi.ImageSpec{Image: id, UserSpecifiedImage: v.Image.Reference, Annotations: pod.Annotations}
	}
	return out, nil
}

func podVolume(pod *corev1.Pod, name string) *corev1.Volume {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return &pod.Spec.Volumes[i]
		}
	}
	return nil
}

// pullImage makes an image present as the pull policy says, with events
// about ref, and returns the image id.
func (k *Kubelet) pullImage(ctx context.Context, pod *corev1.Pod, ref *corev1.ObjectReference, image string, policy corev1.PullPolicy) (string, error) {
	spec := &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: image}
	present := ""
	if resp, err := k.images.ImageStatus(ctx, spec, false); err == nil && resp.GetImage() != nil {
		present = resp.GetImage().GetId()
	}
	if policy == "" {
		policy = corev1.PullIfNotPresent
	}
	switch {
	case policy == corev1.PullNever && present == "":
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", image)
		k.recorder.Event(ref, corev1.EventTypeWarning, ReasonErrImageNeverPull, msg)
		return "", newStartError(ReasonErrImageNeverPull, msg)
	case policy != corev1.PullAlways && present != "":
		k.recorder.Eventf(ref, corev1.EventTypeNormal, "Pulled", "Container image %q already present on machine", image)
		return present, nil
	}
	key := string(pod.UID) + "_" + image
	if k.imageBackoff.InBackoffSinceUpdate(key) {
		msg := fmt.Sprintf("Back-off pulling image %q", image)
		k.recorder.Event(ref, corev1.EventTypeNormal, "BackOff", msg)
		return "", newStartError(ReasonImagePullBackOff, msg)
	}
	k.recorder.Eventf(ref, corev1.EventTypeNormal, "Pulling", "Pulling image %q", image)
	start := k.clock.Now()
	auth, err := k.pullAuth(ctx, pod, image)
	if err != nil {
		return "", err
	}
	var id string
	for _, a := range append(auth, nil) {
		id, err = k.images.PullImage(ctx, spec, a, nil)
		if err == nil {
			break
		}
	}
	if err != nil {
		k.imageBackoff.Next(key, k.clock.Now())
		k.recorder.Eventf(ref, corev1.EventTypeWarning, "Failed", "Failed to pull image %q: %v", image, err)
		k.recorder.Eventf(ref, corev1.EventTypeWarning, "Failed", "Error: %s", ReasonErrImagePull)
		return "", newStartError(ReasonErrImagePull, errMessage(err))
	}
	size := uint64(0)
	if resp, err := k.images.ImageStatus(ctx, spec, false); err == nil && resp.GetImage() != nil {
		size = resp.GetImage().GetSize()
	}
	d := k.clock.Since(start).Round(time.Millisecond)
	k.podSyncState(pod.UID).pulling += k.clock.Since(start)
	k.recorder.Eventf(ref, corev1.EventTypeNormal, "Pulled", "Successfully pulled image %q in %v (%v including waiting). Image size: %d bytes.", image, d, d, size)
	return id, nil
}

// errMessage is a gRPC error's message without the "rpc error: code = ..."
// prefix.
func errMessage(err error) string {
	if s, ok := status.FromError(err); ok {
		return s.Message()
	}
	return err.Error()
}
