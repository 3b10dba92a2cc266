// Package plan decides what the kubelet should do to one pod now, from the
// pod's spec and what the runtime shows of it (podstate), as upstream's
// computePodActions does: whether to (re)create the sandbox, which init
// container runs next, which sidecars and containers to start, and which
// running containers to kill and why. It does no I/O; the pod worker
// carries the actions out (and applies the crash-loop back-off to the
// starts).
package plan

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/podstate"
	"github.com/skiff-sh/skiff/internal/kubelet/prober"
)

// Reasons a running container is killed.
const (
	KillReasonLiveness = "LivenessProbe"
	KillReasonStartup  = "StartupProbe"
	KillReasonUnknown  = "Unknown"
	KillReasonChanged  = "" // spec changed: no probe reason
)

// Messages of the PodReadyToStartContainers condition when the sandbox
// must be (re)created, as upstream words them.
const (
	SandboxMsgNone        = "no pod sandbox exists"
	SandboxMsgMultiple    = "multiple pod sandboxes are ready and need to be reconciled"
	SandboxMsgNotReady    = "pod sandbox is not ready"
	SandboxMsgNetworkMode = "network namespace mode changed and sandbox needs to be recreated"
	SandboxMsgNoIPAddress = "pod sandbox has no IP address"
)

// Kill is a running container to stop.
type Kill struct {
	ID      string
	Name    string
	Reason  string
	Message string
}

// Actions is what to do to one pod now.
type Actions struct {
	// KillPod stops every container and the sandbox.
	KillPod bool
	// CreateSandbox creates a new sandbox with Attempt; SandboxID is the
	// current one (to be replaced, or to start containers in).
	CreateSandbox bool
	SandboxID     string
	Attempt       int
	// InitContainersToStart are indexes into spec.initContainers, in the
	// order to start them.
	InitContainersToStart []int
	// ContainersToStart are indexes into spec.containers.
	ContainersToStart []int
	// EphemeralContainersToStart are indexes into spec.ephemeralContainers
	// of those never started (an ephemeral container runs once).
	EphemeralContainersToStart []int
	// ContainersToKill are running containers to stop first.
	ContainersToKill []Kill
}

// ProbeLookup returns the current result of a container's probe and
// whether a worker has one.
type ProbeLookup func(kind prober.Kind, containerID string) (prober.Result, bool)

// NoProbes is a ProbeLookup with no results.
func NoProbes(prober.Kind, string) (prober.Result, bool) { return prober.Unknown, false }

// SandboxChanged reports whether the pod needs a new sandbox, the attempt
// number of that sandbox, the current sandbox id and upstream's message.
func SandboxChanged(pod *corev1.Pod, st *podstate.Pod) (bool, int, string, string) {
	if st == nil || len(st.Sandboxes) == 0 {
		return true, 0, "", SandboxMsgNone
	}
	ready := 0
	for _, s := range st.Sandboxes {
		if s.Ready {
			ready++
		}
	}
	sb := st.Sandboxes[0]
	switch {
	case ready > 1:
		return true, sb.Attempt + 1, sb.ID, SandboxMsgMultiple
	case !sb.Ready:
		return true, sb.Attempt + 1, sb.ID, SandboxMsgNotReady
	case sb.HostNetwork != pod.Spec.HostNetwork:
		return true, sb.Attempt + 1, "", SandboxMsgNetworkMode
	case !pod.Spec.HostNetwork && len(sb.IPs) == 0:
		return true, sb.Attempt + 1, sb.ID, SandboxMsgNoIPAddress
	}
	return false, sb.Attempt, sb.ID, ""
}

// IsSidecar reports whether an init container is a restartable one.
func IsSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// ShouldRestart is upstream's ContainerShouldRestart: whether a container
// that exited with exitCode is to run again, by its restart rules, its own
// restartPolicy, then the pod's.
func ShouldRestart(c *corev1.Container, spec *corev1.PodSpec, exitCode int32) bool {
	if c.RestartPolicy != nil {
		for _, rule := range c.RestartPolicyRules {
			if rule.ExitCodes == nil || !matchExitCodes(rule.ExitCodes, exitCode) {
				continue
			}
			if rule.Action == corev1.ContainerRestartRuleActionRestart {
				return true
			}
			break
		}
		switch *c.RestartPolicy {
		case corev1.ContainerRestartPolicyAlways:
			return true
		case corev1.ContainerRestartPolicyOnFailure:
			return exitCode != 0
		case corev1.ContainerRestartPolicyNever:
			return false
		}
	}
	switch spec.RestartPolicy {
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	case corev1.RestartPolicyNever:
		return false
	}
	return true
}

func matchExitCodes(r *corev1.ContainerRestartRuleOnExitCodes, code int32) bool {
	in := false
	for _, v := range r.Values {
		if v == code {
			in = true
		}
	}
	if r.Operator == corev1.ContainerRestartRuleOnExitCodesOpNotIn {
		return !in
	}
	return in
}

