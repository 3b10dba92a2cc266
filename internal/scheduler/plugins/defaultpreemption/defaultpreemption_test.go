package defaultpreemption_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	policylisters "k8s.io/client-go/listers/policy/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	fwruntime "github.com/skiff-sh/skiff/internal/scheduler/framework/runtime"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/defaultpreemption"
	st "github.com/skiff-sh/skiff/internal/scheduler/testing"
)

func cpu(n string) map[string]string { return map[string]string{"cpu": n} }

func started(p *st.PodWrapper, minutesAgo int) *st.PodWrapper {
	t := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC).Add(-time.Duration(minutesAgo) * time.Minute))
	p.Status.StartTime = &t
	return p
}

func pdb(name string, allowed int32, key, value string) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
}

func pdbLister(t *testing.T, pdbs []*policyv1.PodDisruptionBudget) policylisters.PodDisruptionBudgetLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range pdbs {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	return policylisters.NewPodDisruptionBudgetLister(idx)
}

type outcome struct {
	Nominated string
	Status    string
	// Deleted are the pods deleted through the API, in order.
	Deleted []string
}

// preempt schedules pod on the cluster with the default profile, expects
// no node to fit, and runs PostFilter as the scheduler would.
func preempt(t *testing.T, nodes []*v1.Node, pods []*v1.Pod, pdbs []*policyv1.PodDisruptionBudget, pod *v1.Pod) (outcome, *fake.Clientset) {
	t.Helper()
	ctx := context.Background()
	objs := []runtime.Object{pod}
	for _, p := range pods {
		objs = append(objs, p)
	}
	cs := fake.NewClientset(objs...)
	registry := plugins.NewInTreeRegistry()
	registry[defaultpreemption.Name] = func(ctx context.Context, args any, h framework.Handle) (framework.Plugin, error) {
		return defaultpreemption.NewWithOptions(ctx, args, h, defaultpreemption.Options{Rand: rand.New(rand.NewPCG(1, 1)), PDBLister: pdbLister(t, pdbs)})
	}
	f, err := fwruntime.New(ctx, registry, plugins.DefaultProfile(), fwruntime.Options{
		ClientSet:            cs,
		SnapshotSharedLister: framework.NewSnapshot(pods, nodes),
		Parallelism:          1,
		Rand:                 rand.New(rand.NewPCG(1, 1)),
	})
	if err != nil {
		t.Fatal(err)
	}
	state := framework.NewCycleState()
	_, err = f.SchedulePod(ctx, state, pod)
	var fe *fwruntime.FitError
	if !errors.As(err, &fe) {
		t.Fatalf("SchedulePod: got %v, want a FitError", err)
	}
	res, s := f.RunPostFilterPlugins(ctx, state, pod, fe.Diagnosis.NodeToStatus)
	out := outcome{Status: s.String()}
	if res != nil {
		out.Nominated = res.NominatedNodeName
	}
	for _, a := range cs.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok && a.GetResource().Resource == "pods" {
			out.Deleted = append(out.Deleted, d.GetName())
		}
	}
	return out, cs
}

