package scheduler_test

// Scenario tests: each testdata/*.txt file is a script of commands, each
// followed by "----" and the output it gives. Run with -update to rewrite
// the outputs. The scheduling cycle is driven the way the scheduler loop
// drives it (PreEnqueue, SchedulePod, then PostFilter on a FitError),
// directly on the framework runtime with a snapshot: no server, no queue.
//
// Commands:
//
//	config                 a KubeSchedulerConfiguration (YAML) whose first
//	                       profile is used from now on (default: the
//	                       default profile)
//	nodes                  one node a line: name [cpu=] [memory=] [pods=]
//	                       [label=k=v] [taint=k=v:Effect] [unschedulable]
//	pods                   bound pods, one a line (see below, node= set)
//	pdbs                   name selector=k=v allowed=N
//	configmap ns/name      k=v lines
//	schedule               pods to schedule, in order, one attempt each;
//	                       a pod that does not fit stays pending
//	retry                  one attempt for each pending pod, in queue order
//	ungate name            removes a pending pod's scheduling gates
//	scores                 the weighted scores of one pod on the feasible
//	                       nodes, by plugin
//	placements             the pods of each node, and the pending pods
//
// Pod fields: name [node=] [ns=] [cpu=] [memory=] [priority=] [label=k=v]
// [port=N] [gate=name] [toleration=k=v:Effect] [selector=k=v]
// [affinity=k=v1|v2] [prefer=weight:k=v] [anti=k=v@topologyKey]
// [affine=k=v@topologyKey] [spread=maxSkew:topologyKey:action:k=v]
// [annotation=k=v] [policy=Never] [started=minutesAgo] [image=name].

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/skiff-sh/skiff/internal/scheduler/config"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	fwruntime "github.com/skiff-sh/skiff/internal/scheduler/framework/runtime"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/defaultpreemption"
	st "github.com/skiff-sh/skiff/internal/scheduler/testing"
)

// init defines -update unless another test file of this binary already
// did; updating reads it.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite the golden outputs of testdata/*.txt")
	}
}

func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scenarios in testdata/")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runScenarioFile(t, file)
		})
	}
}

// step is one command of a script.
type step struct {
	line   int
	header string
	body   []string
	output []string
}

func parseScript(t *testing.T, file string) []step {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var steps []step
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	for i := 0; i < len(lines); {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			i++
			continue
		}
		s := step{line: i + 1, header: l}
		i++
		for i < len(lines) && lines[i] != "----" {
			if lines[i] != "" && !strings.HasPrefix(lines[i], "#") {
				s.body = append(s.body, lines[i])
			}
			i++
		}
		if i == len(lines) {
			t.Fatalf("%s:%d: %q has no ----", file, s.line, s.header)
		}
		i++
		for i < len(lines) && lines[i] != "" {
			s.output = append(s.output, lines[i])
			i++
		}
		steps = append(steps, s)
	}
	return steps
}