// ShouldBeRestarted is upstream's ShouldContainerBeRestarted: a container
// of a pod not being deleted that never ran, is in state created or
// unknown, or exited and may restart.
func ShouldBeRestarted(c *corev1.Container, pod *corev1.Pod, st *podstate.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	s := st.Latest(c.Name)
	switch {
	case s == nil:
		return true
	case s.State == podstate.Running:
		return false
	case s.State == podstate.Unknown || s.State == podstate.Created:
		return true
	}
	return ShouldRestart(c, &pod.Spec, s.ExitCode)
}

func shouldRestartOnFailure(pod *corev1.Pod) bool {
	return pod.Spec.RestartPolicy != corev1.RestartPolicyNever
}

func succeeded(c *corev1.Container, st *podstate.Pod) bool {
	s := st.Latest(c.Name)
	return s != nil && s.State == podstate.Exited && s.ExitCode == 0
}

// HasAnyActiveRegularContainerStarted reports whether a regular container
// exists in the current sandbox.
func HasAnyActiveRegularContainerStarted(spec *corev1.PodSpec, st *podstate.Pod) bool {
	for i := range spec.Containers {
		if st.Active(spec.Containers[i].Name) != nil {
			return true
		}
	}
	return false
}

func hasAnyRegularContainerCreated(pod *corev1.Pod, st *podstate.Pod) bool {
	for i := range pod.Spec.Containers {
		s := st.Latest(pod.Spec.Containers[i].Name)
		if s != nil && s.State != podstate.Unknown {
			return true
		}
	}
	return false
}

// Compute returns the actions that bring the pod's containers to what its
// spec asks for. The pod is not being deleted (the worker kills a deleted
// pod without asking).
func Compute(pod *corev1.Pod, st *podstate.Pod, probes ProbeLookup) Actions {
	if probes == nil {
		probes = NoProbes
	}
	create, attempt, sandboxID, _ := SandboxChanged(pod, st)
	a := Actions{KillPod: create, CreateSandbox: create, SandboxID: sandboxID, Attempt: attempt}

	if create {
		if !shouldRestartOnFailure(pod) && attempt != 0 && st != nil && len(st.Containers) != 0 {
			// A pod that must not restart does not get a second sandbox.
			a.CreateSandbox = false
			return a
		}
		var start []int
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			runOnce := pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure
			if c.RestartPolicy != nil {
				runOnce = *c.RestartPolicy == corev1.ContainerRestartPolicyOnFailure
			}
			if runOnce && succeeded(c, st) {
				continue
			}
			start = append(start, i)
		}
		if len(start) == 0 && hasAnyRegularContainerCreated(pod, st) {
			a.CreateSandbox = false
			return a
		}
		if len(pod.Spec.InitContainers) != 0 {
			a.InitContainersToStart = []int{0}
			return a
		}
		a.ContainersToStart = start
		return a
	}

	// Ephemeral containers may start before the pod has initialized.
	for i := range pod.Spec.EphemeralContainers {
		if st.Latest(pod.Spec.EphemeralContainers[i].Name) == nil {
			a.EphemeralContainersToStart = append(a.EphemeralContainersToStart, i)
		}
	}
	initialized := computeInit(pod, st, probes, &a)
	if a.KillPod {
		a.EphemeralContainersToStart = nil
	}
	if a.KillPod || !initialized {
		return a
	}

	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		s := st.Latest(c.Name)
		if s == nil || s.State != podstate.Running {
			if ShouldBeRestarted(c, pod, st) {
				a.ContainersToStart = append(a.ContainersToStart, i)
				if s != nil && s.State == podstate.Unknown {
					a.ContainersToKill = append(a.ContainersToKill, Kill{ID: s.ID, Name: c.Name, Reason: KillReasonUnknown,
						Message: fmt.Sprintf("Container is in %q state, try killing it before restart", s.State)})
				}
			}
			continue
		}
		restart := shouldRestartOnFailure(pod)
		if c.RestartPolicy != nil {
			restart = *c.RestartPolicy != corev1.ContainerRestartPolicyNever
		}
		var message, reason string
		if s.Hash != "" && s.Hash != Hash(c) {
			message = fmt.Sprintf("Container %s definition changed", c.Name)
			restart = true
		} else if r, ok := probes(prober.Liveness, s.ID); ok && r == prober.Failure {
			message = fmt.Sprintf("Container %s failed liveness probe", c.Name)
			reason = KillReasonLiveness
		} else if r, ok := probes(prober.Startup, s.ID); ok && r == prober.Failure {
			message = fmt.Sprintf("Container %s failed startup probe", c.Name)
			reason = KillReasonStartup
		} else {
			keep++
			continue
		}
		if restart {
			message += ", will be restarted"
			a.ContainersToStart = append(a.ContainersToStart, i)
		}
		a.ContainersToKill = append(a.ContainersToKill, Kill{ID: s.ID, Name: c.Name, Reason: reason, Message: message})
	}
	if keep == 0 && len(a.ContainersToStart) == 0 {
		a.KillPod = true
		a.InitContainersToStart = nil
		a.EphemeralContainersToStart = nil
	}
	return a
}

