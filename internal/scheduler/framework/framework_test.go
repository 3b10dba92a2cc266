package framework_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	st "github.com/skiff-sh/skiff/internal/scheduler/testing"
)

func TestStatusNilSafe(t *testing.T) {
	var s *framework.Status
	got := []any{s.Code(), s.IsSuccess(), s.IsRejected(), s.Message(), s.AsError() == nil, s.Plugin()}
	want := []any{framework.Success, true, false, "", true, ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nil status (-want +got):\n%s", diff)
	}
}

func TestStatus(t *testing.T) {
	cases := []struct {
		name     string
		status   *framework.Status
		code     framework.Code
		msg      string
		rejected bool
		isErr    bool
	}{
		{"unschedulable", framework.NewStatus(framework.Unschedulable, "Insufficient cpu", "Too many pods"), framework.Unschedulable, "Insufficient cpu, Too many pods", true, true},
		{"unresolvable", framework.NewStatus(framework.UnschedulableAndUnresolvable, "x"), framework.UnschedulableAndUnresolvable, "x", true, true},
		{"error", framework.AsStatus(errors.New("boom")), framework.Error, "boom", false, true},
		{"skip", framework.NewStatus(framework.Skip), framework.Skip, "", false, false},
		{"wait", framework.NewStatus(framework.Wait, "hold"), framework.Wait, "hold", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := []any{tc.status.Code(), tc.status.Message(), tc.status.IsRejected(), tc.status.AsError() != nil}
			want := []any{tc.code, tc.msg, tc.rejected, tc.isErr}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if !framework.NewStatus(framework.Error, "a").Equal(framework.AsStatus(errors.New("a"))) {
		t.Errorf("Error statuses with the same message should be equal")
	}
	if framework.NewStatus(framework.Unschedulable, "a").Equal(framework.NewStatus(framework.Unschedulable, "b")) {
		t.Errorf("different reasons compare equal")
	}
}

func TestCycleStateClone(t *testing.T) {
	cs := framework.NewCycleState()
	cs.Write("k", &counter{n: 1})
	clone := cs.Clone()
	c, err := framework.ReadAs[*counter](clone, "k")
	if err != nil {
		t.Fatal(err)
	}
	c.n = 5
	orig, _ := framework.ReadAs[*counter](cs, "k")
	if orig.n != 1 {
		t.Errorf("clone shares state: original n = %d", orig.n)
	}
	if _, err := cs.Read("missing"); !errors.Is(err, framework.ErrNotFound) {
		t.Errorf("Read(missing) = %v, want ErrNotFound", err)
	}
}

type counter struct{ n int }

func (c *counter) Clone() framework.StateData { return &counter{n: c.n} }

func TestPodRequests(t *testing.T) {
	cases := []struct {
		name    string
		pod     *v1.Pod
		nonZero bool
		want    framework.Resource
	}{
		{
			name: "containers are summed",
			pod:  st.MakePod().Req(map[string]string{"cpu": "1", "memory": "1Gi"}).Container(map[string]string{"cpu": "500m", "example.com/gpu": "2"}).Obj(),
			want: framework.Resource{MilliCPU: 1500, Memory: 1 << 30, ScalarResources: map[v1.ResourceName]int64{"example.com/gpu": 2}},
		},
		{
			// Upstream's case: an init container larger than the sum wins.
			name: "init container larger than containers",
			pod:  st.MakePod().Req(map[string]string{"cpu": "1", "memory": "1Gi"}).InitReq(map[string]string{"cpu": "3", "memory": "512Mi"}).Obj(),
			want: framework.Resource{MilliCPU: 3000, Memory: 1 << 30},
		},
		{
			name: "overhead is added",
			pod:  st.MakePod().Req(map[string]string{"cpu": "1"}).InitReq(map[string]string{"cpu": "2"}).Overhead(map[string]string{"cpu": "250m", "memory": "120Mi"}).Obj(),
			want: framework.Resource{MilliCPU: 2250, Memory: 120 << 20},
		},
		{
			// A sidecar keeps running: it adds to the containers, and the
			// init container after it runs beside it.
			name: "sidecar then init container",
			pod: st.MakePod().Req(map[string]string{"cpu": "1"}).
				SidecarReq(map[string]string{"cpu": "1"}).InitReq(map[string]string{"cpu": "3"}).Obj(),
			want: framework.Resource{MilliCPU: 4000},
		},
		{
			name: "sidecar adds to containers",
			pod:  st.MakePod().Req(map[string]string{"cpu": "2"}).SidecarReq(map[string]string{"cpu": "1"}).Obj(),
			want: framework.Resource{MilliCPU: 3000},
		},
		{
			name:    "non-zero defaults for containers without requests",
			pod:     st.MakePod().Container(map[string]string{"cpu": "1"}).Obj(),
			nonZero: true,
			want:    framework.Resource{MilliCPU: 1100, Memory: 2 * framework.DefaultMemoryRequest},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := framework.PodRequests(tc.pod, framework.RequestsOptions{NonZero: tc.nonZero})
			if diff := cmp.Diff(&tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestHostPortConflicts(t *testing.T) {
	used := framework.HostPortInfo{}
	used.Add("", "", 80)            // 0.0.0.0 TCP 80
	used.Add("10.0.0.1", "UDP", 53) // specific IP
	cases := []struct {
		ip, proto string
		port      int32
		want      bool
	}{
		{"127.0.0.1", "TCP", 80, true}, // wildcard taken
		{"0.0.0.0", "UDP", 80, false},  // other protocol
		{"0.0.0.0", "UDP", 53, true},   // wildcard vs specific
		{"10.0.0.2", "UDP", 53, false}, // other IP
		{"10.0.0.1", "UDP", 53, true},  // same IP
		{"", "", 8080, false},          // free
		{"", "", 0, false},             // no host port
	}
	for _, tc := range cases {
		if got := used.CheckConflict(tc.ip, tc.proto, tc.port); got != tc.want {
			t.Errorf("CheckConflict(%q, %q, %d) = %v, want %v", tc.ip, tc.proto, tc.port, got, tc.want)
		}
	}
}

func TestNodeInfoAddRemove(t *testing.T) {
	p1 := st.MakePod().Name("a").Req(map[string]string{"cpu": "1"}).HostPort("", "", 80).Obj()
	p2 := st.MakePod().Name("b").PodAntiAffinity(st.Term("app", "x", v1.LabelHostname)).Obj()
	ni := framework.NewNodeInfo(p1, p2)
	if diff := cmp.Diff([]any{int64(1000), int64(1100), 1, 1, 1}, []any{ni.Requested.MilliCPU, ni.NonZeroRequested.MilliCPU, ni.UsedPorts.Len(), len(ni.PodsWithAffinity), len(ni.PodsWithRequiredAntiAffinity)}); diff != "" {
		t.Errorf("after add (-want +got):\n%s", diff)
	}
	clone := ni.Clone()
	if err := ni.RemovePod(p1); err != nil {
		t.Fatal(err)
	}
	if err := ni.RemovePod(p2); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{int64(0), int64(0), 0, 0, 0, 0}, []any{ni.Requested.MilliCPU, ni.NonZeroRequested.MilliCPU, ni.UsedPorts.Len(), len(ni.Pods), len(ni.PodsWithAffinity), len(ni.PodsWithRequiredAntiAffinity)}); diff != "" {
		t.Errorf("after remove (-want +got):\n%s", diff)
	}
	if len(clone.Pods) != 2 || clone.UsedPorts.Len() != 1 {
		t.Errorf("clone changed with original: %d pods, %d ports", len(clone.Pods), clone.UsedPorts.Len())
	}
	if err := ni.RemovePod(p1); err == nil {
		t.Errorf("removing a missing pod succeeded")
	}
}
