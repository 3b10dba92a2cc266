package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/kubelet/podstate"
)

// In-place pod resize, as upstream's allocation manager and
// kuberuntime do it. Each admitted pod has allocated resources: the
// containers' resources the kubelet accepted (at admission, then at each
// resize that fits the node). Containers run with the allocated resources,
// not the spec's; a spec that differs is a resize: when it fits beside the
// other pods' allocations it becomes the allocation (event
// ResizeStarted), else the pod gets the PodResizePending condition
// (Deferred, with the admission message) and it is tried again at each
// sync. Running containers whose runtime resources differ from the
// allocation are updated through CRI UpdateContainerResources, or
// restarted when a changed resource's resizePolicy says RestartContainer;
// a failed update leaves PodResizeInProgress (reason Error) until the
// next try succeeds. Allocations are kept in <root>/allocated_pods_state
// so that an agent restart keeps what was accepted.

// Event reasons of a resize, as upstream's.
const (
	eventResizeStarted   = "ResizeStarted"
	eventResizeCompleted = "ResizeCompleted"
	eventResizeDeferred  = "ResizeDeferred"
	eventResizeError     = "ResizeError"
)

// allocations are the allocated container resources of admitted pods, by
// pod UID and container name, persisted as JSON.
type allocations struct {
	path string
	mu   sync.Mutex
	pods map[types.UID]map[string]corev1.ResourceRequirements
}

// loadAllocations reads the file at path (missing: none yet).
func loadAllocations(path string) *allocations {
	a := &allocations{path: path, pods: map[types.UID]map[string]corev1.ResourceRequirements{}}
	if data, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(data, &a.pods)
	}
	return a
}

func (a *allocations) get(uid types.UID) (map[string]corev1.ResourceRequirements, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m, ok := a.pods[uid]
	return m, ok
}

func (a *allocations) set(uid types.UID, m map[string]corev1.ResourceRequirements) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if old, ok := a.pods[uid]; ok && apiequality.Semantic.DeepEqual(old, m) {
		return nil
	}
	a.pods[uid] = m
	return a.saveLocked()
}

func (a *allocations) remove(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.pods[uid]; !ok {
		return
	}
	delete(a.pods, uid)
	_ = a.saveLocked()
}

func (a *allocations) saveLocked() error {
	if a.path == "" {
		return nil
	}
	data, err := json.Marshal(a.pods)
	if err != nil {
		return err
	}
	tmp := a.path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write allocations: %w", err)
	}
	return os.Rename(tmp, a.path)
}

func allocationsPath(root string) string { return filepath.Join(root, "allocated_pods_state") }

// specResources are the pod's container and init container resources by
// name (names are unique across both).
func specResources(pod *corev1.Pod) map[string]corev1.ResourceRequirements {
	m := map[string]corev1.ResourceRequirements{}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			m[list[i].Name] = *list[i].Resources.DeepCopy()
		}
	}
	return m
}

// withAllocation is a copy of pod whose containers have the allocated
// resources (pod itself when it has none or they are the spec's).
func withAllocation(pod *corev1.Pod, alloc map[string]corev1.ResourceRequirements) *corev1.Pod {
	if alloc == nil || apiequality.Semantic.DeepEqual(alloc, specResources(pod)) {
		return pod
	}
	out := pod.DeepCopy()
	for _, list := range [][]corev1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range list {
			if r, ok := alloc[list[i].Name]; ok {
				list[i].Resources = *r.DeepCopy()
			}
		}
	}
	return out
}