func runScenarioFile(t *testing.T, file string) {
	steps := parseScript(t, file)
	sc := newScenario(t)
	var out strings.Builder
	for i, s := range steps {
		got := sc.run(s)
		if updating() {
			steps[i].output = got
		} else if diff := cmp.Diff(s.output, got); diff != "" {
			t.Errorf("%s:%d: %s (-want +got):\n%s", file, s.line, s.header, diff)
		}
	}
	if !updating() {
		return
	}
	// Rewrite the file, keeping its comments before each command.
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	next := 0
	for i, s := range steps {
		for next < s.line-1 {
			out.WriteString(lines[next] + "\n")
			next++
		}
		out.WriteString(s.header + "\n")
		for _, b := range s.body {
			out.WriteString(b + "\n")
		}
		out.WriteString("----\n")
		for _, o := range s.output {
			out.WriteString(o + "\n")
		}
		// Skip the old block.
		next = s.line
		for next < len(lines) && lines[next] != "----" {
			next++
		}
		next++
		for next < len(lines) && lines[next] != "" {
			next++
		}
		if i < len(steps)-1 {
			out.WriteString("\n")
			for next < len(lines) && lines[next] == "" {
				next++
			}
		}
	}
	if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// scenario is the cluster of one script.
type scenario struct {
	t          *testing.T
	events     eventLog
	profile    fwruntime.Profile
	nodes      []*v1.Node
	bound      []*v1.Pod
	pending    []*v1.Pod
	pdbs       []*policyv1.PodDisruptionBudget
	configMaps []*v1.ConfigMap
}

func newScenario(t *testing.T) *scenario {
	return &scenario{t: t, profile: plugins.DefaultProfile()}
}

func (sc *scenario) fail(s step, format string, args ...any) []string {
	sc.t.Fatalf("line %d: %s: %s", s.line, s.header, fmt.Sprintf(format, args...))
	return nil
}

func (sc *scenario) run(s step) []string {
	cmd, arg, _ := strings.Cut(s.header, " ")
	switch cmd {
	case "config":
		cfg, err := config.Decode([]byte(strings.Join(s.body, "\n")), plugins.NewInTreeRegistry(), plugins.DefaultProfile())
		if err != nil {
			return []string{"error: " + err.Error()}
		}
		sc.profile = cfg.Profiles[0]
		return nil
	case "nodes":
		for _, l := range s.body {
			n, err := parseNode(l)
			if err != nil {
				return sc.fail(s, "%v", err)
			}
			sc.nodes = append(sc.nodes, n)
		}
		return nil
	case "pods":
		for _, l := range s.body {
			p, err := parsePod(l)
			if err != nil {
				return sc.fail(s, "%v", err)
			}
			if p.Spec.NodeName == "" {
				return sc.fail(s, "pod %s has no node=", p.Name)
			}
			sc.bound = append(sc.bound, p)
		}
		return nil
	case "pdbs":
		for _, l := range s.body {
			p, err := parsePDB(l)
			if err != nil {
				return sc.fail(s, "%v", err)
			}
			sc.pdbs = append(sc.pdbs, p)
		}
		return nil
	case "configmap":
		ns, name, ok := strings.Cut(arg, "/")
		if !ok {
			return sc.fail(s, "want configmap ns/name")
		}
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{}}
		for _, l := range s.body {
			k, v, _ := strings.Cut(strings.TrimSpace(l), "=")
			cm.Data[k] = v
		}
		sc.configMaps = append(sc.configMaps, cm)
		return nil
	case "schedule":
		var out []string
		for _, l := range s.body {
			p, err := parsePod(l)
			if err != nil {
				return sc.fail(s, "%v", err)
			}
			out = append(out, sc.attempt(p)...)
		}
		return out
	case "retry":
		f := sc.framework(context.Background(), nil)
		queue := slices.Clone(sc.pending)
		sort.SliceStable(queue, func(i, j int) bool {
			return f.QueueSortFunc()(&framework.QueuedPodInfo{PodInfo: framework.MustPodInfo(queue[i])}, &framework.QueuedPodInfo{PodInfo: framework.MustPodInfo(queue[j])})
		})
		sc.pending = nil
		var out []string
		for _, p := range queue {
			out = append(out, sc.attempt(p)...)
		}
		return out
	case "ungate":
		for _, p := range sc.pending {
			if p.Name == arg {
				p.Spec.SchedulingGates = nil
				return nil
			}
		}
		return sc.fail(s, "no pending pod %q", arg)
	case "scores":
		if len(s.body) != 1 {
			return sc.fail(s, "want one pod")
		}
		p, err := parsePod(s.body[0])
		if err != nil {
			return sc.fail(s, "%v", err)
		}
		return sc.scores(p)
	case "placements":
		return sc.placements()
	}
	return sc.fail(s, "unknown command %q", cmd)
}

