// Package fakecri is a CRI runtime and image service in memory, with real
// semantics for what the kubelet uses: sandboxes and containers keep their
// state, labels filter lists, StartContainer runs a container until the
// test makes it exit (Exit) or the kubelet stops it. Methods the kubelet
// does not use panic (the embedded interfaces are nil).
package fakecri

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Runtime is the fake runtime service.
type Runtime struct {
	internalapi.RuntimeService

	mu         sync.Mutex
	next       int
	sandboxes  map[string]*runtimeapi.PodSandboxStatus
	sbConfigs  map[string]*runtimeapi.PodSandboxConfig
	containers map[string]*Container
	// stops counts StopPodSandbox calls (a real runtime tears the pod's
	// network down at each: CNI DEL).
	stops int
	// NetworkReady is reported in Status (default true).
	NetworkReady bool
	// ExecSyncFunc answers ExecSync (default: exit 0).
	ExecSyncFunc func(containerID string, cmd []string) ([]byte, []byte, error)
}

// Container is one fake container: its status and the config it was
// created with.
type Container struct {
	Status *runtimeapi.ContainerStatus
	Config *runtimeapi.ContainerConfig
	// SandboxID is the sandbox it runs in.
	SandboxID string
}

// NewRuntime returns an empty runtime.
func NewRuntime() *Runtime {
	return &Runtime{sandboxes: map[string]*runtimeapi.PodSandboxStatus{}, sbConfigs: map[string]*runtimeapi.PodSandboxConfig{},
		containers: map[string]*Container{}, NetworkReady: true}
}

func (r *Runtime) id(prefix string) string {
	r.next++
	return fmt.Sprintf("%s%04d", prefix, r.next)
}

func matches(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func (r *Runtime) Version(context.Context, string) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fake", RuntimeVersion: "1.0", RuntimeApiVersion: "v1"}, nil
}

func (r *Runtime) Status(context.Context, bool) (*runtimeapi.StatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: r.NetworkReady, Reason: "NetworkPluginNotReady", Message: "no CNI config"},
	}}}, nil
}

func (r *Runtime) UpdateRuntimeConfig(context.Context, *runtimeapi.RuntimeConfig) error { return nil }

func (r *Runtime) RunPodSandbox(_ context.Context, cfg *runtimeapi.PodSandboxConfig, _ string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.id("sb")
	st := &runtimeapi.PodSandboxStatus{
		Id: id, Metadata: cfg.Metadata, State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: time.Now().UnixNano(),
		Labels: cfg.Labels, Annotations: cfg.Annotations,
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()}},
	}
	if cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() != runtimeapi.NamespaceMode_NODE {
		st.Network = &runtimeapi.PodSandboxNetworkStatus{Ip: fmt.Sprintf("10.42.0.%d", 1+r.next%250)}
	}
	r.sandboxes[id] = st
	r.sbConfigs[id] = cfg
	return id, nil
}

func (r *Runtime) StopPodSandbox(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stops++
	if s, ok := r.sandboxes[id]; ok {
		s.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		for _, c := range r.containers {
			if c.SandboxID == id && c.Status.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				r.exitLocked(c, 137, "Error")
			}
		}
	}
	return nil
}

// SandboxStops is the number of StopPodSandbox calls so far.
func (r *Runtime) SandboxStops() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stops
}

func (r *Runtime) RemovePodSandbox(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.sandboxes, id)
	delete(r.sbConfigs, id)
	for cid, c := range r.containers {
		if c.SandboxID == id {
			delete(r.containers, cid)
		}
	}
	return nil
}

func (r *Runtime) PodSandboxStatus(_ context.Context, id string, _ bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sandboxes[id]
	if !ok {
		return nil, fmt.Errorf("sandbox %s not found", id)
	}
	return &runtimeapi.PodSandboxStatusResponse{Status: proto.Clone(s).(*runtimeapi.PodSandboxStatus)}, nil
}

