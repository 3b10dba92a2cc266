package pod

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// nodeUnreachablePodReason is the status reason the node lifecycle
// controller gives pods on a node that stopped answering.
const nodeUnreachablePodReason = "NodeLost"

// TableColumns are the columns of `kubectl get pods` (-o wide adds the
// priority-1 ones).
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	status := corev1.PodStatus{}.SwaggerDoc()
	spec := corev1.PodSpec{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Ready", Type: "string", Description: "The aggregate readiness state of this pod for accepting traffic."},
		{Name: "Status", Type: "string", Description: "The aggregate status of the containers in this pod."},
		{Name: "Restarts", Type: "string", Description: "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
		{Name: "IP", Type: "string", Priority: 1, Description: status["podIP"]},
		{Name: "Node", Type: "string", Priority: 1, Description: spec["nodeName"]},
		{Name: "Nominated Node", Type: "string", Priority: 1, Description: status["nominatedNodeName"]},
		{Name: "Readiness Gates", Type: "string", Priority: 1, Description: spec["readinessGates"]},
	}
}

// TableRow renders one pod the way kubectl shows it.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("pod table: unexpected object %T", obj)
	}
	s := Summarize(pod)
	restarts := strconv.Itoa(s.Restarts)
	if s.Restarts != 0 && !s.LastRestart.IsZero() {
		restarts = fmt.Sprintf("%d (%s ago)", s.Restarts, registry.Age(s.LastRestart))
	}
	podIP := "<none>"
	if len(pod.Status.PodIPs) > 0 && pod.Status.PodIPs[0].IP != "" {
		podIP = pod.Status.PodIPs[0].IP
	}
	return []interface{}{
		pod.Name,
		fmt.Sprintf("%d/%d", s.Ready, s.Total),
		s.Status,
		restarts,
		registry.Age(pod.CreationTimestamp),
		podIP,
		orNone(pod.Spec.NodeName),
		orNone(pod.Status.NominatedNodeName),
		readinessGates(pod),
	}, nil
}

// Summary is what kubectl's pod table says about a pod.
type Summary struct {
	Ready, Total int
	// Status is the STATUS column: the phase, or a more telling reason
	// (ContainerCreating, CrashLoopBackOff, Init:0/1, Completed, Terminating...).
	Status      string
	Restarts    int
	LastRestart metav1.Time
}

// Summarize computes the READY, STATUS and RESTARTS columns of a pod.
func Summarize(pod *corev1.Pod) Summary {
	var s Summary
	s.Total = len(pod.Spec.Containers)
	s.Status = string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		s.Status = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			s.Status = corev1.PodReasonSchedulingGated
		}
	}

	sidecars := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
			s.Total++
		}
	}

	var sidecarRestarts int
	var sidecarLastRestart metav1.Time
	initializing := false
	for i, c := range pod.Status.InitContainerStatuses {
		s.Restarts += int(c.RestartCount)
		laterRestart(&s.LastRestart, c)
		if sidecars[c.Name] {
			sidecarRestarts += int(c.RestartCount)
			laterRestart(&sidecarLastRestart, c)
		}
		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode == 0:
			continue
		case sidecars[c.Name] && c.Started != nil && *c.Started:
			if c.Ready {
				s.Ready++
			}
			continue
		case c.State.Terminated != nil:
			t := c.State.Terminated
			switch {
			case t.Reason != "":
				s.Status = "Init:" + t.Reason
			case t.Signal != 0:
				s.Status = fmt.Sprintf("Init:Signal:%d", t.Signal)
			default:
				s.Status = fmt.Sprintf("Init:ExitCode:%d", t.ExitCode)
			}
		case c.State.Waiting != nil && c.State.Waiting.Reason != "" && c.State.Waiting.Reason != "PodInitializing":
			s.Status = "Init:" + c.State.Waiting.Reason
		default:
			s.Status = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		initializing = true
		break
	}

	if !initializing || hasCondition(pod, corev1.PodInitialized) {
		s.Restarts = sidecarRestarts
		s.LastRestart = sidecarLastRestart
		hasRunning := false
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			c := pod.Status.ContainerStatuses[i]
			s.Restarts += int(c.RestartCount)
			laterRestart(&s.LastRestart, c)
			switch {
			case c.State.Waiting != nil && c.State.Waiting.Reason != "":
				s.Status = c.State.Waiting.Reason
			case c.State.Terminated != nil && c.State.Terminated.Reason != "":
				s.Status = c.State.Terminated.Reason
			case c.State.Terminated != nil && c.State.Terminated.Signal != 0:
				s.Status = fmt.Sprintf("Signal:%d", c.State.Terminated.Signal)
			case c.State.Terminated != nil:
				s.Status = fmt.Sprintf("ExitCode:%d", c.State.Terminated.ExitCode)
			case c.Ready && c.State.Running != nil:
				hasRunning = true
				s.Ready++
			}
		}
		// A container still running means the pod has not completed.
		if s.Status == "Completed" && hasRunning {
			if hasCondition(pod, corev1.PodReady) {
				s.Status = "Running"
			} else {
				s.Status = "NotReady"
			}
		}
	}

	switch {
	case pod.DeletionTimestamp != nil && pod.Status.Reason == nodeUnreachablePodReason:
		s.Status = "Unknown"
	case pod.DeletionTimestamp != nil && !isTerminal(pod.Status.Phase):
		s.Status = "Terminating"
	}
	return s
}

func laterRestart(latest *metav1.Time, c corev1.ContainerStatus) {
	if t := c.LastTerminationState.Terminated; t != nil && latest.Before(&t.FinishedAt) {
		*latest = t.FinishedAt
	}
}

func hasCondition(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func readinessGates(pod *corev1.Pod) string {
	if len(pod.Spec.ReadinessGates) == 0 {
		return "<none>"
	}
	trueCount := 0
	for _, g := range pod.Spec.ReadinessGates {
		for _, c := range pod.Status.Conditions {
			if c.Type == g.ConditionType {
				if c.Status == corev1.ConditionTrue {
					trueCount++
				}
				break
			}
		}
	}
	return fmt.Sprintf("%d/%d", trueCount, len(pod.Spec.ReadinessGates))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
