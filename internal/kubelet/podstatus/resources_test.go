package podstatus

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestStatusResources: a running container's status resources are the
// allocation with the runtime's cpu and memory values, except where both
// are at the runtime's minimum (equivalents such as 1m and 2m).
func TestStatusResources(t *testing.T) {
	req := func(cpuReq, cpuLim, memLim string) *corev1.ResourceRequirements {
		r := &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuReq)}, Limits: corev1.ResourceList{}}
		if cpuLim != "" {
			r.Limits[corev1.ResourceCPU] = resource.MustParse(cpuLim)
		}
		if memLim != "" {
			r.Limits[corev1.ResourceMemory] = resource.MustParse(memLim)
		}
		return r
	}
	for _, tc := range []struct {
		name                  string
		alloc                 *corev1.ResourceRequirements
		actual                *runtimeapi.LinuxContainerResources
		wantReq, wantLim, mem string
	}{
		{"as allocated", req("20m", "30m", "45Mi"), &runtimeapi.LinuxContainerResources{CpuShares: 20, CpuQuota: 3000, CpuPeriod: 100000, MemoryLimitInBytes: 45 << 20}, "20m", "30m", "45Mi"},
		{"the runtime still has the old values", req("25m", "35m", "50Mi"), &runtimeapi.LinuxContainerResources{CpuShares: 20, CpuQuota: 3000, CpuPeriod: 100000, MemoryLimitInBytes: 45 << 20}, "20m", "30m", "45Mi"},
		{"equivalents at the minimum", req("1m", "5m", ""), &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuQuota: 1000, CpuPeriod: 100000}, "1m", "5m", ""},
		{"no runtime values", req("100m", "", ""), nil, "100m", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := StatusResources(tc.alloc, tc.actual)
			if q := got.Requests[corev1.ResourceCPU]; q.String() != tc.wantReq {
				t.Errorf("cpu request %s, want %s", q.String(), tc.wantReq)
			}
			if q, ok := got.Limits[corev1.ResourceCPU]; (ok || tc.wantLim != "") && q.String() != tc.wantLim {
				t.Errorf("cpu limit %s, want %s", q.String(), tc.wantLim)
			}
			if q, ok := got.Limits[corev1.ResourceMemory]; (ok || tc.mem != "") && q.String() != tc.mem {
				t.Errorf("memory limit %s, want %s", q.String(), tc.mem)
			}
		})
	}
}
