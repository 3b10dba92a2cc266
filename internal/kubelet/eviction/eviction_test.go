package eviction

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

const mi = 1 << 20

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name              string
		hard, soft, grace string
		want              []string // Threshold.String, "soft:" prefix with grace
		wantErr           string
	}{
		{name: "default", hard: DefaultHard, want: []string{"memory.available<100Mi", "nodefs.available<10%"}},
		{name: "all signals", hard: "pid.available<1k,imagefs.available<15%,nodefs.inodesFree<5%,imagefs.inodesFree<5%",
			want: []string{"imagefs.available<15%", "imagefs.inodesFree<5%", "nodefs.inodesFree<5%", "pid.available<1k"}},
		{name: "0% and 100% ignored", hard: "nodefs.available<0%,imagefs.available<100%", want: nil},
		{name: "soft with grace", hard: "memory.available<100Mi", soft: "memory.available<1Gi", grace: "memory.available=90s",
			want: []string{"memory.available<100Mi", "soft:memory.available<1Gi@1m30s"}},
		{name: "soft without grace", soft: "memory.available<1Gi", wantErr: "--eviction-soft: threshold memory.available requires a grace period (--eviction-soft-grace-period)"},
		{name: "unknown signal", hard: "cpu.available<1", wantErr: "--eviction-hard: unsupported eviction signal cpu.available"},
		{name: "not a statement", hard: "memory.available=1Gi", wantErr: `--eviction-hard: "memory.available=1Gi" is not signal<value`},
		{name: "negative", hard: "memory.available<-1Gi", wantErr: "--eviction-hard: eviction threshold memory.available must be positive: -1Gi"},
		{name: "over 100%", hard: "nodefs.available<120%", wantErr: "--eviction-hard: eviction percentage threshold nodefs.available must be between 0% and 100%: 120%"},
		{name: "bad grace", soft: "memory.available<1Gi", grace: "memory.available=soon", wantErr: `--eviction-soft-grace-period: time: invalid duration "soon"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.hard, tc.soft, tc.grace)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var strs []string
			for _, th := range got {
				s := th.String()
				if th.Soft {
					s = "soft:" + s + "@" + th.GracePeriod.String()
				}
				strs = append(strs, s)
			}
			if diff := cmp.Diff(tc.want, strs); diff != "" {
				t.Errorf("thresholds (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHardValue(t *testing.T) {
	ths, _ := Parse(DefaultHard, "", "")
	if got := HardValue(ths, SignalMemoryAvailable, 1<<30); got != 100*mi {
		t.Errorf("memory = %d", got)
	}
	if got := HardValue(ths, SignalNodeFsAvailable, 1000); got != 100 {
		t.Errorf("nodefs = %d", got)
	}
	if got := HardValue(ths, SignalPIDAvailable, 1000); got != 0 {
		t.Errorf("pid = %d", got)
	}
}

// TestObserve walks the state through time: hard thresholds act at once,
// soft ones after their grace period, and a pressure condition stays true
// for the transition period after its threshold was last met.
func TestObserve(t *testing.T) {
	ths, err := Parse("memory.available<100Mi,nodefs.available<10%", "memory.available<500Mi", "memory.available=1m")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Thresholds: ths, PressureTransitionPeriod: 5 * time.Minute}
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var s State
	mem := func(avail int64) Observations {
		return Observations{
			SignalMemoryAvailable: {Available: avail * mi, Capacity: 4096 * mi},
			SignalNodeFsAvailable: {Available: 50, Capacity: 100},
		}
	}
	type step struct {
		name     string
		advance  time.Duration
		obs      Observations
		wantCond []corev1.NodeConditionType
		wantMet  []string
	}
	for _, st := range []step{
		{name: "plenty", obs: mem(2048)},
		{name: "soft met, grace not passed", obs: mem(400), wantCond: []corev1.NodeConditionType{corev1.NodeMemoryPressure}},
		{name: "soft still in grace", advance: 30 * time.Second, obs: mem(400), wantCond: []corev1.NodeConditionType{corev1.NodeMemoryPressure}},
		{name: "soft grace passed", advance: 30 * time.Second, obs: mem(400), wantCond: []corev1.NodeConditionType{corev1.NodeMemoryPressure},
			wantMet: []string{"memory.available<500Mi"}},
		{name: "hard and soft", advance: time.Second, obs: mem(50), wantCond: []corev1.NodeConditionType{corev1.NodeMemoryPressure},
			wantMet: []string{"memory.available<100Mi", "memory.available<500Mi"}},
		{name: "recovered, condition kept", advance: time.Second, obs: mem(2048), wantCond: []corev1.NodeConditionType{corev1.NodeMemoryPressure}},
		{name: "soft again restarts its grace", advance: time.Minute, obs: mem(400), wantCond: []corev1.NodeConditionType{corev1.NodeMemoryPressure}},
		{name: "transition period over", advance: 5 * time.Minute, obs: mem(2048)},
		{name: "disk after memory", advance: time.Second, obs: Observations{
			SignalMemoryAvailable: {Available: 50 * mi, Capacity: 4096 * mi},
			SignalNodeFsAvailable: {Available: 5, Capacity: 100},
		}, wantCond: []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure},
			wantMet: []string{"memory.available<100Mi", "nodefs.available<10%"}},
	} {
		clock.Step(st.advance)
		d := s.Observe(cfg, st.obs, clock.Now())
		var met []string
		for _, m := range d.Met {
			met = append(met, m.String())
		}
		if diff := cmp.Diff(st.wantCond, d.Conditions); diff != "" {
			t.Errorf("%s: conditions (-want +got):\n%s", st.name, diff)
		}
		if diff := cmp.Diff(st.wantMet, met); diff != "" {
			t.Errorf("%s: met (-want +got):\n%s", st.name, diff)
		}
	}
}

func pod(name string, prio int32, memReq string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{Priority: &prio, Containers: []corev1.Container{{Name: "c"}}}}
	if memReq != "" {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memReq)}
	}
	return p
}

func cand(p *corev1.Pod, st *PodStats) Candidate {
	c := Candidate{Pod: p, Stats: st, Requests: corev1.ResourceList{}}
	for _, ctr := range p.Spec.Containers {
		for n, q := range ctr.Resources.Requests {
			c.Requests[n] = q
		}
	}
	return c
}

func TestRank(t *testing.T) {
	for _, tc := range []struct {
		name   string
		signal Signal
		cands  []Candidate
		want   []string
	}{
		{
			name:   "memory: exceeding requests first, then priority, then usage above request",
			signal: SignalMemoryAvailable,
			cands: []Candidate{
				cand(pod("within-request", 0, "1Gi"), &PodStats{Memory: 500 * mi}),
				cand(pod("over-high-prio", 1000, "100Mi"), &PodStats{Memory: 900 * mi}),
				cand(pod("over-low-prio-small", 0, "100Mi"), &PodStats{Memory: 200 * mi}),
				cand(pod("over-low-prio-big", 0, "100Mi"), &PodStats{Memory: 800 * mi}),
				cand(pod("besteffort", 0, ""), &PodStats{Memory: 10 * mi}),
			},
			want: []string{"over-low-prio-big", "over-low-prio-small", "besteffort", "over-high-prio", "within-request"},
		},
		{
			name:   "memory: a pod without stats goes first",
			signal: SignalMemoryAvailable,
			cands: []Candidate{
				cand(pod("with-stats", 0, ""), &PodStats{Memory: 900 * mi}),
				cand(pod("no-stats", 1000, ""), nil),
			},
			want: []string{"no-stats", "with-stats"},
		},
		{
			name:   "disk: exceeding ephemeral-storage requests, priority, usage",
			signal: SignalNodeFsAvailable,
			cands: []Candidate{
				func() Candidate {
					p := pod("requested", 0, "")
					p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")}
					return cand(p, &PodStats{Disk: 500 * mi})
				}(),
				cand(pod("small", 0, ""), &PodStats{Disk: 10 * mi}),
				cand(pod("big", 0, ""), &PodStats{Disk: 300 * mi}),
			},
			want: []string{"big", "small", "requested"},
		},
		{
			name:   "pids: priority, then processes",
			signal: SignalPIDAvailable,
			cands: []Candidate{
				cand(pod("many-high", 10, ""), &PodStats{Processes: 500}),
				cand(pod("few", 0, ""), &PodStats{Processes: 5}),
				cand(pod("many", 0, ""), &PodStats{Processes: 50}),
			},
			want: []string{"many", "few", "many-high"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			Rank(tc.signal, tc.cands)
			var got []string
			for _, c := range tc.cands {
				got = append(got, c.Pod.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMessage(t *testing.T) {
	ths, _ := Parse(DefaultHard, "", "")
	obs := Observations{SignalMemoryAvailable: {Available: 90 * mi, Capacity: 4096 * mi}, SignalNodeFsAvailable: {Available: 5 << 30, Capacity: 100 << 30}}
	p := pod("hog", 0, "100Mi")
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "quiet"})
	c := cand(p, &PodStats{Memory: 300 * mi, Containers: []ContainerStats{{Name: "c", Memory: 200 * mi}, {Name: "quiet", Memory: 0}}})
	got := Message(ths[0], obs, c)
	want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi. " +
		"Container c was using 200Mi, request is 100Mi, has larger consumption of memory. "
	if got != want {
		t.Errorf("memory message:\n got %q\nwant %q", got, want)
	}
	got = Message(ths[1], obs, cand(pod("p", 0, ""), nil))
	want = "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 5Gi. "
	if got != want {
		t.Errorf("disk message:\n got %q\nwant %q", got, want)
	}
}

func TestAdmit(t *testing.T) {
	mem := []corev1.NodeConditionType{corev1.NodeMemoryPressure}
	disk := []corev1.NodeConditionType{corev1.NodeDiskPressure}
	critical := pod("critical", SystemCriticalPriority, "")
	tolerant := pod("tolerant", 0, "")
	tolerant.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	for _, tc := range []struct {
		name  string
		conds []corev1.NodeConditionType
		pod   *corev1.Pod
		qos   corev1.PodQOSClass
		want  bool
		msg   string
	}{
		{name: "no pressure", pod: pod("p", 0, ""), qos: corev1.PodQOSBestEffort, want: true},
		{name: "memory pressure, burstable", conds: mem, pod: pod("p", 0, "1Mi"), qos: corev1.PodQOSBurstable, want: true},
		{name: "memory pressure, best effort", conds: mem, pod: pod("p", 0, ""), qos: corev1.PodQOSBestEffort, msg: "The node had condition: [MemoryPressure]. "},
		{name: "memory pressure, best effort tolerating it", conds: mem, pod: tolerant, qos: corev1.PodQOSBestEffort, want: true},
		{name: "disk pressure refuses all", conds: disk, pod: pod("p", 0, "1Mi"), qos: corev1.PodQOSBurstable, msg: "The node had condition: [DiskPressure]. "},
		{name: "critical always", conds: disk, pod: critical, qos: corev1.PodQOSBestEffort, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, msg := Admit(tc.conds, tc.pod, tc.qos)
			if ok != tc.want || msg != tc.msg {
				t.Errorf("Admit = %v %q, want %v %q", ok, msg, tc.want, tc.msg)
			}
		})
	}
}

func TestSetMinimumReclaim(t *testing.T) {
	for _, tc := range []struct {
		name, flag string
		want       map[string]int64 // threshold → minimum reclaim at capacity 1000Mi
		wantErr    string
	}{
		{name: "none", flag: "", want: map[string]int64{"memory.available<100Mi": 0, "nodefs.available<10%": 0, "memory.available<500Mi": 0}},
		{name: "quantity on hard and soft", flag: "memory.available=200Mi",
			want: map[string]int64{"memory.available<100Mi": 200 * mi, "nodefs.available<10%": 0, "memory.available<500Mi": 200 * mi}},
		{name: "percentage", flag: "nodefs.available=5%, memory.available=0",
			want: map[string]int64{"memory.available<100Mi": 0, "nodefs.available<10%": 50 * mi, "memory.available<500Mi": 0}},
		{name: "signal without a threshold", flag: "imagefs.available=2Gi",
			want: map[string]int64{"memory.available<100Mi": 0, "nodefs.available<10%": 0, "memory.available<500Mi": 0}},
		{name: "unknown signal", flag: "memory.free=1Gi", wantErr: "--eviction-minimum-reclaim: unsupported eviction signal memory.free"},
		{name: "not signal=value", flag: "memory.available<1Gi", wantErr: `--eviction-minimum-reclaim: "memory.available<1Gi" is not signal=value`},
		{name: "zero percent", flag: "nodefs.available=0%", wantErr: "--eviction-minimum-reclaim: eviction percentage minimum reclaim nodefs.available must be positive: 0%"},
		{name: "negative", flag: "memory.available=-1Mi", wantErr: "--eviction-minimum-reclaim: negative eviction minimum reclaim specified for memory.available"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ths, err := Parse("memory.available<100Mi,nodefs.available<10%", "memory.available<500Mi", "memory.available=1m")
			if err != nil {
				t.Fatal(err)
			}
			err = SetMinimumReclaim(ths, tc.flag)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int64{}
			for _, th := range ths {
				got[th.String()] = 0
				if th.MinReclaim != nil {
					got[th.String()] = th.MinReclaim.Value(1000 * mi)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("minimum reclaims (-want +got):\n%s", diff)
			}
		})
	}
}

// TestObserveMinimumReclaim: a threshold acted on stays met, with its
// pressure condition, until the threshold plus its minimum reclaim is
// available; one never acted on (a soft one in its grace period) is not
// held by its minimum reclaim.
func TestObserveMinimumReclaim(t *testing.T) {
	ths, err := Parse("memory.available<100Mi", "memory.available<300Mi", "memory.available=1m")
	if err != nil {
		t.Fatal(err)
	}
	if err := SetMinimumReclaim(ths, "memory.available=200Mi"); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Thresholds: ths, PressureTransitionPeriod: time.Second}
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var s State
	mem := func(avail int64) Observations {
		return Observations{SignalMemoryAvailable: {Available: avail * mi, Capacity: 4096 * mi}}
	}
	pressure := []corev1.NodeConditionType{corev1.NodeMemoryPressure}
	for _, st := range []struct {
		name     string
		avail    int64
		wantCond []corev1.NodeConditionType
		wantMet  []string
	}{
		{name: "hard met", avail: 50, wantCond: pressure, wantMet: []string{"memory.available<100Mi"}},
		{name: "above the threshold, below threshold+reclaim: still acted on", avail: 150, wantCond: pressure,
			wantMet: []string{"memory.available<100Mi"}},
		{name: "just below threshold+reclaim", avail: 299, wantCond: pressure, wantMet: []string{"memory.available<100Mi"}},
		{name: "threshold+reclaim available: resolved; the soft one starts its grace", avail: 300, wantCond: nil},
		{name: "below the soft threshold: in its grace period", avail: 250, wantCond: pressure},
		{name: "above the soft threshold: the soft one was never acted on", avail: 350, wantCond: nil},
	} {
		clock.Step(2 * time.Second) // past the transition period each step
		d := s.Observe(cfg, mem(st.avail), clock.Now())
		var met []string
		for _, m := range d.Met {
			met = append(met, m.String())
		}
		if diff := cmp.Diff(st.wantCond, d.Conditions); diff != "" {
			t.Errorf("%s: conditions (-want +got):\n%s", st.name, diff)
		}
		if diff := cmp.Diff(st.wantMet, met); diff != "" {
			t.Errorf("%s: met (-want +got):\n%s", st.name, diff)
		}
	}
}

func TestUnresolved(t *testing.T) {
	ths, err := Parse("memory.available<100Mi,nodefs.available<10%", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := SetMinimumReclaim(ths, "nodefs.available=5%"); err != nil {
		t.Fatal(err)
	}
	obs := func(disk int64) Observations {
		return Observations{
			SignalMemoryAvailable: {Available: 1000 * mi, Capacity: 4096 * mi},
			SignalNodeFsAvailable: {Available: disk, Capacity: 1000},
		}
	}
	for _, tc := range []struct {
		disk int64
		want []string
	}{
		{disk: 90, want: []string{"nodefs.available<10%"}},
		{disk: 120, want: []string{"nodefs.available<10%"}}, // above 10 %, below 10 % + 5 %
		{disk: 150},
	} {
		var got []string
		for _, th := range Unresolved(ths, obs(tc.disk)) {
			got = append(got, th.String())
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("disk %d: unresolved (-want +got):\n%s", tc.disk, diff)
		}
	}
}
