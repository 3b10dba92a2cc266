package integration

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/kubectl/pkg/drain"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/cronjob"
	"github.com/skiff-sh/skiff/internal/controller/job"
	"github.com/skiff-sh/skiff/internal/controller/manager"
	"github.com/skiff-sh/skiff/internal/simulate"
)

// The workload tests run the controller manager, the scheduler and
// simulated nodes in process (as controllers_e2e_test.go does) and drive
// Jobs, CronJobs and PodDisruptionBudgets as a user would.

// workloadJob is a Job whose pods run for runSeconds on a simulated node
// and exit with exitCode.
func workloadJob(name string, completions, parallelism int32, runSeconds string, exitCode int) *batchv1.Job {
	ann := map[string]string{simulate.RunSecondsAnnotation: runSeconds}
	if exitCode != 0 {
		ann[simulate.ExitCodeAnnotation] = fmt.Sprint(exitCode)
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			Completions: ptr.To(completions),
			Parallelism: ptr.To(parallelism),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: ann},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "work", Image: "busybox"}},
				},
			},
		},
	}
}

// waitJobCondition waits until the Job has condition t True and returns it.
func waitJobCondition(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, name string, t2 batchv1.JobConditionType) *batchv1.Job {
	t.Helper()
	var last *batchv1.Job
	for ctx.Err() == nil {
		j, err := cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = j
			for _, c := range j.Status.Conditions {
				if c.Type == t2 && c.Status == corev1.ConditionTrue {
					return j
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if last != nil {
		t.Fatalf("job %s never got %s; status %+v", name, t2, last.Status)
	}
	t.Fatalf("job %s never got %s", name, t2)
	return nil
}

func TestWorkloadsIndexedJob(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	runNodes(t, c, 3)
	runManager(t, c)
	runScheduler(t, c)
	ctx := testCtx(t, 2*time.Minute)
	ns := newNamespace(t, cs)

	j := workloadJob("idx", 5, 3, "0.5", 0)
	j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create job: %v", err)
	}
	done := waitJobCondition(t, ctx, cs, ns, "idx", batchv1.JobComplete)
	if done.Status.Succeeded != 5 || done.Status.CompletedIndexes != "0-4" || done.Status.Failed != 0 || done.Status.Active != 0 ||
		done.Status.CompletionTime == nil || done.Status.StartTime == nil {
		t.Errorf("status %+v", done.Status)
	}
	if !slices.ContainsFunc(done.Status.Conditions, func(c batchv1.JobCondition) bool {
		return c.Type == batchv1.JobSuccessCriteriaMet && c.Status == corev1.ConditionTrue
	}) {
		t.Errorf("conditions %+v: want SuccessCriteriaMet before Complete", done.Status.Conditions)
	}
	// Each index ran exactly once, on a pod that knows its index, and no
	// pod keeps the tracking finalizer.
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=idx"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pods.Items {
		ix := p.Annotations[batchv1.JobCompletionIndexAnnotation]
		got = append(got, fmt.Sprintf("%s %s host=%s label=%s", ix, p.Status.Phase, p.Spec.Hostname, p.Labels[batchv1.JobCompletionIndexAnnotation]))
		if slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) {
			t.Errorf("pod %s keeps %s", p.Name, batchv1.JobTrackingFinalizer)
		}
		if !strings.HasPrefix(p.Name, "idx-"+ix+"-") || len(p.Spec.Containers[0].Env) != 1 || p.Spec.Containers[0].Env[0].Name != "JOB_COMPLETION_INDEX" {
			t.Errorf("pod %s: env %v", p.Name, p.Spec.Containers[0].Env)
		}
	}
	sort.Strings(got)
	want := []string{
		"0 Succeeded host=idx-0 label=0", "1 Succeeded host=idx-1 label=1", "2 Succeeded host=idx-2 label=2",
		"3 Succeeded host=idx-3 label=3", "4 Succeeded host=idx-4 label=4",
	}
	if !slices.Equal(want, got) {
		t.Errorf("pods:\n got %q\nwant %q", got, want)
	}
}

