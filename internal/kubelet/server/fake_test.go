package server

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeRuntime is a CRI runtime that keeps containers, sandboxes and stats
// in memory. Methods the server does not use panic (nil embedded
// interface), so a test notices a new dependency at once.
type fakeRuntime struct {
	internalapi.RuntimeService

	mu         sync.Mutex
	containers map[string]*runtimeapi.ContainerStatus
	sandboxOf  map[string]string
	sandboxes  map[string]*runtimeapi.PodSandbox
	stats      map[string]*runtimeapi.ContainerStats
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{
		containers: map[string]*runtimeapi.ContainerStatus{}, sandboxOf: map[string]string{},
		sandboxes: map[string]*runtimeapi.PodSandbox{}, stats: map[string]*runtimeapi.ContainerStats{},
	}
}

func (f *fakeRuntime) addSandbox(sb *runtimeapi.PodSandbox) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sandboxes[sb.Id] = sb
}

func (f *fakeRuntime) addContainer(sandbox string, c *runtimeapi.ContainerStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.containers[c.Id] = c
	f.sandboxOf[c.Id] = sandbox
}

func (f *fakeRuntime) setState(id string, st runtimeapi.ContainerState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.containers[id].State = st
}

func matches(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func (f *fakeRuntime) ListContainers(_ context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*runtimeapi.Container
	for id, c := range f.containers {
		if filter != nil && ((filter.State != nil && filter.State.State != c.State) || !matches(filter.LabelSelector, c.Labels)) {
			continue
		}
		out = append(out, &runtimeapi.Container{Id: id, PodSandboxId: f.sandboxOf[id], Metadata: c.Metadata, Image: c.Image, State: c.State, CreatedAt: c.CreatedAt, Labels: c.Labels})
	}
	return out, nil
}

func (f *fakeRuntime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.containers[id]
	if !ok {
		return nil, fmt.Errorf("container %q not found", id)
	}
	return &runtimeapi.ContainerStatusResponse{Status: proto.Clone(c).(*runtimeapi.ContainerStatus)}, nil
}

func (f *fakeRuntime) ListPodSandbox(_ context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*runtimeapi.PodSandbox
	for _, sb := range f.sandboxes {
		if filter != nil && ((filter.State != nil && filter.State.State != sb.State) || !matches(filter.LabelSelector, sb.Labels)) {
			continue
		}
		out = append(out, sb)
	}
	return out, nil
}

func (f *fakeRuntime) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*runtimeapi.ContainerStats
	for _, st := range f.stats {
		out = append(out, st)
	}
	return out, nil
}