func TestPostFilter(t *testing.T) {
	never := v1.PreemptNever
	cases := []struct {
		name  string
		nodes []*v1.Node
		pods  []*v1.Pod
		pdbs  []*policyv1.PodDisruptionBudget
		pod   *v1.Pod
		want  outcome
	}{
		{
			name:  "evicts only the lower-priority pods needed, reprieving the more important",
			nodes: []*v1.Node{st.MakeNode("n1").Capacity(cpu("4")).Obj()},
			pods: []*v1.Pod{
				st.MakePod().Name("low").Node("n1").Priority(1).Req(cpu("2")).Obj(),
				st.MakePod().Name("mid").Node("n1").Priority(2).Req(cpu("2")).Obj(),
			},
			pod:  st.MakePod().Name("p").Priority(10).Req(cpu("2")).Obj(),
			want: outcome{Nominated: "n1", Status: "Success", Deleted: []string{"low"}},
		},
		{
			name:  "no lower-priority pod",
			nodes: []*v1.Node{st.MakeNode("n1").Capacity(cpu("2")).Obj()},
			pods:  []*v1.Pod{st.MakePod().Name("same").Node("n1").Priority(10).Req(cpu("2")).Obj()},
			pod:   st.MakePod().Name("p").Priority(10).Req(cpu("1")).Obj(),
			want:  outcome{Status: "Unschedulable: preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."},
		},
		{
			name: "an unresolvable node is not a candidate",
			nodes: []*v1.Node{
				st.MakeNode("n1").Capacity(cpu("2")).Obj(),
				st.MakeNode("tainted").Capacity(cpu("8")).Taint("k", "v", v1.TaintEffectNoSchedule).Obj(),
			},
			pods: []*v1.Pod{st.MakePod().Name("big").Node("n1").Priority(100).Req(cpu("2")).Obj()},
			pod:  st.MakePod().Name("p").Priority(10).Req(cpu("1")).Obj(),
			want: outcome{Status: "Unschedulable: preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."},
		},
		{
			name:  "evicting even every lower pod does not help",
			nodes: []*v1.Node{st.MakeNode("n1").Capacity(cpu("2")).Obj()},
			pods:  []*v1.Pod{st.MakePod().Name("low").Node("n1").Priority(1).Req(cpu("1")).Obj()},
			pod:   st.MakePod().Name("p").Priority(10).Req(cpu("3")).Obj(),
			want:  outcome{Status: "Unschedulable: preemption: 0/1 nodes are available: 1 Insufficient cpu."},
		},
		{
			name: "the node whose most important victim has the lowest priority",
			nodes: []*v1.Node{
				st.MakeNode("n1").Capacity(cpu("2")).Obj(),
				st.MakeNode("n2").Capacity(cpu("2")).Obj(),
			},
			pods: []*v1.Pod{
				st.MakePod().Name("five").Node("n1").Priority(5).Req(cpu("2")).Obj(),
				st.MakePod().Name("three").Node("n2").Priority(3).Req(cpu("2")).Obj(),
			},
			pod:  st.MakePod().Name("p").Priority(10).Req(cpu("2")).Obj(),
			want: outcome{Nominated: "n2", Status: "Success", Deleted: []string{"three"}},
		},
		{
			name: "a PDB steers the choice to the node that violates none",
			nodes: []*v1.Node{
				st.MakeNode("n1").Capacity(cpu("2")).Obj(),
				st.MakeNode("n2").Capacity(cpu("2")).Obj(),
			},
			pods: []*v1.Pod{
				st.MakePod().Name("guarded").Label("app", "db").Node("n1").Priority(1).Req(cpu("2")).Obj(),
				st.MakePod().Name("free").Label("app", "web").Node("n2").Priority(5).Req(cpu("2")).Obj(),
			},
			pdbs: []*policyv1.PodDisruptionBudget{pdb("db", 0, "app", "db")},
			pod:  st.MakePod().Name("p").Priority(10).Req(cpu("2")).Obj(),
			want: outcome{Nominated: "n2", Status: "Success", Deleted: []string{"free"}},
		},
		{
			name: "a PDB with disruptions left does not count",
			nodes: []*v1.Node{
				st.MakeNode("n1").Capacity(cpu("2")).Obj(),
				st.MakeNode("n2").Capacity(cpu("2")).Obj(),
			},
			pods: []*v1.Pod{
				st.MakePod().Name("guarded").Label("app", "db").Node("n1").Priority(1).Req(cpu("2")).Obj(),
				st.MakePod().Name("free").Label("app", "web").Node("n2").Priority(5).Req(cpu("2")).Obj(),
			},
			pdbs: []*policyv1.PodDisruptionBudget{pdb("db", 1, "app", "db")},
			pod:  st.MakePod().Name("p").Priority(10).Req(cpu("2")).Obj(),
			want: outcome{Nominated: "n1", Status: "Success", Deleted: []string{"guarded"}},
		},
		{
			name: "fewest victims on a tie of priorities",
			nodes: []*v1.Node{
				st.MakeNode("n1").Capacity(cpu("2")).Obj(),
				st.MakeNode("n2").Capacity(cpu("2")).Obj(),
			},
			pods: []*v1.Pod{
				st.MakePod().Name("a1").Node("n1").Priority(1).Req(cpu("1")).Obj(),
				st.MakePod().Name("a2").Node("n1").Priority(1).Req(cpu("1")).Obj(),
				st.MakePod().Name("b").Node("n2").Priority(1).Req(cpu("2")).Obj(),
			},
			pod:  st.MakePod().Name("p").Priority(10).Req(cpu("2")).Obj(),
			want: outcome{Nominated: "n2", Status: "Success", Deleted: []string{"b"}},
		},
		{
			name: "the most recently started victims on a full tie",
			nodes: []*v1.Node{
				st.MakeNode("n1").Capacity(cpu("2")).Obj(),
				st.MakeNode("n2").Capacity(cpu("2")).Obj(),
			},
			pods: []*v1.Pod{
				started(st.MakePod().Name("old").Node("n1").Priority(1).Req(cpu("2")), 60).Obj(),
				started(st.MakePod().Name("new").Node("n2").Priority(1).Req(cpu("2")), 5).Obj(),
			},
			pod:  st.MakePod().Name("p").Priority(10).Req(cpu("2")).Obj(),
			want: outcome{Nominated: "n2", Status: "Success", Deleted: []string{"new"}},
		},
		{
			name:  "preemptionPolicy Never",
			nodes: []*v1.Node{st.MakeNode("n1").Capacity(cpu("2")).Obj()},
			pods:  []*v1.Pod{st.MakePod().Name("low").Node("n1").Priority(1).Req(cpu("2")).Obj()},
			pod: func() *v1.Pod {
				p := st.MakePod().Name("p").Priority(10).Req(cpu("2")).Obj()
				p.Spec.PreemptionPolicy = &never
				return p
			}(),
			want: outcome{Status: "Unschedulable: preemption: not eligible due to preemptionPolicy=Never."},
		},
		{
			name:  "waits while a victim on the nominated node terminates",
			nodes: []*v1.Node{st.MakeNode("n1").Capacity(cpu("2")).Obj()},
			pods: []*v1.Pod{func() *v1.Pod {
				p := st.MakePod().Name("going").Node("n1").Priority(1).Req(cpu("2")).Terminating().Obj()
				p.Status.Conditions = []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonPreemptionByScheduler}}
				return p
			}()},
			pod: func() *v1.Pod {
				p := st.MakePod().Name("p").Priority(10).Req(cpu("2")).Obj()
				p.Status.NominatedNodeName = "n1"
				return p
			}(),
			want: outcome{Status: "Unschedulable: preemption: not eligible due to a terminating pod on the nominated node."},
		},
		{
			name:  "a pod terminating for another reason does not block",
			nodes: []*v1.Node{st.MakeNode("n1").Capacity(cpu("2")).Obj()},
			pods:  []*v1.Pod{st.MakePod().Name("going").Node("n1").Priority(1).Req(cpu("2")).Terminating().Obj()},
			pod: func() *v1.Pod {
				p := st.MakePod().Name("p").Priority(10).Req(cpu("2")).Obj()
				p.Status.NominatedNodeName = "n1"
				return p
			}(),
			want: outcome{Nominated: "n1", Status: "Success", Deleted: []string{"going"}},
		},
		{
			name: "anti-affinity to a lower-priority pod is resolved through RemovePod",
			nodes: []*v1.Node{
				st.MakeNode("n1").Capacity(cpu("4")).Obj(),
			},
			pods: []*v1.Pod{st.MakePod().Name("web").Label("app", "web").Node("n1").Priority(1).Obj()},
			pod:  st.MakePod().Name("p").Priority(10).PodAntiAffinity(st.Term("app", "web", v1.LabelHostname)).Obj(),
			want: outcome{Nominated: "n1", Status: "Success", Deleted: []string{"web"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := preempt(t, tc.nodes, tc.pods, tc.pdbs, tc.pod)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestEvictionWrites(t *testing.T) {
	nodes := []*v1.Node{st.MakeNode("n1").Capacity(cpu("2")).Obj()}
	victim := st.MakePod().Name("low").Node("n1").Priority(1).Req(cpu("2")).Obj()
	pod := st.MakePod().Name("p").Priority(10).Req(cpu("2")).Obj()
	pod.Spec.SchedulerName = "default-scheduler"
	_, cs := preempt(t, nodes, []*v1.Pod{victim}, nil, pod)

	var verbs []string
	for _, a := range cs.Actions() {
		verbs = append(verbs, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
	}
	want := []string{"patch pods/status", "delete pods/", "patch pods/status"}
	if diff := cmp.Diff(want, verbs); diff != "" {
		t.Errorf("API calls (-want +got):\n%s", diff)
	}
	ctx := context.Background()
	if _, err := cs.CoreV1().Pods("default").Get(ctx, "low", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("victim still exists: %v", err)
	}
	got, err := cs.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.NominatedNodeName != "n1" {
		t.Errorf("nominatedNodeName = %q, want n1", got.Status.NominatedNodeName)
	}
	// The condition was written before the delete.
	patch := cs.Actions()[0].(k8stesting.PatchAction).GetPatch()
	for _, s := range []string{`"type":"DisruptionTarget"`, `"reason":"PreemptionByScheduler"`, `default-scheduler: preempting to accommodate a higher priority pod`} {
		if !strings.Contains(string(patch), s) {
			t.Errorf("condition patch %s lacks %s", patch, s)
		}
	}
}

func TestNoCandidateClearsNomination(t *testing.T) {
	nodes := []*v1.Node{st.MakeNode("n1").Capacity(cpu("2")).Obj()}
	other := st.MakePod().Name("same").Node("n1").Priority(10).Req(cpu("2")).Obj()
	pod := st.MakePod().Name("p").Priority(10).Req(cpu("2")).Obj()
	pod.Status.NominatedNodeName = "gone"
	_, cs := preempt(t, nodes, []*v1.Pod{other}, nil, pod)
	got, err := cs.CoreV1().Pods("default").Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.NominatedNodeName != "" {
		t.Errorf("nominatedNodeName = %q, want it cleared", got.Status.NominatedNodeName)
	}
}

func pi(p *v1.Pod) *framework.PodInfo { return framework.MustPodInfo(p) }

func TestSplitByPDBViolation(t *testing.T) {
	a := st.MakePod().Name("a").Label("app", "db").Obj()
	b := st.MakePod().Name("b").Label("app", "db").Obj()
	c := st.MakePod().Name("c").Label("app", "web").Obj()
	d := st.MakePod().Name("d").Namespace("other").Label("app", "db").Obj()
	e := st.MakePod().Name("e").Obj()
	disrupted := pdb("db", 0, "app", "db")
	disrupted.Status.DisruptedPods = map[string]metav1.Time{"a": {}}
	cases := []struct {
		name          string
		pdbs          []*policyv1.PodDisruptionBudget
		wantViolating []string
		wantOthers    []string
	}{
		{"no PDB", nil, nil, []string{"a", "b", "c", "d", "e"}},
		{"one disruption allowed: the second pod violates", []*policyv1.PodDisruptionBudget{pdb("db", 1, "app", "db")}, []string{"b"}, []string{"a", "c", "d", "e"}},
		{"none allowed", []*policyv1.PodDisruptionBudget{pdb("db", 0, "app", "db")}, []string{"a", "b"}, []string{"c", "d", "e"}},
		{"already disrupted pods do not count", []*policyv1.PodDisruptionBudget{disrupted}, []string{"b"}, []string{"a", "c", "d", "e"}},
		{"empty selector matches nothing", []*policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "all"}, Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{}}}}, nil, []string{"a", "b", "c", "d", "e"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, n := defaultpreemption.SplitByPDBViolation([]*framework.PodInfo{pi(a), pi(b), pi(c), pi(d), pi(e)}, tc.pdbs)
			names := func(l []*framework.PodInfo) []string {
				var out []string
				for _, p := range l {
					out = append(out, p.Pod.Name)
				}
				return out
			}
			if diff := cmp.Diff(tc.wantViolating, names(v)); diff != "" {
				t.Errorf("violating (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantOthers, names(n)); diff != "" {
				t.Errorf("non-violating (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSelectCandidate(t *testing.T) {
	p := func(name string, prio int32, minutesAgo int) *v1.Pod {
		w := st.MakePod().Name(name).Priority(prio)
		if minutesAgo >= 0 {
			started(w, minutesAgo)
		}
		return w.Obj()
	}
	cases := []struct {
		name  string
		cands []defaultpreemption.Candidate
		want  string
	}{
		{"none", nil, ""},
		{"fewest PDB violations first", []defaultpreemption.Candidate{
			{Node: "a", Victims: []*v1.Pod{p("x", 1, 1)}, NumPDBViolations: 1},
			{Node: "b", Victims: []*v1.Pod{p("y", 100, 1)}},
		}, "b"},
		{"lowest highest priority", []defaultpreemption.Candidate{
			{Node: "a", Victims: []*v1.Pod{p("x", 5, 1)}},
			{Node: "b", Victims: []*v1.Pod{p("y", 4, 1), p("z", 4, 1)}},
		}, "b"},
		{"smallest sum of priorities, negative ones included", []defaultpreemption.Candidate{
			{Node: "a", Victims: []*v1.Pod{p("x", 1, 1), p("x2", -5, 1), p("x3", -5, 1)}},
			{Node: "b", Victims: []*v1.Pod{p("y", 1, 1), p("y2", 0, 1)}},
		}, "b"},
		{"fewest victims", []defaultpreemption.Candidate{
			{Node: "a", Victims: []*v1.Pod{p("x", 1, 1), p("x2", 0, 1)}},
			{Node: "b", Victims: []*v1.Pod{p("y", 1, 1), p("y2", 0, 1)}},
			{Node: "c", Victims: []*v1.Pod{p("z", 1, 1), p("z2", 0, 1)}},
		}, "a"},
		{"latest start of the highest-priority victims", []defaultpreemption.Candidate{
			{Node: "a", Victims: []*v1.Pod{p("x", 1, 30)}},
			{Node: "b", Victims: []*v1.Pod{p("y", 1, 10)}},
			{Node: "c", Victims: []*v1.Pod{p("z", 1, 20)}},
		}, "b"},
		{"a victim not started yet counts as the latest", []defaultpreemption.Candidate{
			{Node: "a", Victims: []*v1.Pod{p("x", 1, 1)}},
			{Node: "b", Victims: []*v1.Pod{p("y", 1, -1)}},
		}, "b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := defaultpreemption.SelectCandidate(tc.cands)
			name := ""
			if got != nil {
				name = got.Node
			}
			if name != tc.want {
				t.Errorf("SelectCandidate = %q, want %q", name, tc.want)
			}
		})
	}
}

func TestNumCandidates(t *testing.T) {
	e := defaultpreemption.Evaluator{MinCandidateNodesPercentage: 10, MinCandidateNodesAbsolute: 100}
	for _, tc := range []struct{ n, want int }{{5, 5}, {100, 100}, {500, 100}, {5000, 500}} {
		if got := e.NumCandidates(tc.n); got != tc.want {
			t.Errorf("NumCandidates(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

func TestArgs(t *testing.T) {
	h := st.NewHandle(nil, nil)
	if _, err := defaultpreemption.New(context.Background(), nil, h); err == nil {
		t.Error("a handle that cannot run filters was accepted")
	}
	ctx := context.Background()
	f, err := fwruntime.New(ctx, plugins.NewInTreeRegistry(), plugins.DefaultProfile(), fwruntime.Options{ClientSet: fake.NewClientset()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args    string
		wantErr bool
	}{
		{`{}`, false},
		{`{"minCandidateNodesPercentage": 101}`, true},
		{`{"minCandidateNodesAbsolute": -1}`, true},
		{`{"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}`, true},
		{`{"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 5}`, false},
	} {
		_, err := defaultpreemption.New(ctx, []byte(tc.args), f)
		if (err != nil) != tc.wantErr {
			t.Errorf("args %s: err = %v, wantErr %v", tc.args, err, tc.wantErr)
		}
	}
}