// framework builds the profile over the current cluster, with a fake
// clientset (holding the cluster's objects) for preemption's writes.
func (sc *scenario) framework(ctx context.Context, cs *fake.Clientset) *fwruntime.Framework {
	sc.t.Helper()
	if cs == nil {
		cs = fake.NewClientset()
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	registry := plugins.NewInTreeRegistry()
	registry[defaultpreemption.Name] = func(ctx context.Context, args any, h framework.Handle) (framework.Plugin, error) {
		return defaultpreemption.NewWithOptions(ctx, args, h, defaultpreemption.Options{Rand: rand.New(rand.NewPCG(7, 7))})
	}
	// The pending pods' nominations, as the queue's nominator holds them.
	noms := nominations{}
	for _, p := range sc.pending {
		if n := p.Status.NominatedNodeName; n != "" {
			noms[n] = append(noms[n], framework.MustPodInfo(p))
		}
	}
	f, err := fwruntime.New(ctx, registry, sc.profile, fwruntime.Options{
		ClientSet:            cs,
		InformerFactory:      factory,
		SnapshotSharedLister: framework.NewSnapshot(sc.bound, sc.nodes),
		Parallelism:          1,
		Rand:                 rand.New(rand.NewPCG(1, 2)),
		PodNominator:         noms,
		EventRecorder:        &sc.events,
	})
	if err != nil {
		sc.t.Fatalf("build framework: %v", err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return f
}

func (sc *scenario) clientset() *fake.Clientset {
	var objs []k8sruntime.Object
	for _, n := range sc.nodes {
		objs = append(objs, n)
	}
	for _, p := range append(slices.Clone(sc.bound), sc.pending...) {
		objs = append(objs, p)
	}
	for _, p := range sc.pdbs {
		objs = append(objs, p)
	}
	for _, c := range sc.configMaps {
		objs = append(objs, c)
	}
	return fake.NewClientset(objs...)
}

func key(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

// nominations are the pods nominated to each node.
type nominations map[string][]*framework.PodInfo

func (n nominations) NominatedPodsForNode(node string) []*framework.PodInfo { return n[node] }

// eventLog records the events plugins report, as lines.
type eventLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *eventLog) Eventf(regarding, _ k8sruntime.Object, eventtype, reason, _, note string, args ...any) {
	name := "?"
	if p, ok := regarding.(*v1.Pod); ok {
		name = key(p)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf("event %s: %s %s %s", name, eventtype, reason, fmt.Sprintf(note, args...)))
}

// take returns the lines recorded since the last call.
func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.lines
	l.lines = nil
	sort.Strings(out) // victims are evicted in parallel
	return out
}

// attempt runs one scheduling attempt of pod and reports what a user
// would see: the events, and the preemption's writes.
func (sc *scenario) attempt(pod *v1.Pod) []string {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sc.pending = slices.DeleteFunc(sc.pending, func(p *v1.Pod) bool { return key(p) == key(pod) })
	cs := sc.clientset()
	if err := cs.Tracker().Add(pod); err != nil && !strings.Contains(err.Error(), "already exists") {
		sc.t.Fatal(err)
	}
	f := sc.framework(ctx, cs)
	if s := f.RunPreEnqueuePlugins(ctx, pod); !s.IsSuccess() {
		sc.pending = append(sc.pending, pod)
		return []string{fmt.Sprintf("%s: not queued: %s (%s)", key(pod), s.Message(), s.Plugin())}
	}
	state := framework.NewCycleState()
	res, err := f.SchedulePod(ctx, state, pod)
	if err == nil {
		bound := pod.DeepCopy()
		bound.Spec.NodeName = res.SuggestedHost
		bound.Status.NominatedNodeName = ""
		sc.bound = append(sc.bound, bound)
		return []string{fmt.Sprintf("Scheduled %s: Successfully assigned %s to %s", key(pod), key(pod), res.SuggestedHost)}
	}
	var fe *fwruntime.FitError
	if !errors.As(err, &fe) {
		sc.pending = append(sc.pending, pod)
		return []string{fmt.Sprintf("FailedScheduling %s: %v", key(pod), err)}
	}
	sc.pending = append(sc.pending, pod)
	var out []string
	if f.HasPostFilterPlugins() {
		before := len(cs.Actions())
		pr, s := f.RunPostFilterPlugins(ctx, state, pod, fe.Diagnosis.NodeToStatus)
		if !s.IsSuccess() {
			fe.Diagnosis.PostFilterMsg = s.Message()
		}
		out = append(out, fmt.Sprintf("FailedScheduling %s: %v", key(pod), fe))
		out = append(out, sc.applyWrites(cs.Actions()[before:], pod)...)
		out = append(out, sc.events.take()...)
		if pr != nil && pr.NominatedNodeName != "" {
			out = append(out, fmt.Sprintf("nominated %s to %s", key(pod), pr.NominatedNodeName))
		}
		return out
	}
	return append(out, fmt.Sprintf("FailedScheduling %s: %v", key(pod), fe))
}

// applyWrites replays preemption's API writes on the scenario: a deleted
// victim is gone (as once its kubelet confirmed), a status patch of the
// preemptor sets its nomination.
func (sc *scenario) applyWrites(actions []k8stesting.Action, preemptor *v1.Pod) []string {
	var out []string
	for _, a := range actions {
		switch a := a.(type) {
		case k8stesting.PatchAction:
			name := a.GetNamespace() + "/" + a.GetName()
			if name == key(preemptor) {
				continue
			}
			out = append(out, fmt.Sprintf("patch %s %s: %s", a.GetSubresource(), name, redactTime(string(a.GetPatch()))))
		case k8stesting.DeleteAction:
			name := a.GetNamespace() + "/" + a.GetName()
			out = append(out, "Preempted "+name+": deleted")
			sc.bound = slices.DeleteFunc(sc.bound, func(p *v1.Pod) bool { return key(p) == name })
		}
	}
	// The nominations (the preemptor's, and those preemption cleared) as
	// the API now holds them.
	for _, p := range sc.pending {
		p.Status.NominatedNodeName = nominatedIn(actions, p)
	}
	return out
}

func nominatedIn(actions []k8stesting.Action, pod *v1.Pod) string {
	nom := pod.Status.NominatedNodeName
	for _, a := range actions {
		if pa, ok := a.(k8stesting.PatchAction); ok && pa.GetName() == pod.Name && pa.GetNamespace() == pod.Namespace {
			patch := string(pa.GetPatch())
			if i := strings.Index(patch, `"nominatedNodeName":`); i >= 0 {
				v := strings.TrimSuffix(strings.TrimSuffix(patch[i+len(`"nominatedNodeName":`):], "}}"), "}")
				nom = strings.Trim(v, `"`)
				if nom == "null" {
					nom = ""
				}
			}
		}
	}
	return nom
}

func redactTime(s string) string {
	const k = `"lastTransitionTime":"`
	if i := strings.Index(s, k); i >= 0 {
		if j := strings.Index(s[i+len(k):], `"`); j >= 0 {
			return s[:i+len(k)] + "T" + s[i+len(k)+j:]
		}
	}
	return s
}

func (sc *scenario) scores(pod *v1.Pod) []string {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := sc.framework(ctx, sc.clientset())
	state := framework.NewCycleState()
	if _, s := f.RunPreFilterPlugins(ctx, state, pod); !s.IsSuccess() {
		return []string{"prefilter: " + s.String()}
	}
	var feasible []*framework.NodeInfo
	var out []string
	for _, ni := range f.SnapshotSharedLister().NodeInfos().List() {
		if s := f.RunFilterPlugins(ctx, state, pod, ni); !s.IsSuccess() {
			out = append(out, fmt.Sprintf("%s: filtered: %s", ni.Node().Name, s))
			continue
		}
		feasible = append(feasible, ni)
	}
	if s := f.RunPreScorePlugins(ctx, state, pod, feasible); !s.IsSuccess() {
		return append(out, "prescore: "+s.String())
	}
	scores, s := f.RunScorePlugins(ctx, state, pod, feasible)
	if !s.IsSuccess() {
		return append(out, "score: "+s.String())
	}
	for _, ns := range scores {
		var parts []string
		for _, ps := range ns.Scores {
			if ps.Score != 0 {
				parts = append(parts, fmt.Sprintf("%s=%d", ps.Name, ps.Score))
			}
		}
		out = append(out, fmt.Sprintf("%s: total=%d %s", ns.Name, ns.TotalScore, strings.Join(parts, " ")))
	}
	sort.Strings(out)
	return out
}

func (sc *scenario) placements() []string {
	var out []string
	for _, n := range sc.nodes {
		var names []string
		for _, p := range sc.bound {
			if p.Spec.NodeName == n.Name {
				names = append(names, p.Name)
			}
		}
		sort.Strings(names)
		out = append(out, fmt.Sprintf("%s: %s", n.Name, strings.Join(names, " ")))
	}
	for _, p := range sc.pending {
		line := "pending: " + p.Name
		if p.Status.NominatedNodeName != "" {
			line += " (nominated to " + p.Status.NominatedNodeName + ")"
		}
		out = append(out, line)
	}
	return out
}

// fields splits "name k=v k=v flag" into the name and its fields.
func fields(line string) (string, [][2]string) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return "", nil
	}
	var kv [][2]string
	for _, x := range f[1:] {
		k, v, _ := strings.Cut(x, "=")
		kv = append(kv, [2]string{k, v})
	}
	return f[0], kv
}