// computeInit fills the init container actions and reports whether the
// pod has initialized (every regular init container succeeded and every
// sidecar started).
func computeInit(pod *corev1.Pod, st *podstate.Pod, probes ProbeLookup, a *Actions) bool {
	inits := pod.Spec.InitContainers
	if len(inits) == 0 {
		return true
	}
	initialized := HasAnyActiveRegularContainerStarted(&pod.Spec, st)
	previously := initialized
	for i := len(inits) - 1; i >= 0; i-- {
		c := &inits[i]
		s := st.Active(c.Name)
		if s == nil {
			if previously && IsSidecar(c) {
				a.InitContainersToStart = append(a.InitContainersToStart, i)
			}
			continue
		}
		if previously && !IsSidecar(c) {
			continue
		}
		switch s.State {
		case podstate.Created:
			a.InitContainersToStart = append(a.InitContainersToStart, i)
		case podstate.Running:
			if !IsSidecar(c) {
				break
			}
			if c.StartupProbe != nil {
				r, ok := probes(prober.Startup, s.ID)
				if !ok {
					break
				}
				if r != prober.Success {
					if r == prober.Failure {
						a.ContainersToKill = append(a.ContainersToKill, Kill{ID: s.ID, Name: c.Name, Reason: KillReasonStartup,
							Message: fmt.Sprintf("Init container %s failed startup probe", c.Name)})
						a.InitContainersToStart = append(a.InitContainersToStart, i)
					}
					break
				}
			}
			if i == len(inits)-1 {
				initialized = true
			} else if !previously {
				a.InitContainersToStart = append(a.InitContainersToStart, i+1)
			}
			if s.Hash != "" && s.Hash != Hash(c) {
				a.ContainersToKill = append(a.ContainersToKill, Kill{ID: s.ID, Name: c.Name,
					Message: fmt.Sprintf("Init container %s definition changed", c.Name)})
				a.InitContainersToStart = append(a.InitContainersToStart, i)
				break
			}
			if c.LivenessProbe != nil {
				if r, ok := probes(prober.Liveness, s.ID); ok && r == prober.Failure {
					a.ContainersToKill = append(a.ContainersToKill, Kill{ID: s.ID, Name: c.Name, Reason: KillReasonLiveness,
						Message: fmt.Sprintf("Init container %s failed liveness probe", c.Name)})
					a.InitContainersToStart = append(a.InitContainersToStart, i)
				}
			}
		case podstate.Exited:
			if IsSidecar(c) {
				a.InitContainersToStart = append(a.InitContainersToStart, i)
				break
			}
			if s.ExitCode != 0 {
				if !ShouldBeRestarted(c, pod, st) {
					a.KillPod = true
					a.InitContainersToStart = nil
					return false
				}
				a.InitContainersToStart = append(a.InitContainersToStart, i)
				break
			}
			if i == len(inits)-1 {
				initialized = true
			} else {
				a.InitContainersToStart = append(a.InitContainersToStart, i+1)
			}
		default:
			if IsSidecar(c) {
				a.ContainersToKill = append(a.ContainersToKill, Kill{ID: s.ID, Name: c.Name, Reason: KillReasonUnknown,
					Message: fmt.Sprintf("Init container is in %q state, try killing it before restart", s.State)})
				a.InitContainersToStart = append(a.InitContainersToStart, i)
				break
			}
			restart := shouldRestartOnFailure(pod)
			if c.RestartPolicy != nil {
				restart = *c.RestartPolicy != corev1.ContainerRestartPolicyNever
			}
			if !restart {
				a.KillPod = true
				a.InitContainersToStart = nil
				return false
			}
			a.ContainersToKill = append(a.ContainersToKill, Kill{ID: s.ID, Name: c.Name, Reason: KillReasonUnknown,
				Message: fmt.Sprintf("Init container is in %q state, try killing it before restart", s.State)})
			a.InitContainersToStart = append(a.InitContainersToStart, i)
		}
		// Every init container before this one has run.
		previously = true
	}
	if !previously {
		a.InitContainersToStart = append(a.InitContainersToStart, 0)
	}
	// Starting order: lowest index first.
	for l, r := 0, len(a.InitContainersToStart)-1; l < r; l, r = l+1, r-1 {
		a.InitContainersToStart[l], a.InitContainersToStart[r] = a.InitContainersToStart[r], a.InitContainersToStart[l]
	}
	return initialized
}

// Hash identifies a container's spec apart from its resources (which can
// change in place); a running container whose hash differs from its spec's
// is restarted.
func Hash(c *corev1.Container) string {
	cp := c.DeepCopy()
	cp.Resources = corev1.ResourceRequirements{}
	b, _ := json.Marshal(cp)
	h := fnv.New32a()
	_, _ = h.Write(b)
	return strconv.FormatUint(uint64(h.Sum32()), 16)
}
