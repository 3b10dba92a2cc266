// Package podstatus computes a pod's status as upstream's kubelet writes
// it, from the pod (its spec and the status last written), what the
// runtime shows of it, the last start failure of each container and the
// probe results. It is pure: the pod worker calls it and PATCHes the
// result when it differs from the API's copy.
package podstatus

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/plan"
	"github.com/skiff-sh/skiff/internal/kubelet/podstate"
	"github.com/skiff-sh/skiff/internal/kubelet/prober"
)

// Waiting reasons and condition reasons, as upstream spells them.
const (
	ReasonContainerCreating        = "ContainerCreating"
	ReasonPodInitializing          = "PodInitializing"
	ReasonContainerStatusUnknown   = "ContainerStatusUnknown"
	ReasonUnknownContainerStatuses = "UnknownContainerStatuses"
	ReasonPodCompleted             = "PodCompleted"
	ReasonPodFailed                = "PodFailed"
	ReasonContainersNotReady       = "ContainersNotReady"
	ReasonContainersNotInitialized = "ContainersNotInitialized"
	ReasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
	ReasonPodSandboxNotReady       = "PodSandboxNotReady"
)

// Reason is the last error starting a container (CrashLoopBackOff,
// ErrImagePull, CreateContainerConfigError, ...), shown as its waiting
// state while it is not running.
type Reason struct {
	Reason  string
	Message string
}

// Input is everything the status is computed from.
type Input struct {
	Pod   *corev1.Pod
	State *podstate.Pod
	// Reasons by container name.
	Reasons map[string]Reason
	// Probes gives readiness and startup results by container id.
	Probes plan.ProbeLookup
	// HostIPs are the node's addresses, primary first.
	HostIPs []string
	// Terminal is set once the pod's containers are stopped for good (the
	// pod was deleted, or its phase is terminal): the phase then becomes
	// Succeeded or Failed.
	Terminal bool
	Now      time.Time
	// Actual are the resources the runtime reports for running containers
	// (CRI ContainerStatus), by runtime id; status.containerStatuses[].resources
	// shows them (StatusResources).
	Actual map[string]*runtimeapi.LinuxContainerResources
}

// Generate returns the pod's status.
func Generate(in Input) corev1.PodStatus {
	pod := in.Pod
	old := pod.Status
	probes := in.Probes
	if probes == nil {
		probes = plan.NoProbes
	}
	now := metav1.NewTime(in.Now.Truncate(time.Second))
	var s corev1.PodStatus
	s.ObservedGeneration = pod.Generation

	if sb := in.State.LatestSandbox(); sb != nil && !sb.HostNetwork {
		for _, ip := range sb.IPs {
			s.PodIPs = append(s.PodIPs, corev1.PodIP{IP: ip})
		}
	}
	if len(s.PodIPs) == 0 && !pod.Spec.HostNetwork && len(old.PodIPs) > 0 {
		s.PodIPs = append(s.PodIPs, old.PodIPs...)
	}
	s.QOSClass = old.QOSClass
	if s.QOSClass == "" {
		s.QOSClass = QOSClass(pod)
	}

	hasInit := len(pod.Spec.InitContainers) > 0
	s.ContainerStatuses = containerStatuses(in, old.ContainerStatuses, pod.Spec.Containers, hasInit, false)
	s.InitContainerStatuses = containerStatuses(in, old.InitContainerStatuses, pod.Spec.InitContainers, hasInit, true)
	setProbeState(pod, s.ContainerStatuses, pod.Spec.Containers, probes, false)
	setProbeState(pod, s.InitContainerStatuses, pod.Spec.InitContainers, probes, true)
	s.EphemeralContainerStatuses = ephemeralStatuses(in, old.EphemeralContainerStatuses, hasInit)

	all := append(append([]corev1.ContainerStatus{}, s.ContainerStatuses...), s.InitContainerStatuses...)
	s.Phase = Phase(pod, all, in.Terminal, plan.HasAnyActiveRegularContainerStarted(&pod.Spec, in.State))
	if s.Phase != corev1.PodFailed && s.Phase != corev1.PodSucceeded &&
		(old.Phase == corev1.PodFailed || old.Phase == corev1.PodSucceeded) {
		s.Phase = old.Phase
	}
	if s.Phase == old.Phase {
		s.Reason, s.Message = old.Reason, old.Message
	}

	for _, c := range old.Conditions {
		if !ByKubelet(c.Type) {
			s.Conditions = append(s.Conditions, c)
		}
	}
	sandboxNeeded, _, _, msg := plan.SandboxChanged(pod, in.State)
	ready := corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue}
	if sandboxNeeded {
		ready = corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse,
			Reason: ReasonPodSandboxNotReady, Message: msg}
	}
	s.Conditions = append(s.Conditions, ready)
	s.Conditions = append(s.Conditions, initializedCondition(pod, all, s.Phase))
	s.Conditions = append(s.Conditions, readyCondition(pod, s.Conditions, all, s.Phase))
	s.Conditions = append(s.Conditions, containersReadyCondition(pod, all, s.Phase))
	s.Conditions = append(s.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue})
	for i := range s.Conditions {
		c := &s.Conditions[i]
		if ByKubelet(c.Type) {
			c.ObservedGeneration = pod.Generation
			c.LastTransitionTime = now
			for _, o := range old.Conditions {
				if o.Type == c.Type && o.Status == c.Status {
					c.LastTransitionTime = o.LastTransitionTime
				}
			}
		}
	}

	for _, ip := range in.HostIPs {
		s.HostIPs = append(s.HostIPs, corev1.HostIP{IP: ip})
	}
	if len(s.HostIPs) > 0 {
		s.HostIP = s.HostIPs[0].IP
		if pod.Spec.HostNetwork && len(s.PodIPs) == 0 {
			for _, ip := range in.HostIPs {
				s.PodIPs = append(s.PodIPs, corev1.PodIP{IP: ip})
			}
		}
	}
	if len(s.PodIPs) > 0 {
		s.PodIP = s.PodIPs[0].IP
	}
	s.StartTime = old.StartTime
	if s.StartTime == nil || s.StartTime.IsZero() {
		s.StartTime = &now
	}
	return s
}

