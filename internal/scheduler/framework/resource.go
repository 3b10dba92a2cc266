package framework

import (
	v1 "k8s.io/api/core/v1"
)

// Default requests the scheduler assumes, for scoring only, for a container
// that requests no CPU or memory (upstream's non-zero defaults), so that
// best-effort pods still spread.
const (
	DefaultMilliCPURequest int64 = 100               // 0.1 core
	DefaultMemoryRequest   int64 = 200 * 1024 * 1024 // 200 MiB
)

// Resource is a set of resource amounts in the scheduler's integer units:
// millicores, bytes, and counts.
type Resource struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	// AllowedPodNumber is the "pods" resource, used for allocatable only.
	AllowedPodNumber int
	// ScalarResources holds extended resources, hugepages and other
	// countable resources.
	ScalarResources map[v1.ResourceName]int64
}

// NewResource converts a ResourceList.
func NewResource(rl v1.ResourceList) *Resource {
	r := &Resource{}
	r.Add(rl)
	return r
}

// Add adds the amounts of rl.
func (r *Resource) Add(rl v1.ResourceList) {
	for name, q := range rl {
		switch name {
		case v1.ResourceCPU:
			r.MilliCPU += q.MilliValue()
		case v1.ResourceMemory:
			r.Memory += q.Value()
		case v1.ResourceEphemeralStorage:
			r.EphemeralStorage += q.Value()
		case v1.ResourcePods:
			r.AllowedPodNumber += int(q.Value())
		default:
			r.AddScalar(name, q.Value())
		}
	}
}

// AddScalar adds n of a scalar resource.
func (r *Resource) AddScalar(name v1.ResourceName, n int64) {
	if r.ScalarResources == nil {
		r.ScalarResources = map[v1.ResourceName]int64{}
	}
	r.ScalarResources[name] += n
}

// AddResource adds o to r.
func (r *Resource) AddResource(o *Resource) {
	r.MilliCPU += o.MilliCPU
	r.Memory += o.Memory
	r.EphemeralStorage += o.EphemeralStorage
	r.AllowedPodNumber += o.AllowedPodNumber
	for k, v := range o.ScalarResources {
		r.AddScalar(k, v)
	}
}

// SubResource subtracts o from r.
func (r *Resource) SubResource(o *Resource) {
	r.MilliCPU -= o.MilliCPU
	r.Memory -= o.Memory
	r.EphemeralStorage -= o.EphemeralStorage
	r.AllowedPodNumber -= o.AllowedPodNumber
	for k, v := range o.ScalarResources {
		r.AddScalar(k, -v)
	}
}

// SetMax raises each amount of r to that of o where o is larger.
func (r *Resource) SetMax(o *Resource) {
	r.MilliCPU = max(r.MilliCPU, o.MilliCPU)
	r.Memory = max(r.Memory, o.Memory)
	r.EphemeralStorage = max(r.EphemeralStorage, o.EphemeralStorage)
	r.AllowedPodNumber = max(r.AllowedPodNumber, o.AllowedPodNumber)
	for k, v := range o.ScalarResources {
		if r.ScalarResources[k] < v {
			if r.ScalarResources == nil {
				r.ScalarResources = map[v1.ResourceName]int64{}
			}
			r.ScalarResources[k] = v
		}
	}
}

// Clone returns a deep copy.
func (r *Resource) Clone() *Resource {
	out := *r
	if r.ScalarResources != nil {
		out.ScalarResources = make(map[v1.ResourceName]int64, len(r.ScalarResources))
		for k, v := range r.ScalarResources {
			out.ScalarResources[k] = v
		}
	}
	return &out
}

// IsZero reports whether nothing is requested (ignoring pods).
func (r *Resource) IsZero() bool {
	if r.MilliCPU != 0 || r.Memory != 0 || r.EphemeralStorage != 0 {
		return false
	}
	for _, v := range r.ScalarResources {
		if v != 0 {
			return false
		}
	}
	return true
}

// Get returns the amount of one resource in scheduler units.
func (r *Resource) Get(name v1.ResourceName) int64 {
	switch name {
	case v1.ResourceCPU:
		return r.MilliCPU
	case v1.ResourceMemory:
		return r.Memory
	case v1.ResourceEphemeralStorage:
		return r.EphemeralStorage
	case v1.ResourcePods:
		return int64(r.AllowedPodNumber)
	default:
		return r.ScalarResources[name]
	}
}

// RequestsOptions tune PodRequests.
type RequestsOptions struct {
	// NonZero fills a container's missing CPU and memory requests with
	// DefaultMilliCPURequest and DefaultMemoryRequest, as upstream does for
	// scoring.
	NonZero bool
}

// PodRequests computes what a pod reserves on a node, as upstream does:
//
//   - the sum of the regular containers, plus the restartable (sidecar)
//     init containers, which keep running;
//   - at least, for each resource, the largest need while init containers
//     run: an ordinary init container runs beside the sidecars started
//     before it;
//   - pod-level requests (spec.resources), where set, replace the CPU and
//     memory computed from containers;
//   - plus spec.overhead.
func PodRequests(pod *v1.Pod, opts RequestsOptions) *Resource {
	reqs := &Resource{}
	for i := range pod.Spec.Containers {
		reqs.AddResource(containerRequests(&pod.Spec.Containers[i], opts))
	}
	sidecars := &Resource{}
	initMax := &Resource{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		r := containerRequests(c, opts)
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			sidecars.AddResource(r)
			r = sidecars.Clone()
		} else {
			r.AddResource(sidecars)
		}
		initMax.SetMax(r)
	}
	reqs.AddResource(sidecars)
	reqs.SetMax(initMax)
	if pod.Spec.Resources != nil {
		if q, ok := pod.Spec.Resources.Requests[v1.ResourceCPU]; ok {
			reqs.MilliCPU = q.MilliValue()
		}
		if q, ok := pod.Spec.Resources.Requests[v1.ResourceMemory]; ok {
			reqs.Memory = q.Value()
		}
	}
	if pod.Spec.Overhead != nil {
		reqs.Add(pod.Spec.Overhead)
	}
	reqs.AllowedPodNumber = 0
	return reqs
}

func containerRequests(c *v1.Container, opts RequestsOptions) *Resource {
	r := NewResource(c.Resources.Requests)
	if opts.NonZero {
		if _, ok := c.Resources.Requests[v1.ResourceCPU]; !ok {
			r.MilliCPU = DefaultMilliCPURequest
		}
		if _, ok := c.Resources.Requests[v1.ResourceMemory]; !ok {
			r.Memory = DefaultMemoryRequest
		}
	}
	return r
}
