package server

import (
	"context"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// InstrumentRuntime wraps a CRI runtime so that each call is counted in
// kubelet_runtime_operations_total, _errors_total and _duration_seconds
// with upstream's operation_type names. Calls not listed here pass
// through uncounted.
func InstrumentRuntime(rs internalapi.RuntimeService, m *Metrics) internalapi.RuntimeService {
	if m == nil {
		return rs
	}
	return &instrumentedRuntime{RuntimeService: rs, m: m}
}

type instrumentedRuntime struct {
	internalapi.RuntimeService
	m *Metrics
}

// ExecSync is counted as upstream names it.
func (r *instrumentedRuntime) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	start := time.Now()
	stdout, stderr, err := r.RuntimeService.ExecSync(ctx, containerID, cmd, timeout)
	r.m.observeRuntime("exec_sync", start, err)
	return stdout, stderr, err
}

func (r *instrumentedRuntime) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	start := time.Now()
	res, err := r.RuntimeService.Version(ctx, apiVersion)
	r.m.observeRuntime("version", start, err)
	return res, err
}

func (r *instrumentedRuntime) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	start := time.Now()
	res, err := r.RuntimeService.CreateContainer(ctx, podSandboxID, config, sandboxConfig)
	r.m.observeRuntime("create_container", start, err)
	return res, err
}

func (r *instrumentedRuntime) StartContainer(ctx context.Context, containerID string) error {
	start := time.Now()
	err := r.RuntimeService.StartContainer(ctx, containerID)
	r.m.observeRuntime("start_container", start, err)
	return err
}

func (r *instrumentedRuntime) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	start := time.Now()
	err := r.RuntimeService.StopContainer(ctx, containerID, timeout)
	r.m.observeRuntime("stop_container", start, err)
	return err
}

func (r *instrumentedRuntime) RemoveContainer(ctx context.Context, containerID string) error {
	start := time.Now()
	err := r.RuntimeService.RemoveContainer(ctx, containerID)
	r.m.observeRuntime("remove_container", start, err)
	return err
}

func (r *instrumentedRuntime) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	start := time.Now()
	res, err := r.RuntimeService.ListContainers(ctx, filter)
	r.m.observeRuntime("list_containers", start, err)
	return res, err
}

func (r *instrumentedRuntime) ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	start := time.Now()
	res, err := r.RuntimeService.ContainerStatus(ctx, containerID, verbose)
	r.m.observeRuntime("container_status", start, err)
	return res, err
}

func (r *instrumentedRuntime) UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error {
	start := time.Now()
	err := r.RuntimeService.UpdateContainerResources(ctx, containerID, resources)
	r.m.observeRuntime("update_container", start, err)
	return err
}

func (r *instrumentedRuntime) Exec(ctx context.Context, request *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	start := time.Now()
	res, err := r.RuntimeService.Exec(ctx, request)
	r.m.observeRuntime("exec", start, err)
	return res, err
}

func (r *instrumentedRuntime) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	start := time.Now()
	res, err := r.RuntimeService.Attach(ctx, req)
	r.m.observeRuntime("attach", start, err)
	return res, err
}

func (r *instrumentedRuntime) ReopenContainerLog(ctx context.Context, containerID string) error {
	start := time.Now()
	err := r.RuntimeService.ReopenContainerLog(ctx, containerID)
	r.m.observeRuntime("reopen_container_log", start, err)
	return err
}

func (r *instrumentedRuntime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	start := time.Now()
	res, err := r.RuntimeService.RunPodSandbox(ctx, config, runtimeHandler)
	r.m.observeRuntime("run_podsandbox", start, err)
	return res, err
}

func (r *instrumentedRuntime) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	start := time.Now()
	err := r.RuntimeService.StopPodSandbox(ctx, podSandboxID)
	r.m.observeRuntime("stop_podsandbox", start, err)
	return err
}

func (r *instrumentedRuntime) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	start := time.Now()
	err := r.RuntimeService.RemovePodSandbox(ctx, podSandboxID)
	r.m.observeRuntime("remove_podsandbox", start, err)
	return err
}

func (r *instrumentedRuntime) PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	start := time.Now()
	res, err := r.RuntimeService.PodSandboxStatus(ctx, podSandboxID, verbose)
	r.m.observeRuntime("podsandbox_status", start, err)
	return res, err
}

func (r *instrumentedRuntime) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	start := time.Now()
	res, err := r.RuntimeService.ListPodSandbox(ctx, filter)
	r.m.observeRuntime("list_podsandbox", start, err)
	return res, err
}

func (r *instrumentedRuntime) PortForward(ctx context.Context, request *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	start := time.Now()
	res, err := r.RuntimeService.PortForward(ctx, request)
	r.m.observeRuntime("port_forward", start, err)
	return res, err
}

func (r *instrumentedRuntime) ContainerStats(ctx context.Context, containerID string) (*runtimeapi.ContainerStats, error) {
	start := time.Now()
	res, err := r.RuntimeService.ContainerStats(ctx, containerID)
	r.m.observeRuntime("container_stats", start, err)
	return res, err
}

func (r *instrumentedRuntime) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	start := time.Now()
	res, err := r.RuntimeService.ListContainerStats(ctx, filter)
	r.m.observeRuntime("list_container_stats", start, err)
	return res, err
}

func (r *instrumentedRuntime) PodSandboxStats(ctx context.Context, podSandboxID string) (*runtimeapi.PodSandboxStats, error) {
	start := time.Now()
	res, err := r.RuntimeService.PodSandboxStats(ctx, podSandboxID)
	r.m.observeRuntime("podsandbox_stats", start, err)
	return res, err
}

func (r *instrumentedRuntime) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	start := time.Now()
	res, err := r.RuntimeService.ListPodSandboxStats(ctx, filter)
	r.m.observeRuntime("list_podsandbox_stats", start, err)
	return res, err
}

func (r *instrumentedRuntime) UpdateRuntimeConfig(ctx context.Context, runtimeConfig *runtimeapi.RuntimeConfig) error {
	start := time.Now()
	err := r.RuntimeService.UpdateRuntimeConfig(ctx, runtimeConfig)
	r.m.observeRuntime("update_runtime_config", start, err)
	return err
}

func (r *instrumentedRuntime) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	start := time.Now()
	res, err := r.RuntimeService.Status(ctx, verbose)
	r.m.observeRuntime("status", start, err)
	return res, err
}
