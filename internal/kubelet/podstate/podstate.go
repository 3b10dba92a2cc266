// Package podstate holds what the kubelet observed of one pod in the
// container runtime: its sandboxes and containers, newest first. The pure
// parts (plan, podstatus) decide from it; the runtime glue fills it from CRI.
package podstate

import "time"

// ContainerState is a container's state as the runtime reports it.
type ContainerState string

const (
	Created ContainerState = "created"
	Running ContainerState = "running"
	Exited  ContainerState = "exited"
	Unknown ContainerState = "unknown"
)

// Container is one container instance (one attempt of a spec container).
type Container struct {
	// ID is the runtime's id; ContainerID is the API form "<runtime>://<id>".
	ID          string
	ContainerID string
	Name        string
	// SandboxID is the sandbox the container runs in.
	SandboxID string
	// Attempt is the restart count of this instance (0 for the first).
	Attempt    int
	State      ContainerState
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	ExitCode   int32
	// Reason and Message as the runtime gives them (Completed, Error,
	// OOMKilled, ...).
	Reason  string
	Message string
	// Image is the spec image; ImageRef the resolved image id.
	Image    string
	ImageRef string
	// Hash is the hash of the spec the container was created from; a
	// running container whose spec hash changed is restarted.
	Hash string
}

// Sandbox is one pod sandbox instance.
type Sandbox struct {
	ID        string
	Attempt   int
	Ready     bool
	CreatedAt time.Time
	// IPs are the pod's addresses, primary first (none for host network).
	IPs []string
	// HostNetwork is the namespace mode the sandbox was created with.
	HostNetwork bool
}

// Pod is the observed runtime state of one pod.
type Pod struct {
	// Sandboxes, newest first.
	Sandboxes []Sandbox
	// Containers, all instances, newest first.
	Containers []Container
}

// Latest returns the newest instance of the named container, or nil.
func (p *Pod) Latest(name string) *Container {
	if p == nil {
		return nil
	}
	for i := range p.Containers {
		if p.Containers[i].Name == name {
			return &p.Containers[i]
		}
	}
	return nil
}

// Previous returns the second newest instance of the named container, or nil.
func (p *Pod) Previous(name string) *Container {
	if p == nil {
		return nil
	}
	seen := false
	for i := range p.Containers {
		if p.Containers[i].Name == name {
			if seen {
				return &p.Containers[i]
			}
			seen = true
		}
	}
	return nil
}

// RunningContainers counts the containers in state running.
func (p *Pod) RunningContainers() int {
	if p == nil {
		return 0
	}
	n := 0
	for _, c := range p.Containers {
		if c.State == Running {
			n++
		}
	}
	return n
}

// LatestSandbox returns the newest sandbox, or nil.
func (p *Pod) LatestSandbox() *Sandbox {
	if p == nil || len(p.Sandboxes) == 0 {
		return nil
	}
	return &p.Sandboxes[0]
}

// Active returns the newest instance of the named container if it belongs
// to the newest sandbox, or nil (upstream's "active" container statuses).
func (p *Pod) Active(name string) *Container {
	c := p.Latest(name)
	sb := p.LatestSandbox()
	if c == nil || sb == nil || c.SandboxID != sb.ID {
		return nil
	}
	return c
}