func (r *Runtime) ListPodSandbox(_ context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runtimeapi.PodSandbox
	for _, s := range r.sandboxes {
		if f != nil && !matches(f.LabelSelector, s.Labels) {
			continue
		}
		out = append(out, &runtimeapi.PodSandbox{Id: s.Id, Metadata: s.Metadata, State: s.State, CreatedAt: s.CreatedAt, Labels: s.Labels, Annotations: s.Annotations})
	}
	return out, nil
}

func (r *Runtime) CreateContainer(_ context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.sandboxes[sandboxID]; !ok {
		return "", fmt.Errorf("sandbox %s not found", sandboxID)
	}
	id := r.id("c")
	r.containers[id] = &Container{SandboxID: sandboxID, Config: cfg, Status: &runtimeapi.ContainerStatus{
		Id: id, Metadata: cfg.Metadata, State: runtimeapi.ContainerState_CONTAINER_CREATED, CreatedAt: time.Now().UnixNano(),
		Image: cfg.Image, ImageRef: cfg.Image.GetImage(), Labels: cfg.Labels, Annotations: cfg.Annotations,
	}}
	if res := cfg.GetLinux().GetResources(); res != nil {
		r.containers[id].Status.Resources = &runtimeapi.ContainerResources{Linux: proto.Clone(res).(*runtimeapi.LinuxContainerResources)}
	}
	return id, nil
}

// UpdateContainerResources replaces a container's resources, as
// containerd does; its status reports them.
func (r *Runtime) UpdateContainerResources(_ context.Context, id string, res *runtimeapi.ContainerResources) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return fmt.Errorf("container %s not found", id)
	}
	c.Status.Resources = proto.Clone(res).(*runtimeapi.ContainerResources)
	return nil
}

func (r *Runtime) StartContainer(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return fmt.Errorf("container %s not found", id)
	}
	c.Status.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.Status.StartedAt = time.Now().UnixNano()
	return nil
}

func (r *Runtime) exitLocked(c *Container, code int32, reason string) {
	c.Status.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.Status.ExitCode = code
	c.Status.Reason = reason
	c.Status.FinishedAt = time.Now().UnixNano()
}

func (r *Runtime) StopContainer(_ context.Context, id string, _ int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.containers[id]; ok && c.Status.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.exitLocked(c, 137, "Error")
	}
	return nil
}

func (r *Runtime) RemoveContainer(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.containers, id)
	return nil
}

func (r *Runtime) ListContainers(_ context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runtimeapi.Container
	for _, c := range r.containers {
		if f != nil && !matches(f.LabelSelector, c.Status.Labels) {
			continue
		}
		out = append(out, &runtimeapi.Container{Id: c.Status.Id, PodSandboxId: c.SandboxID, Metadata: c.Status.Metadata, Image: c.Status.Image,
			ImageRef: c.Status.ImageRef, State: c.Status.State, CreatedAt: c.Status.CreatedAt, Labels: c.Status.Labels, Annotations: c.Status.Annotations})
	}
	return out, nil
}

func (r *Runtime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return nil, fmt.Errorf("container %s not found", id)
	}
	return &runtimeapi.ContainerStatusResponse{Status: proto.Clone(c.Status).(*runtimeapi.ContainerStatus)}, nil
}

func (r *Runtime) ExecSync(_ context.Context, id string, cmd []string, _ time.Duration) ([]byte, []byte, error) {
	if r.ExecSyncFunc != nil {
		return r.ExecSyncFunc(id, cmd)
	}
	return nil, nil, nil
}

// Exit makes every running container matching labels exit with code.
func (r *Runtime) Exit(labels map[string]string, code int32) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.containers {
		if matches(labels, c.Status.Labels) && c.Status.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			reason := "Completed"
			if code != 0 {
				reason = "Error"
			}
			r.exitLocked(c, code, reason)
			n++
		}
	}
	return n
}

// Containers returns copies of the containers matching labels.
func (r *Runtime) Containers(labels map[string]string) []Container {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Container
	for _, c := range r.containers {
		if matches(labels, c.Status.Labels) {
			out = append(out, Container{SandboxID: c.SandboxID, Config: c.Config,
				Status: proto.Clone(c.Status).(*runtimeapi.ContainerStatus)})
		}
	}
	return out
}