// allocatedPod is pod as the kubelet runs it: with its allocation, after
// accepting a resize that fits (or marking it pending).
func (k *Kubelet) allocatedPod(ctx context.Context, pod *corev1.Pod, ps *podSync) *corev1.Pod {
	want := specResources(pod)
	alloc, ok := k.alloc.get(pod.UID)
	if !ok {
		// Admitted just now, or before allocations were kept.
		if err := k.alloc.set(pod.UID, want); err != nil {
			klog.FromContext(ctx).Info("Unable to save the pod's allocation", "err", err)
		}
		ps.resizePending = nil
		return pod
	}
	if apiequality.Semantic.DeepEqual(alloc, want) {
		ps.resizePending = nil
		return pod
	}
	// A resize: does it fit beside the other pods' allocations?
	node := k.currentNode()
	if node == nil {
		return withAllocation(pod, alloc)
	}
	var others []*corev1.Pod
	k.mu.Lock()
	for uid, p := range k.pods {
		if uid != pod.UID && k.admitted[uid] && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			others = append(others, p)
		}
	}
	k.mu.Unlock()
	for i, p := range others {
		a, _ := k.alloc.get(p.UID)
		others[i] = withAllocation(p, a)
	}
	if reason, msg := fits(pod, others, node.Status.Allocatable); reason != "" && reason != "NodePorts" && reason != "OutOfpods" {
		if ps.resizePending == nil || ps.resizePending.Message != msg || ps.resizePending.ObservedGeneration != pod.Generation {
			k.recorder.Eventf(pod, corev1.EventTypeWarning, eventResizeDeferred, "Pod resize Deferred: %s", resizeSummary(pod, pod.Generation, msg))
		}
		ps.resizePending = &corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue,
			Reason: corev1.PodReasonDeferred, Message: msg, ObservedGeneration: pod.Generation}
		return withAllocation(pod, alloc)
	}
	if err := k.alloc.set(pod.UID, want); err != nil {
		klog.FromContext(ctx).Info("Unable to save the pod's allocation", "err", err)
	}
	ps.resizePending = nil
	ps.resizeError = ""
	ps.resizeGeneration = pod.Generation
	k.recorder.Eventf(pod, corev1.EventTypeNormal, eventResizeStarted, "Pod resize started: %s", resizeSummary(pod, pod.Generation, ""))
	return pod
}

// resizeSummary is upstream's JSON summary of a resize in its events.
func resizeSummary(pod *corev1.Pod, generation int64, errMsg string) string {
	type alloc struct {
		Name      string                      `json:"name"`
		Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	}
	var s struct {
		InitContainers []alloc `json:"initContainers,omitempty"`
		Containers     []alloc `json:"containers,omitempty"`
		Generation     int64   `json:"generation"`
		Error          string  `json:"error,omitempty"`
	}
	for _, c := range pod.Spec.InitContainers {
		s.InitContainers = append(s.InitContainers, alloc{c.Name, c.Resources})
	}
	for _, c := range pod.Spec.Containers {
		s.Containers = append(s.Containers, alloc{c.Name, c.Resources})
	}
	s.Generation, s.Error = generation, errMsg
	data, _ := json.Marshal(s)
	return string(data)
}