func parseTaint(s string) (v1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return v1.Taint{}, fmt.Errorf("taint %q: want k=v:Effect", s)
	}
	k, v, _ := strings.Cut(kv, "=")
	return v1.Taint{Key: k, Value: v, Effect: v1.TaintEffect(effect)}, nil
}

func parseNode(line string) (*v1.Node, error) {
	name, kv := fields(line)
	n := st.MakeNode(name)
	res := map[string]string{}
	for _, f := range kv {
		switch f[0] {
		case "cpu", "memory", "pods", "ephemeral-storage":
			res[f[0]] = f[1]
		case "label":
			k, v, _ := strings.Cut(f[1], "=")
			n.Label(k, v)
		case "taint":
			t, err := parseTaint(f[1])
			if err != nil {
				return nil, err
			}
			n.Taint(t.Key, t.Value, t.Effect)
		case "unschedulable":
			n.Unschedulable()
		default:
			return nil, fmt.Errorf("node %s: unknown field %q", name, f[0])
		}
	}
	if len(res) > 0 {
		n.Capacity(res)
	}
	return n.Obj(), nil
}

var scenarioEpoch = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func selector(s string) (string, string) {
	k, v, _ := strings.Cut(s, "=")
	return k, v
}

func parsePod(line string) (*v1.Pod, error) {
	name, kv := fields(line)
	p := st.MakePod().Name(name)
	p.Spec.SchedulerName = "default-scheduler" // as the API server defaults it
	req := map[string]string{}
	for _, f := range kv {
		switch f[0] {
		case "ns":
			p.Namespace(f[1])
		case "node":
			p.Node(f[1])
		case "cpu", "memory":
			req[f[0]] = f[1]
		case "priority":
			n, err := strconv.Atoi(f[1])
			if err != nil {
				return nil, fmt.Errorf("pod %s: priority: %w", name, err)
			}
			p.Priority(int32(n))
		case "label":
			p.Label(selector(f[1]))
		case "port":
			n, err := strconv.Atoi(f[1])
			if err != nil {
				return nil, fmt.Errorf("pod %s: port: %w", name, err)
			}
			p.HostPort("", v1.ProtocolTCP, int32(n))
		case "gate":
			p.SchedulingGates(f[1])
		case "toleration":
			t, err := parseTaint(f[1])
			if err != nil {
				return nil, err
			}
			p.Toleration(v1.Toleration{Key: t.Key, Operator: v1.TolerationOpEqual, Value: t.Value, Effect: t.Effect})
		case "selector":
			k, v := selector(f[1])
			if p.Spec.NodeSelector == nil {
				p.Spec.NodeSelector = map[string]string{}
			}
			p.Spec.NodeSelector[k] = v
		case "affinity":
			k, v := selector(f[1])
			p.NodeAffinityIn(k, strings.Split(v, "|")...)
		case "prefer":
			w, sel, _ := strings.Cut(f[1], ":")
			n, err := strconv.Atoi(w)
			if err != nil {
				return nil, fmt.Errorf("pod %s: prefer weight: %w", name, err)
			}
			k, v := selector(sel)
			p.PreferredNodeAffinityIn(int32(n), k, v)
		case "anti", "affine":
			sel, topo, _ := strings.Cut(f[1], "@")
			k, v := selector(sel)
			if f[0] == "anti" {
				p.PodAntiAffinity(st.Term(k, v, topo))
			} else {
				p.PodAffinity(st.Term(k, v, topo))
			}
		case "spread":
			parts := strings.Split(f[1], ":")
			if len(parts) != 4 {
				return nil, fmt.Errorf("pod %s: spread: want maxSkew:topologyKey:action:k=v", name)
			}
			skew, err := strconv.Atoi(parts[0])
			if err != nil {
				return nil, fmt.Errorf("pod %s: spread: %w", name, err)
			}
			k, v := selector(parts[3])
			p.SpreadConstraint(int32(skew), parts[1], v1.UnsatisfiableConstraintAction(parts[2]), nil, k, v)
		case "annotation":
			k, v := selector(f[1])
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[k] = v
		case "policy":
			pol := v1.PreemptionPolicy(f[1])
			p.Spec.PreemptionPolicy = &pol
		case "started":
			n, err := strconv.Atoi(f[1])
			if err != nil {
				return nil, fmt.Errorf("pod %s: started: %w", name, err)
			}
			ts := metav1.NewTime(scenarioEpoch.Add(-time.Duration(n) * time.Minute))
			p.Status.StartTime = &ts
		case "image":
			p.Image(f[1])
		default:
			return nil, fmt.Errorf("pod %s: unknown field %q", name, f[0])
		}
	}
	if len(req) > 0 {
		p.Req(req)
	}
	return p.Obj(), nil
}

func parsePDB(line string) (*policyv1.PodDisruptionBudget, error) {
	name, kv := fields(line)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	for _, f := range kv {
		switch f[0] {
		case "selector":
			k, v := selector(f[1])
			pdb.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
		case "allowed":
			n, err := strconv.Atoi(f[1])
			if err != nil {
				return nil, fmt.Errorf("pdb %s: allowed: %w", name, err)
			}
			pdb.Status.DisruptionsAllowed = int32(n)
		default:
			return nil, fmt.Errorf("pdb %s: unknown field %q", name, f[0])
		}
	}
	return pdb, nil
}
