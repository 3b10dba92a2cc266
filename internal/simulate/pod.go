package simulate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RunSecondsAnnotation on a pod with restartPolicy Never or OnFailure makes
// the simulated node finish it (phase Succeeded, exit code 0) that many
// seconds after it started. Handy for Jobs.
const RunSecondsAnnotation = "simulate.skiff.sh/run-seconds"

// ExitCodeAnnotation, beside RunSecondsAnnotation, makes the pod's
// containers exit with that code when its time is up: a non-zero code ends
// the pod Failed (reason Error) instead of Succeeded. Handy for Job
// backoff and pod failure policies.
const ExitCodeAnnotation = "simulate.skiff.sh/exit-code"

// Pod condition and reason names the kubelet uses.
const (
	podReadyToStartContainers corev1.PodConditionType = "PodReadyToStartContainers"
	reasonPodCompleted                                = "PodCompleted"
)

func resourceInt(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.DecimalSI) }

// ipPool hands out the pod IPs of one node's /24: .2 to .254 (.1 is the
// bridge's, as with a CNI bridge). It allocates round-robin, so that a
// freed IP is not reused at once, as CNI's host-local allocator does.
type ipPool struct {
	base  [4]byte
	owner [256]string // pod key per last octet; "" is free
	next  int
}

const firstPodHost, lastPodHost = 2, 254

func newIPPool(cidr string) (*ipPool, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil || !p.Addr().Is4() || p.Bits() > 24 {
		return nil, fmt.Errorf("pod CIDR %q is not an IPv4 /24 or wider", cidr)
	}
	return &ipPool{base: p.Masked().Addr().As4(), next: firstPodHost}, nil
}

func (p *ipPool) addr(host int) netip.Addr {
	b := p.base
	b[3] = byte(host)
	return netip.AddrFrom4(b)
}

// allocate returns the IP of key, giving it a free one if it has none.
func (p *ipPool) allocate(key string) (netip.Addr, error) {
	for h := firstPodHost; h <= lastPodHost; h++ {
		if p.owner[h] == key {
			return p.addr(h), nil
		}
	}
	for range lastPodHost - firstPodHost + 1 {
		h := p.next
		p.next++
		if p.next > lastPodHost {
			p.next = firstPodHost
		}
		if p.owner[h] == "" {
			p.owner[h] = key
			return p.addr(h), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("no free pod IP in %s/24", p.addr(0))
}

// reserve records that key holds ip (a pod that was already Running when
// the simulator started). It reports false when ip is outside the pool or
// held by another pod.
func (p *ipPool) reserve(key string, ip netip.Addr) bool {
	b := ip.As4()
	if !ip.Is4() || [3]byte(b[:3]) != [3]byte(p.base[:3]) || b[3] < firstPodHost || b[3] > lastPodHost {
		return false
	}
	if o := p.owner[b[3]]; o != "" && o != key {
		return false
	}
	p.owner[b[3]] = key
	return true
}

// release frees the IP of key, if it has one.
func (p *ipPool) release(key string) {
	for h := firstPodHost; h <= lastPodHost; h++ {
		if p.owner[h] == key {
			p.owner[h] = ""
		}
	}
}

// setCondition sets a pod condition, keeping lastTransitionTime when the
// status does not change.
func setCondition(s *corev1.PodStatus, c corev1.PodCondition) {
	for i := range s.Conditions {
		if s.Conditions[i].Type != c.Type {
			continue
		}
		if s.Conditions[i].Status == c.Status {
			c.LastTransitionTime = s.Conditions[i].LastTransitionTime
		}
		s.Conditions[i] = c
		return
	}
	s.Conditions = append(s.Conditions, c)
}

// runningStatus is the status of pod once its (simulated) containers run:
// every condition True, init containers completed, containers running and
// ready. Probes and readiness gates are not simulated.
func runningStatus(pod *corev1.Pod, hostIP, podIP string, now metav1.Time) corev1.PodStatus {
	s := *pod.Status.DeepCopy()
	s.Phase = corev1.PodRunning
	s.Reason, s.Message = "", ""
	s.ObservedGeneration = pod.Generation
	s.HostIP, s.HostIPs = hostIP, []corev1.HostIP{{IP: hostIP}}
	s.PodIP, s.PodIPs = podIP, []corev1.PodIP{{IP: podIP}}
	if s.StartTime == nil {
		s.StartTime = &now
	}
	for _, t := range []corev1.PodConditionType{podReadyToStartContainers, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		setCondition(&s, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, ObservedGeneration: pod.Generation, LastTransitionTime: now})
	}
	started := *s.StartTime
	s.InitContainerStatuses = nil
	for _, c := range pod.Spec.InitContainers {
		cs := containerStatus(pod, c, started)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			// A sidecar keeps running.
			s.InitContainerStatuses = append(s.InitContainerStatuses, cs)
			continue
		}
		cs.Ready, cs.Started = true, new(false)
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: started, ContainerID: cs.ContainerID,
		}}
		s.InitContainerStatuses = append(s.InitContainerStatuses, cs)
	}
	s.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		s.ContainerStatuses = append(s.ContainerStatuses, containerStatus(pod, c, started))
	}
	return s
}