// actuateResize brings the running containers of pod (with its
// allocation) to their allocated resources and reports whether one of
// them is still to be done (restarting, or an update failed).
func (k *Kubelet) actuateResize(ctx context.Context, pod *corev1.Pod, st *podstate.Pod, ps *podSync) bool {
	logger := klog.FromContext(ctx)
	if ps.actual == nil {
		ps.actual = map[string]*runtimeapi.LinuxContainerResources{}
	}
	pending := false
	live := map[string]bool{}
	for _, rc := range st.Containers {
		live[rc.ID] = true
	}
	for id := range ps.actual {
		if !live[id] {
			delete(ps.actual, id)
		}
	}
	seen := map[string]bool{}
	for i := range st.Containers {
		rc := &st.Containers[i]
		if seen[rc.Name] {
			continue // an older instance
		}
		seen[rc.Name] = true
		c := containerSpec(pod, rc.Name)
		if c == nil || rc.State != podstate.Running {
			continue
		}
		actual := ps.actual[rc.ID]
		if actual == nil {
			resp, err := k.runtime.ContainerStatus(ctx, rc.ID, false)
			if err != nil || resp.GetStatus().GetResources().GetLinux() == nil {
				continue
			}
			actual = resp.GetStatus().GetResources().GetLinux()
			ps.actual[rc.ID] = actual
		}
		desired := k.linuxResources(pod, c)
		cpuChanged, memChanged := resourcesDiffer(desired, actual)
		if !cpuChanged && !memChanged {
			continue
		}
		if (cpuChanged && restartOnResize(c, corev1.ResourceCPU)) || (memChanged && restartOnResize(c, corev1.ResourceMemory)) {
			k.killContainer(ctx, pod, c, rc.ID, gracePeriodSpec(pod), fmt.Sprintf("Container %s resize requires restart", c.Name))
			delete(ps.actual, rc.ID)
			pending = true
			continue
		}
		if err := k.runtime.UpdateContainerResources(ctx, rc.ID, &runtimeapi.ContainerResources{Linux: desired}); err != nil {
			logger.Info("Unable to resize a container", "container", c.Name, "err", err)
			msg := fmt.Sprintf("failed to update container %q resources: %v", c.Name, err)
			if ps.resizeError != msg {
				k.recorder.Eventf(pod, corev1.EventTypeWarning, eventResizeError, "Pod resize error: %s", resizeSummary(pod, pod.Generation, msg))
			}
			ps.resizeError = msg
			pending = true
			continue
		}
		ps.actual[rc.ID] = desired
	}
	if !pending && ps.resizeGeneration != 0 {
		ps.resizeError = ""
		k.recorder.Eventf(pod, corev1.EventTypeNormal, eventResizeCompleted, "Pod resize completed: %s", resizeSummary(pod, ps.resizeGeneration, ""))
		ps.resizeGeneration = 0
	}
	if !pending {
		ps.resizeError = ""
	}
	ps.resizeInProgress = pending
	return pending
}

// resourcesDiffer compares what UpdateContainerResources sets: cpu shares
// and quota, and the memory limit.
func resourcesDiffer(desired, actual *runtimeapi.LinuxContainerResources) (cpu, mem bool) {
	period := func(r *runtimeapi.LinuxContainerResources) int64 {
		if r.CpuQuota <= 0 {
			return 0
		}
		return r.CpuPeriod
	}
	quota := func(r *runtimeapi.LinuxContainerResources) int64 {
		if r.CpuQuota <= 0 {
			return 0
		}
		return r.CpuQuota
	}
	cpu = desired.CpuShares != actual.CpuShares || quota(desired) != quota(actual) || period(desired) != period(actual)
	mem = desired.MemoryLimitInBytes != actual.MemoryLimitInBytes
	return cpu, mem
}

// restartOnResize: the container's resizePolicy for res is RestartContainer.
func restartOnResize(c *corev1.Container, res corev1.ResourceName) bool {
	for _, p := range c.ResizePolicy {
		if p.ResourceName == res {
			return p.RestartPolicy == corev1.RestartContainer
		}
	}
	return false
}

// containerSpec is the regular or init container called name.
func containerSpec(pod *corev1.Pod, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// setResizeConditions replaces the resize conditions of status with the
// kubelet's: PodResizePending while a resize waits for room,
// PodResizeInProgress while an accepted one is not carried out (reason
// Error with the message after a failed update); their transition times
// are kept while they hold.
func setResizeConditions(status *corev1.PodStatus, previous []corev1.PodCondition, ps *podSync, generation int64, now metav1.Time) {
	var want []corev1.PodCondition
	if ps.resizePending != nil {
		want = append(want, *ps.resizePending)
	}
	if ps.resizeInProgress {
		c := corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue, ObservedGeneration: generation}
		if ps.resizeError != "" {
			c.Reason, c.Message = corev1.PodReasonError, ps.resizeError
		}
		want = append(want, c)
	}
	kept := status.Conditions[:0]
	for _, c := range status.Conditions {
		if c.Type != corev1.PodResizePending && c.Type != corev1.PodResizeInProgress {
			kept = append(kept, c)
		}
	}
	status.Conditions = kept
	for _, c := range want {
		c.LastTransitionTime = now
		for _, p := range previous {
			if p.Type == c.Type && p.Status == c.Status && p.Reason == c.Reason {
				c.LastTransitionTime = p.LastTransitionTime
			}
		}
		status.Conditions = append(status.Conditions, c)
	}
}