// Rejected is the status of a bound pod the node refuses (OutOfcpu,
// OutOfmemory, ...), as upstream's rejectPod writes it: phase Failed with
// the reason and "Pod was rejected: <message>".
func Rejected(pod *corev1.Pod, reason, message string, now time.Time) corev1.PodStatus {
	s := corev1.PodStatus{
		Phase:              corev1.PodFailed,
		Reason:             reason,
		Message:            "Pod was rejected: " + message,
		QOSClass:           pod.Status.QOSClass,
		ObservedGeneration: pod.Generation,
		StartTime:          pod.Status.StartTime,
	}
	if s.QOSClass == "" {
		s.QOSClass = QOSClass(pod)
	}
	if s.StartTime == nil {
		t := metav1.NewTime(now.Truncate(time.Second))
		s.StartTime = &t
	}
	return s
}

// ByKubelet reports whether the kubelet generates conditions of type t
// at every sync (the resize conditions it also owns are set apart).
func ByKubelet(t corev1.PodConditionType) bool {
	switch t {
	case corev1.PodScheduled, corev1.PodReady, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReadyToStartContainers:
		return true
	}
	return false
}

func findStatus(list []corev1.ContainerStatus, name string) (corev1.ContainerStatus, bool) {
	for _, s := range list {
		if s.Name == name {
			return s, true
		}
	}
	return corev1.ContainerStatus{}, false
}

func convert(c *podstate.Container, old *corev1.ContainerStatus) *corev1.ContainerStatus {
	st := &corev1.ContainerStatus{
		Name:         c.Name,
		RestartCount: int32(c.Attempt),
		Image:        c.Image,
		ImageID:      c.ImageRef,
		ContainerID:  c.ContainerID,
	}
	if old != nil {
		st.VolumeMounts = old.VolumeMounts
	}
	switch {
	case c.State == podstate.Running:
		st.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.StartedAt)}
	case c.State == podstate.Created:
		st.State.Waiting = &corev1.ContainerStateWaiting{}
	case c.State == podstate.Exited:
		st.State.Terminated = &corev1.ContainerStateTerminated{
			ExitCode:    c.ExitCode,
			Reason:      c.Reason,
			Message:     c.Message,
			StartedAt:   metav1.NewTime(c.StartedAt),
			FinishedAt:  metav1.NewTime(c.FinishedAt),
			ContainerID: c.ContainerID,
		}
	case c.State == podstate.Unknown && old != nil && old.State.Running != nil:
		st.State.Terminated = &corev1.ContainerStateTerminated{
			Reason:   ReasonContainerStatusUnknown,
			Message:  "The container could not be located when the pod was terminated",
			ExitCode: 137,
		}
		st.RestartCount = old.RestartCount + 1
	default:
		st.State.Waiting = &corev1.ContainerStateWaiting{}
	}
	return st
}