func TestWorkloadsJobBackoffLimit(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	runNodes(t, c, 2)
	runManager(t, c)
	runScheduler(t, c)
	ctx := testCtx(t, 2*time.Minute)
	ns := newNamespace(t, cs)

	j := workloadJob("fails", 1, 1, "0", 3)
	j.Spec.BackoffLimit = ptr.To(int32(1))
	start := time.Now()
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create job: %v", err)
	}
	failed := waitJobCondition(t, ctx, cs, ns, "fails", batchv1.JobFailed)
	took := time.Since(start)
	if failed.Status.Failed != 2 || failed.Status.Succeeded != 0 || failed.Status.Active != 0 {
		t.Errorf("status %+v, want 2 failed pods", failed.Status)
	}
	var reasons []string
	for _, c := range failed.Status.Conditions {
		reasons = append(reasons, string(c.Type)+"/"+c.Reason)
	}
	if want := []string{"FailureTarget/BackoffLimitExceeded", "Failed/BackoffLimitExceeded"}; !slices.Equal(want, reasons) {
		t.Errorf("conditions %v, want %v", reasons, want)
	}
	// The second pod waits out the first failure's 10 s backoff: no tight
	// loop of re-creations.
	if took < 10*time.Second {
		t.Errorf("job failed after %v: the replacement did not wait for the 10 s backoff", took)
	}
	pods, _ := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=fails"})
	if len(pods.Items) != 2 {
		t.Errorf("%d pods created, want 2 (backoffLimit 1)", len(pods.Items))
	}
	waitEvent(t, ctx, cs, ns, "fails", "BackoffLimitExceeded")
}

// TestWorkloadsJobIgnoresEvictedPod: a Job whose podFailurePolicy ignores
// pods with the DisruptionTarget condition does not count a pod the
// eviction API took away, however small its backoffLimit, and replaces
// it (the conformance test's scenario; this test plays the kubelet, which
// marks the killed pod Failed keeping the condition the eviction added).
func TestWorkloadsJobIgnoresEvictedPod(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	runMaintControllers(t, c, controllercontext.Options{}, job.New)
	ctx := testCtx(t, 90*time.Second)
	ns := newNamespace(t, cs)

	j := workloadJob("evicted", 1, 1, "0", 0)
	j.Spec.BackoffLimit = ptr.To(int32(0))
	j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action:          batchv1.PodFailurePolicyActionIgnore,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
	}}}
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create job: %v", err)
	}
	// podOf waits for the Job's pod that is not name and returns it.
	podOf := func(not string) *corev1.Pod {
		t.Helper()
		var found *corev1.Pod
		eventually(t, 30*time.Second, "a pod of the job", func() (bool, error) {
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=evicted"})
			if err != nil {
				return false, err
			}
			for i := range pods.Items {
				if pods.Items[i].Name != not {
					found = &pods.Items[i]
					return true, nil
				}
			}
			return false, nil
		})
		return found
	}
	// finish plays the kubelet: the pod's container ends with code, the
	// pod goes to its terminal phase (its conditions kept).
	finish := func(name string, code int32) {
		t.Helper()
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = corev1.PodSucceeded
		if code != 0 {
			p.Status.Phase = corev1.PodFailed
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "work", Image: "busybox",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code,
				StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}}}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("finish pod %s: %v", name, err)
		}
	}
	first := podOf("")
	first.Status.Phase = corev1.PodRunning
	first.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, first, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: first.Name, Namespace: ns}}); err != nil {
		t.Fatalf("evict: %v", err)
	}
	finish(first.Name, 137) // killed

	second := podOf(first.Name)
	finish(second.Name, 0)
	done := waitJobCondition(t, ctx, cs, ns, "evicted", batchv1.JobComplete)
	if done.Status.Failed != 0 || done.Status.Succeeded != 1 {
		t.Errorf("status %+v: want the evicted pod not counted as failed", done.Status)
	}
}

