package eviction

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Reason is the evicted pod's status reason and its event's reason.
const Reason = "Evicted"

// SystemCriticalPriority is the priority from which a pod is critical and
// never evicted (upstream's scheduling.SystemCriticalPriority).
const SystemCriticalPriority = 2 * 1000000000

// ContainerStats is one container's usage.
type ContainerStats struct {
	Name string
	// Memory is the working set; Disk the writable layer plus logs.
	Memory int64
	Disk   int64
}

// PodStats is one pod's usage as the ranking needs it.
type PodStats struct {
	// Memory is the pod's working set in bytes.
	Memory int64
	// Disk is what the pod uses of the node's disk: writable layers, logs
	// and local volumes (emptyDir and the like) in bytes; Inodes likewise.
	Disk   int64
	Inodes int64
	// Processes is the number of processes (PIDs) in the pod.
	Processes int64
	// Containers, for the message naming those above their requests.
	Containers []ContainerStats
}

// Candidate is a pod that may be evicted, with its usage (nil when none
// was found: such pods go first, as upstream) and its requests.
type Candidate struct {
	Pod      *corev1.Pod
	Stats    *PodStats
	Requests corev1.ResourceList
}

type cmpFunc func(a, b *Candidate) int

// Rank orders the candidates for eviction to reclaim the signal's
// resource, the first to go first: for memory, pods using more than they
// request first, then lower priority, then more usage above request; for
// disk the same with disk; for PIDs lower priority, then more processes.
func Rank(s Signal, cands []Candidate) {
	var order []cmpFunc
	switch ResourceOf(s) {
	case corev1.ResourceMemory:
		order = []cmpFunc{exceeds(memUse, corev1.ResourceMemory), priority, aboveRequest(memUse, corev1.ResourceMemory)}
	case corev1.ResourceEphemeralStorage:
		order = []cmpFunc{exceeds(diskUse, corev1.ResourceEphemeralStorage), priority, aboveRequest(diskUse, corev1.ResourceEphemeralStorage)}
	case ResourceInodes:
		order = []cmpFunc{priority, aboveRequest(inodeUse, "")}
	case ResourcePIDs:
		order = []cmpFunc{priority, aboveRequest(procUse, "")}
	default:
		return
	}
	sort.SliceStable(cands, func(i, j int) bool {
		for _, f := range order {
			if c := f(&cands[i], &cands[j]); c != 0 {
				return c < 0
			}
		}
		return false
	})
}

func memUse(p *PodStats) int64   { return p.Memory }
func diskUse(p *PodStats) int64  { return p.Disk }
func inodeUse(p *PodStats) int64 { return p.Inodes }
func procUse(p *PodStats) int64  { return p.Processes }

func request(c *Candidate, r corev1.ResourceName) int64 {
	if r == "" {
		return 0
	}
	q := c.Requests[r]
	return q.Value()
}

// cmpBool puts true first.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// statsFirst puts the candidate without stats first; ok is false when
// either has none.
func statsFirst(a, b *Candidate) (int, bool) {
	if a.Stats == nil || b.Stats == nil {
		return cmpBool(a.Stats == nil, b.Stats == nil), false
	}
	return 0, true
}

func exceeds(use func(*PodStats) int64, r corev1.ResourceName) cmpFunc {
	return func(a, b *Candidate) int {
		if c, ok := statsFirst(a, b); !ok {
			return c
		}
		return cmpBool(use(a.Stats) > request(a, r), use(b.Stats) > request(b, r))
	}
}

func priority(a, b *Candidate) int {
	pa, pb := podPriority(a.Pod), podPriority(b.Pod)
	switch {
	case pa == pb:
		return 0
	case pa < pb:
		return -1
	}
	return 1
}

func podPriority(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

func aboveRequest(use func(*PodStats) int64, r corev1.ResourceName) cmpFunc {
	return func(a, b *Candidate) int {
		if c, ok := statsFirst(a, b); !ok {
			return c
		}
		ua, ub := use(a.Stats)-request(a, r), use(b.Stats)-request(b, r)
		switch {
		case ua == ub:
			return 0
		case ua > ub:
			return -1
		}
		return 1
	}
}

// IsCritical reports a pod the kubelet never evicts: a static or mirror
// pod, or one of system-critical priority.
func IsCritical(pod *corev1.Pod) bool {
	if src := pod.Annotations["kubernetes.io/config.source"]; src != "" && src != "api" {
		return true
	}
	if _, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= SystemCriticalPriority
}

// Message is the evicted pod's status message and event text, as
// upstream words it: "The node was low on resource: memory. Threshold
// quantity: 100Mi, available: 90Mi. Container c was using 200Mi, request
// is 0, has larger consumption of memory. "
func Message(t Threshold, obs Observations, c Candidate) string {
	res := ResourceOf(t.Signal)
	msg := fmt.Sprintf("The node was low on resource: %v. ", res)
	if o, ok := obs[t.Signal]; ok {
		format := resource.BinarySI
		if res == ResourceInodes || res == ResourcePIDs {
			format = resource.DecimalSI
		}
		msg += fmt.Sprintf("Threshold quantity: %v, available: %v. ",
			resource.NewQuantity(t.Value(o.Capacity), format), resource.NewQuantity(o.Available, format))
	}
	if c.Stats == nil || (res != corev1.ResourceMemory && res != corev1.ResourceEphemeralStorage) {
		return msg
	}
	specs := append(append([]corev1.Container{}, c.Pod.Spec.Containers...), c.Pod.Spec.InitContainers...)
	for _, cs := range c.Stats.Containers {
		for _, spec := range specs {
			if spec.Name != cs.Name {
				continue
			}
			req := spec.Resources.Requests[res]
			use := cs.Memory
			if res == corev1.ResourceEphemeralStorage {
				use = cs.Disk
			}
			usage := resource.NewQuantity(use, resource.BinarySI)
			if usage.Cmp(req) > 0 {
				msg += fmt.Sprintf("Container %s was using %s, request is %s, has larger consumption of %v. ", spec.Name, usage.String(), req.String(), res)
			}
			break
		}
	}
	return msg
}

// Admit decides, as upstream's eviction admission handler, whether a new
// pod may start on a node with the given pressure conditions: critical
// pods always; under memory pressure alone, pods that are not BestEffort
// or that tolerate the memory-pressure taint; under any other pressure,
// none. A refused pod gets reason Evicted and the message.
func Admit(conditions []corev1.NodeConditionType, pod *corev1.Pod, qos corev1.PodQOSClass) (bool, string) {
	if len(conditions) == 0 || IsCritical(pod) {
		return true, ""
	}
	if len(conditions) == 1 && conditions[0] == corev1.NodeMemoryPressure {
		if qos != corev1.PodQOSBestEffort {
			return true, ""
		}
		taint := &corev1.Taint{Key: corev1.TaintNodeMemoryPressure, Effect: corev1.TaintEffectNoSchedule}
		for i := range pod.Spec.Tolerations {
			if tolerates(&pod.Spec.Tolerations[i], taint) {
				return true, ""
			}
		}
	}
	return false, fmt.Sprintf("The node had condition: %v. ", conditions)
}

func tolerates(t *corev1.Toleration, taint *corev1.Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case corev1.TolerationOpExists:
		return true
	case "", corev1.TolerationOpEqual:
		return t.Key != "" && t.Value == taint.Value
	}
	return false
}

// Evicted reports a status the kubelet wrote when it evicted the pod.
func Evicted(s *corev1.PodStatus) bool {
	return s.Phase == corev1.PodFailed && s.Reason == Reason
}