func containerStatuses(in Input, previous []corev1.ContainerStatus, containers []corev1.Container, hasInit, isInit bool) []corev1.ContainerStatus {
	pod, st := in.Pod, in.State
	statuses := make(map[string]*corev1.ContainerStatus, len(containers))
	defaultWaiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonContainerCreating}}
	if hasInit {
		defaultWaiting = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonPodInitializing}}
	}
	for i := range containers {
		c := &containers[i]
		cs := &corev1.ContainerStatus{Name: c.Name, Image: c.Image, State: *defaultWaiting.DeepCopy()}
		for _, m := range c.VolumeMounts {
			vm := corev1.VolumeMountStatus{Name: m.Name, MountPath: m.MountPath, ReadOnly: m.ReadOnly}
			if m.ReadOnly {
				mode := corev1.RecursiveReadOnlyDisabled
				vm.RecursiveReadOnly = &mode
			}
			cs.VolumeMounts = append(cs.VolumeMounts, vm)
		}
		if old, ok := findStatus(previous, c.Name); ok {
			if old.State.Terminated != nil {
				cs = old.DeepCopy()
			} else {
				cs.RestartCount = old.RestartCount
				cs.LastTerminationState = *old.LastTerminationState.DeepCopy()
			}
		}
		statuses[c.Name] = cs
	}

	// Containers the runtime no longer knows that were running: record
	// that their end is unknown.
	for i := range containers {
		c := &containers[i]
		if st.Latest(c.Name) != nil {
			continue
		}
		old, ok := findStatus(previous, c.Name)
		if !ok || old.State.Terminated != nil || old.State.Running == nil {
			continue
		}
		cs := statuses[c.Name]
		if cs.State.Waiting == nil || cs.State.Waiting.Reason != defaultWaiting.Waiting.Reason || cs.LastTerminationState.Terminated != nil {
			continue
		}
		cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{
			Reason:   ReasonContainerStatusUnknown,
			Message:  "The container could not be located when the pod was deleted.  The container used to be Running",
			ExitCode: 137,
		}
		if pod.DeletionTimestamp == nil {
			cs.RestartCount++
		}
	}

	// The newest two instances of each container: the current state and
	// the last termination.
	seen := map[string]int{}
	if st != nil {
		for i := range st.Containers {
			rc := &st.Containers[i]
			if _, ok := statuses[rc.Name]; !ok || seen[rc.Name] >= 2 {
				continue
			}
			var oldPtr *corev1.ContainerStatus
			if old, ok := findStatus(previous, rc.Name); ok {
				oldPtr = &old
			}
			cs := convert(rc, oldPtr)
			if seen[rc.Name] == 0 {
				if spec := specOf(pod, rc.Name); spec != nil {
					res := spec.Resources.DeepCopy()
					if rc.State == podstate.Running {
						res = StatusResources(&spec.Resources, in.Actual[rc.ID])
					}
					cs.Resources = res
					cs.AllocatedResources = spec.Resources.Requests
				}
				if cs.VolumeMounts == nil {
					cs.VolumeMounts = statuses[rc.Name].VolumeMounts
				}
				statuses[rc.Name] = cs
			} else {
				statuses[rc.Name].LastTerminationState = cs.State
			}
			seen[rc.Name]++
		}
	}

	// The last start failure is the waiting reason of a container that is
	// to run again.
	for i := range containers {
		c := &containers[i]
		if isInit {
			rc := st.Latest(c.Name)
			if rc != nil && rc.State == podstate.Exited && rc.ExitCode == 0 {
				continue
			}
			if rc == nil && hasAnyRegularContainerCreated(pod, st) && !plan.IsSidecar(c) && statuses[c.Name].State.Waiting != nil {
				statuses[c.Name].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					Reason:   "Completed",
					Message:  "Unable to get init container status from container runtime and pod has been initialized, treat it as exited normally",
					ExitCode: 0,
				}}
				continue
			}
		}
		if !plan.ShouldBeRestarted(c, pod, st) {
			continue
		}
		r, ok := in.Reasons[c.Name]
		if !ok {
			continue
		}
		cs := statuses[c.Name]
		if cs.State.Terminated != nil {
			cs.LastTerminationState = cs.State
		}
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: r.Reason, Message: r.Message}}
	}

	out := make([]corev1.ContainerStatus, 0, len(statuses))
	if isInit {
		for i := range containers {
			out = append(out, *statuses[containers[i].Name])
		}
		return out
	}
	for _, cs := range statuses {
		out = append(out, *cs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func hasAnyRegularContainerCreated(pod *corev1.Pod, st *podstate.Pod) bool {
	for i := range pod.Spec.Containers {
		if c := st.Latest(pod.Spec.Containers[i].Name); c != nil && c.State != podstate.Unknown {
			return true
		}
	}
	return false
}

func specOf(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}

// setProbeState fills Started and Ready as upstream's prober manager does:
// a running container has started once its startup probe succeeded (or it
// has none) and is ready once its readiness probe succeeded (or it has
// none); a regular init container is ready once it exited 0.
func setProbeState(pod *corev1.Pod, statuses []corev1.ContainerStatus, specs []corev1.Container, probes plan.ProbeLookup, isInit bool) {
	for i := range statuses {
		cs := &statuses[i]
		spec := specByName(specs, cs.Name)
		if spec == nil {
			continue
		}
		id := stripRuntime(cs.ContainerID)
		started := false
		if cs.State.Running != nil {
			if spec.StartupProbe == nil {
				started = true
			} else if r, ok := probes(prober.Startup, id); ok && r == prober.Success {
				started = true
			}
		}
		cs.Started = &started
		if isInit && !plan.IsSidecar(spec) {
			cs.Ready = cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
			continue
		}
		if !started {
			cs.Ready = false
			continue
		}
		if spec.ReadinessProbe == nil {
			cs.Ready = true
			continue
		}
		r, ok := probes(prober.Readiness, id)
		cs.Ready = ok && r == prober.Success
	}
}

func specByName(specs []corev1.Container, name string) *corev1.Container {
	for i := range specs {
		if specs[i].Name == name {
			return &specs[i]
		}
	}
	return nil
}

func stripRuntime(containerID string) string {
	if i := strings.Index(containerID, "://"); i >= 0 {
		return containerID[i+3:]
	}
	return containerID
}

// Phase is upstream's getPhase.
func Phase(pod *corev1.Pod, info []corev1.ContainerStatus, terminal, initialized bool) corev1.PodPhase {
	spec := &pod.Spec
	pendingSidecars, pendingInit, failedInitNotRestartable := 0, 0, 0
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if plan.IsSidecar(c) {
			continue
		}
		cs, ok := findStatus(info, c.Name)
		if !ok {
			pendingInit++
			continue
		}
		switch {
		case cs.State.Running != nil:
			pendingInit++
		case cs.State.Terminated != nil:
			if code := cs.State.Terminated.ExitCode; code != 0 && !plan.ShouldRestart(c, spec, code) {
				failedInitNotRestartable++
			}
		case cs.State.Waiting != nil:
			if t := cs.LastTerminationState.Terminated; t != nil {
				if t.ExitCode != 0 && !plan.ShouldRestart(c, spec, t.ExitCode) {
					failedInitNotRestartable++
				}
			} else {
				pendingInit++
			}
		default:
			pendingInit++
		}
	}
	unknown, running, waiting, stopped, stoppedNotRestartable, succeeded := 0, 0, 0, 0, 0, 0
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if !plan.IsSidecar(c) {
			continue
		}
		cs, ok := findStatus(info, c.Name)
		if !ok {
			unknown++
			continue
		}
		switch {
		case cs.State.Running != nil:
			if cs.Started == nil || !*cs.Started {
				pendingSidecars++
			}
			running++
		case cs.State.Terminated != nil:
		case cs.State.Waiting != nil:
			if cs.LastTerminationState.Terminated == nil {
				pendingSidecars++
				waiting++
			}
		default:
			pendingSidecars++
			unknown++
		}
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		cs, ok := findStatus(info, c.Name)
		if !ok {
			unknown++
			continue
		}
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			code := cs.State.Terminated.ExitCode
			if !plan.ShouldRestart(c, spec, code) {
				stoppedNotRestartable++
			}
			if code == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil:
			if t := cs.LastTerminationState.Terminated; t != nil {
				stopped++
				if !plan.ShouldRestart(c, spec, t.ExitCode) {
					stoppedNotRestartable++
				}
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}
	if failedInitNotRestartable > 0 {
		return corev1.PodFailed
	}
	switch {
	case pendingInit > 0 || (pendingSidecars > 0 && !initialized), waiting > 0:
		return corev1.PodPending
	case running > 0 && unknown == 0:
		return corev1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if terminal {
			if stopped == succeeded {
				return corev1.PodSucceeded
			}
			return corev1.PodFailed
		}
		if stopped != stoppedNotRestartable {
			return corev1.PodRunning
		}
		if stopped == succeeded {
			return corev1.PodSucceeded
		}
		return corev1.PodFailed
	}
	return corev1.PodPending
}

func terminalReason(phase corev1.PodPhase) string {
	switch phase {
	case corev1.PodFailed:
		return ReasonPodFailed
	case corev1.PodSucceeded:
		return ReasonPodCompleted
	}
	return ""
}

func containersReadyCondition(pod *corev1.Pod, statuses []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	var unknown, unready []string
	check := func(c *corev1.Container) {
		cs, ok := findStatus(statuses, c.Name)
		switch {
		case !ok:
			unknown = append(unknown, c.Name)
		case !cs.Ready:
			unready = append(unready, c.Name)
		}
	}
	for i := range pod.Spec.InitContainers {
		if plan.IsSidecar(&pod.Spec.InitContainers[i]) {
			check(&pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		check(&pod.Spec.Containers[i])
	}
	if (phase == corev1.PodSucceeded && len(unknown) == 0) || phase == corev1.PodFailed {
		return corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: terminalReason(phase)}
	}
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", unknown))
	}
	if len(unready) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unready status: %s", unready))
	}
	if len(msgs) > 0 {
		return corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse,
			Reason: ReasonContainersNotReady, Message: strings.Join(msgs, ", ")}
	}
	return corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}
}