// waitEvent waits for an event with reason about the object name.
func waitEvent(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, name, reason string) {
	t.Helper()
	for ctx.Err() == nil {
		evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, e := range evs.Items {
				if e.InvolvedObject.Name == name && e.Reason == reason {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no %s event for %s", reason, name)
}

// TestWorkloadsCronJob runs a CronJob every minute for four minutes of a
// fake clock (the CronJob controller's; the Job controller and the nodes
// run in real time): one Job per minute, each completes, and the history
// keeps the two newest.
func TestWorkloadsCronJob(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	runNodes(t, c, 2)
	m, err := manager.New(c.Config, manager.Options{Controller: e2eControllerOptions(), Metrics: e2eMetrics, Controllers: manager.Selection{"-cronjob", "*"},
		SharedInformers: inProcessInformers(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	mctx, mcancel := context.WithCancel(context.Background())
	mdone := make(chan error, 1)
	go func() { mdone <- m.Start(mctx) }()
	t.Cleanup(func() { mcancel(); <-mdone })
	runScheduler(t, c)
	ctx := testCtx(t, 3*time.Minute)
	ns := newNamespace(t, cs)

	cj, err := cs.BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "tick"},
		Spec: batchv1.CronJobSpec{
			Schedule:                   "* * * * *",
			SuccessfulJobsHistoryLimit: ptr.To(int32(2)),
			JobTemplate:                batchv1.JobTemplateSpec{Spec: workloadJob("", 1, 1, "0.2", 0).Spec},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create cronjob: %v", err)
	}
	clk := clocktesting.NewFakeClock(cj.CreationTimestamp.Time)
	runWithClock(t, c, clk, cronjob.New)

	var names []string
	next := cj.CreationTimestamp.Time.Truncate(time.Minute)
	for i := range 4 {
		next = next.Add(time.Minute)
		clk.SetTime(next.Add(time.Second))
		name := fmt.Sprintf("tick-%d", next.Unix()/60)
		names = append(names, name)
		j := waitJobCondition(t, ctx, cs, ns, name, batchv1.JobComplete)
		if got := j.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; got != next.UTC().Format(time.RFC3339) {
			t.Errorf("run %d: scheduled-timestamp %q, want %s", i, got, next.UTC().Format(time.RFC3339))
		}
		// The CronJob sees it finish before the next minute.
		for ctx.Err() == nil {
			got, err := cs.BatchV1().CronJobs(ns).Get(ctx, "tick", metav1.GetOptions{})
			if err == nil && len(got.Status.Active) == 0 && got.Status.LastSuccessfulTime != nil && got.Status.LastScheduleTime.Time.Equal(next) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Another sync (a job event or the next minute) applies the history
	// limit to the last run: the two newest remain.
	clk.Step(30 * time.Second)
	for ctx.Err() == nil {
		jobs, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			var left []string
			for _, j := range jobs.Items {
				if j.DeletionTimestamp == nil {
					left = append(left, j.Name)
				}
			}
			sort.Strings(left)
			if slices.Equal(left, names[2:]) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("jobs never came down to %v", names[2:])
}

// runWithClock builds controllers on c the way the manager does, with the
// given clock, and runs them until the test ends.
func runWithClock(t *testing.T, c *cluster, clk *clocktesting.FakeClock, inits ...controllercontext.InitFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	cs := c.Clientset()
	cc := controllercontext.Context{Client: cs, Dynamic: c.Dynamic(), Informers: informers.NewSharedInformerFactory(cs, 0), Recorder: &record.FakeRecorder{}, Clock: clk}
	var ctrls []controllercontext.Controller
	for _, init := range inits {
		ctrl, err := init(ctx, cc)
		if err != nil {
			t.Fatalf("build controller: %v", err)
		}
		ctrls = append(ctrls, ctrl)
	}
	cc.Informers.Start(ctx.Done())
	cc.Informers.WaitForCacheSync(ctx.Done())
	for _, ctrl := range ctrls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = ctrl.Start(ctx)
		}()
	}
}

// TestWorkloadsDrainWaitsForPDB drains a node while a PodDisruptionBudget
// allows no disruption: the drain retries (the eviction API answers 429)
// until the Deployment is scaled up and the disruption controller allows
// one, then evicts and finishes.
func TestWorkloadsDrainWaitsForPDB(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	runNodes(t, c, 3)
	runManager(t, c)
	runScheduler(t, c)
	ctx := testCtx(t, 3*time.Minute)
	ns := newNamespace(t, cs)

	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, e2eDeployment("web", 3, 300), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	waitAvailable(t, cs, ns, "web", 3, 60*time.Second)
	if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(3)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pdb: %v", err)
	}
	pdb := waitPDB(t, ctx, cs, ns, func(p *policyv1.PodDisruptionBudget) bool {
		return p.Status.ObservedGeneration == p.Generation && p.Status.CurrentHealthy == 3
	})
	if pdb.Status.DesiredHealthy != 3 || pdb.Status.ExpectedPods != 3 || pdb.Status.DisruptionsAllowed != 0 {
		t.Fatalf("pdb status %+v", pdb.Status)
	}

	pods := livePodsOf(t, cs, ns)
	node := pods[0].Spec.NodeName
	var errOut syncBuffer
	helper := &drain.Helper{
		Ctx: ctx, Client: cs, Force: false, GracePeriodSeconds: -1, IgnoreAllDaemonSets: true,
		DeleteEmptyDirData: true, Timeout: 2 * time.Minute, Out: &bytes.Buffer{}, ErrOut: &errOut,
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := drain.RunCordonOrUncordon(helper, n, true); err != nil {
		t.Fatalf("cordon: %v", err)
	}
	drained := make(chan error, 1)
	go func() { drained <- drain.RunNodeDrain(helper, node) }()

	// The drain is refused by the budget (a positive signal that it waits).
	for !strings.Contains(errOut.String(), "disruption budget") {
		select {
		case err := <-drained:
			t.Fatalf("drain finished (%v) while the budget allowed no disruption; output %q", err, errOut.String())
		case <-ctx.Done():
			t.Fatalf("no eviction refusal seen; output %q", errOut.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	// One more replica (on another node: this one is cordoned) makes room.
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 4}}
	if _, err := cs.AppsV1().Deployments(ns).UpdateScale(ctx, "web", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("scale: %v", err)
	}
	select {
	case err := <-drained:
		if err != nil {
			t.Fatalf("drain: %v (output %q)", err, errOut.String())
		}
	case <-ctx.Done():
		t.Fatalf("drain did not finish after the scale-up; output %q", errOut.String())
	}
	for _, p := range livePodsOf(t, cs, ns) {
		if p.Spec.NodeName == node {
			t.Errorf("pod %s still on drained node %s", p.Name, node)
		}
	}
	// The budget held throughout: the evicted pod went only once a fourth
	// was healthy.
	final := waitPDB(t, ctx, cs, ns, func(p *policyv1.PodDisruptionBudget) bool { return p.Status.CurrentHealthy >= 3 })
	if final.Status.DesiredHealthy != 3 {
		t.Errorf("pdb status %+v", final.Status)
	}
}

// waitPDB waits until the budget satisfies ok and returns it.
func waitPDB(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns string, ok func(*policyv1.PodDisruptionBudget) bool) *policyv1.PodDisruptionBudget {
	t.Helper()
	var last *policyv1.PodDisruptionBudget
	for ctx.Err() == nil {
		p, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
		if err == nil {
			last = p
			if ok(p) {
				return p
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("pdb never reached the wanted status; last %+v", last)
	return nil
}

// syncBuffer is a bytes.Buffer safe for the drain goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestWorkloadsJobSurvivesManagerRestart restarts the controller manager
// while a Job's pods finish: every success is counted once, none is lost
// (the tracking finalizer and status.uncountedTerminatedPods carry the
// count across the restart).
func TestWorkloadsJobSurvivesManagerRestart(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	runNodes(t, c, 3)
	stop := runManager(t, c)
	runScheduler(t, c)
	ctx := testCtx(t, 3*time.Minute)
	ns := newNamespace(t, cs)

	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, workloadJob("many", 40, 10, "0.3", 0), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create job: %v", err)
	}
	for ctx.Err() == nil {
		j, err := cs.BatchV1().Jobs(ns).Get(ctx, "many", metav1.GetOptions{})
		if err == nil && j.Status.Succeeded >= 10 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	runManager(t, c)
	done := waitJobCondition(t, ctx, cs, ns, "many", batchv1.JobComplete)
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=many"})
	if err != nil {
		t.Fatal(err)
	}
	succeeded := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded {
			succeeded++
		}
		if slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) {
			t.Errorf("pod %s keeps the tracking finalizer", p.Name)
		}
	}
	if done.Status.Succeeded != 40 || succeeded != 40 || done.Status.Failed != 0 {
		t.Errorf("status.succeeded %d, succeeded pods %d, failed %d; want 40, 40, 0", done.Status.Succeeded, succeeded, done.Status.Failed)
	}
}