// SandboxStates returns the states of the sandboxes matching labels.
func (r *Runtime) SandboxStates(labels map[string]string) []runtimeapi.PodSandboxState {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []runtimeapi.PodSandboxState
	for _, s := range r.sandboxes {
		if matches(labels, s.Labels) {
			out = append(out, s.State)
		}
	}
	return out
}

// Images is the fake image service: a set of present images.
type Images struct {
	internalapi.ImageManagerService

	mu      sync.Mutex
	present map[string]bool
	// Pullable images can be pulled; pulling others fails.
	Pullable map[string]bool
	// Pinned images are listed as pinned (the sandbox image).
	Pinned map[string]bool
}

// NewImages returns an image service holding images.
func NewImages(images ...string) *Images {
	i := &Images{present: map[string]bool{}, Pullable: map[string]bool{}, Pinned: map[string]bool{}}
	for _, im := range images {
		i.present[im] = true
	}
	return i
}

func (i *Images) ImageStatus(_ context.Context, spec *runtimeapi.ImageSpec, _ bool) (*runtimeapi.ImageStatusResponse, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.present[spec.Image] {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	return &runtimeapi.ImageStatusResponse{Image: &runtimeapi.Image{Id: "sha256:" + spec.Image, RepoTags: []string{spec.Image}, Size: 1000}}, nil
}

func (i *Images) PullImage(_ context.Context, spec *runtimeapi.ImageSpec, _ *runtimeapi.AuthConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.Pullable[spec.Image] {
		return "", fmt.Errorf("failed to pull and unpack image %q: not found", spec.Image)
	}
	i.present[spec.Image] = true
	return "sha256:" + spec.Image, nil
}

// ListImages lists the present images: id "sha256:<name>", the name as
// its tag, 1000 bytes, pinned when in Pinned.
func (i *Images) ListImages(_ context.Context, _ *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	var out []*runtimeapi.Image
	for name := range i.present {
		out = append(out, &runtimeapi.Image{Id: "sha256:" + name, RepoTags: []string{name}, Size: 1000, Pinned: i.Pinned[name]})
	}
	return out, nil
}

// RemoveImage removes an image by id or name.
func (i *Images) RemoveImage(_ context.Context, spec *runtimeapi.ImageSpec) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	name := spec.GetImage()
	if len(name) > len("sha256:") && name[:len("sha256:")] == "sha256:" {
		name = name[len("sha256:"):]
	}
	delete(i.present, name)
	return nil
}

// Present reports whether the named image is present.
func (i *Images) Present(name string) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.present[name]
}

// ImageFsInfo reports no filesystem (the kubelet falls back to its own).
func (i *Images) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{}, nil
}

// ListContainerStats reports each container with no usage.
func (r *Runtime) ListContainerStats(_ context.Context, f *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runtimeapi.ContainerStats
	for _, c := range r.containers {
		out = append(out, &runtimeapi.ContainerStats{Attributes: &runtimeapi.ContainerAttributes{Id: c.Status.Id, Metadata: c.Status.Metadata, Labels: c.Status.Labels}})
	}
	return out, nil
}

// AddExited adds an exited container created at createdAt in the sandbox
// (an older instance, as a runtime keeps after restarts).
func (r *Runtime) AddExited(sandboxID string, cfg *runtimeapi.ContainerConfig, createdAt time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.id("c")
	r.containers[id] = &Container{SandboxID: sandboxID, Config: cfg, Status: &runtimeapi.ContainerStatus{
		Id: id, Metadata: cfg.Metadata, State: runtimeapi.ContainerState_CONTAINER_EXITED, CreatedAt: createdAt.UnixNano(),
		StartedAt: createdAt.UnixNano(), FinishedAt: createdAt.Add(time.Second).UnixNano(), ExitCode: 1, Reason: "Error",
		Image: cfg.Image, ImageRef: cfg.Image.GetImage(), Labels: cfg.Labels, Annotations: cfg.Annotations,
	}}
	return id
}