func readyCondition(pod *corev1.Pod, conditions []corev1.PodCondition, statuses []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	cr := containersReadyCondition(pod, statuses, phase)
	if cr.Status != corev1.ConditionTrue {
		return corev1.PodCondition{Type: corev1.PodReady, Status: cr.Status, Reason: cr.Reason, Message: cr.Message}
	}
	var msgs []string
	for _, rg := range pod.Spec.ReadinessGates {
		var found *corev1.PodCondition
		for i := range conditions {
			if conditions[i].Type == rg.ConditionType {
				found = &conditions[i]
			}
		}
		if found == nil {
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(rg.ConditionType)))
		} else if found.Status != corev1.ConditionTrue {
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(rg.ConditionType), found.Status))
		}
	}
	if len(msgs) > 0 {
		return corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse,
			Reason: ReasonReadinessGatesNotReady, Message: strings.Join(msgs, ", ")}
	}
	return corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
}

func initializedCondition(pod *corev1.Pod, statuses []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	var unknown, incomplete []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs, ok := findStatus(statuses, c.Name)
		if !ok {
			unknown = append(unknown, c.Name)
			continue
		}
		done := cs.Ready
		if plan.IsSidecar(c) {
			done = cs.Started != nil && *cs.Started
		}
		if !done {
			incomplete = append(incomplete, c.Name)
		}
	}
	if phase == corev1.PodSucceeded && len(unknown) == 0 {
		return corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, Reason: ReasonPodCompleted}
	}
	for i := range pod.Spec.Containers {
		if cs, ok := findStatus(statuses, pod.Spec.Containers[i].Name); ok && (cs.State.Running != nil || cs.State.Terminated != nil) {
			return corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}
		}
	}
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", unknown))
	}
	if len(incomplete) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with incomplete status: %s", incomplete))
	}
	if len(msgs) > 0 {
		return corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionFalse,
			Reason: ReasonContainersNotInitialized, Message: strings.Join(msgs, ", ")}
	}
	return corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}
}