func containerStatus(pod *corev1.Pod, c corev1.Container, started metav1.Time) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name:         c.Name,
		Image:        c.Image,
		ImageID:      "simulated://sha256:" + hash(c.Image),
		ContainerID:  "simulated://" + hash(string(pod.UID)+"/"+c.Name),
		Ready:        true,
		Started:      new(true),
		RestartCount: 0,
		State:        corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
	}
}

// succeededStatus is the status of a Running pod whose containers all
// exited 0 at now.
func succeededStatus(pod *corev1.Pod, now metav1.Time) corev1.PodStatus {
	return finishedStatus(pod, now, 0)
}

// exitCode is the pod's ExitCodeAnnotation, 0 when absent or malformed.
func exitCode(pod *corev1.Pod) int32 {
	n, err := strconv.ParseInt(pod.Annotations[ExitCodeAnnotation], 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}

// finishedStatus is the status of a Running pod whose containers all
// exited with code at now: Succeeded for 0, else Failed.
func finishedStatus(pod *corev1.Pod, now metav1.Time, code int32) corev1.PodStatus {
	s := *pod.Status.DeepCopy()
	s.Phase = corev1.PodSucceeded
	reason := "Completed"
	if code != 0 {
		s.Phase = corev1.PodFailed
		reason = "Error"
	}
	s.ObservedGeneration = pod.Generation
	for _, t := range []corev1.PodConditionType{podReadyToStartContainers, corev1.PodReady, corev1.ContainersReady} {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, ObservedGeneration: pod.Generation, LastTransitionTime: now}
		if t != podReadyToStartContainers {
			c.Reason = reasonPodCompleted
		}
		setCondition(&s, c)
	}
	for i := range s.ContainerStatuses {
		cs := &s.ContainerStatuses[i]
		started := now
		if cs.State.Running != nil {
			started = cs.State.Running.StartedAt
		}
		cs.Ready, cs.Started = false, new(false)
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: reason, StartedAt: started, FinishedAt: now, ContainerID: cs.ContainerID,
		}}
	}
	return s
}

// runFor is how long a pod runs before it succeeds, from its
// RunSecondsAnnotation; ok is false for pods that run until deleted.
func runFor(pod *corev1.Pod) (d time.Duration, ok bool) {
	if pod.Spec.RestartPolicy == corev1.RestartPolicyAlways || pod.Spec.RestartPolicy == "" {
		return 0, false
	}
	v, found := pod.Annotations[RunSecondsAnnotation]
	if !found {
		return 0, false
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || secs < 0 {
		return 0, false
	}
	return time.Duration(secs * float64(time.Second)), true
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