// QOSClass is upstream's ComputePodQOS for container-level resources.
func QOSClass(pod *corev1.Pod) corev1.PodQOSClass {
	requests := corev1.ResourceList{}
	limits := corev1.ResourceList{}
	zero := true
	guaranteed := true
	all := append(append([]corev1.Container{}, pod.Spec.Containers...), pod.Spec.InitContainers...)
	if pod.Spec.Resources != nil {
		all = []corev1.Container{{Resources: *pod.Spec.Resources}}
	}
	for _, c := range all {
		for name, q := range c.Resources.Requests {
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
				continue
			}
			if !q.IsZero() {
				zero = false
				if v, ok := requests[name]; ok {
					v.Add(q)
					requests[name] = v
				} else {
					requests[name] = q.DeepCopy()
				}
			}
		}
		found := 0
		for name, q := range c.Resources.Limits {
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
				continue
			}
			if !q.IsZero() {
				zero = false
				found++
				if v, ok := limits[name]; ok {
					v.Add(q)
					limits[name] = v
				} else {
					limits[name] = q.DeepCopy()
				}
			}
		}
		if found < 2 {
			guaranteed = false
		}
	}
	if zero {
		return corev1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// ephemeralStatuses are the statuses of the pod's ephemeral containers,
// in spec order: like a regular container's, never ready, started while
// running.
func ephemeralStatuses(in Input, previous []corev1.ContainerStatus, hasInit bool) []corev1.ContainerStatus {
	ecs := in.Pod.Spec.EphemeralContainers
	if len(ecs) == 0 {
		return nil
	}
	specs := make([]corev1.Container, len(ecs))
	for i := range ecs {
		specs[i] = corev1.Container(ecs[i].EphemeralContainerCommon)
	}
	byName := map[string]corev1.ContainerStatus{}
	for _, cs := range containerStatuses(in, previous, specs, hasInit, false) {
		byName[cs.Name] = cs
	}
	out := make([]corev1.ContainerStatus, 0, len(specs))
	for _, c := range specs {
		cs := byName[c.Name]
		started := cs.State.Running != nil
		cs.Started, cs.Ready = &started, false
		out = append(out, cs)
	}
	return out
}

// StatusResources is what status.containerStatuses[].resources shows for a
// running container, as upstream's kubelet: the allocated resources (the
// pod spec the kubelet accepted; pod here), with the cpu limit, cpu request
// and memory limit the runtime reports instead where they are set (cpu
// from the CFS quota and shares, so equivalents such as 1m and 2m, both
// the minimum 2 shares, show as allocated).
func StatusResources(alloc *corev1.ResourceRequirements, actual *runtimeapi.LinuxContainerResources) *corev1.ResourceRequirements {
	res := alloc.DeepCopy()
	if actual == nil {
		return res
	}
	const minMilliCPULimit, minShares = 10, 2
	if res.Limits != nil {
		if actual.CpuPeriod > 0 && actual.CpuQuota > 0 {
			milli := actual.CpuQuota * 1000 / actual.CpuPeriod
			if milli > minMilliCPULimit || res.Limits.Cpu().MilliValue() > minMilliCPULimit {
				res.Limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(milli, resource.DecimalSI)
			}
		}
		if actual.MemoryLimitInBytes > 0 {
			res.Limits[corev1.ResourceMemory] = *resource.NewQuantity(actual.MemoryLimitInBytes, resource.BinarySI)
		}
	}
	if res.Requests != nil && actual.CpuShares >= minShares {
		milli := (actual.CpuShares*1000 + 1023) / 1024 // rounded up, as upstream's SharesToMilliCPU
		if milli > minShares || res.Requests.Cpu().MilliValue() > minShares {
			res.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(milli, resource.DecimalSI)
		}
	}
	return res
}
