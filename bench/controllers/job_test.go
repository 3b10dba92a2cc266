package controllers_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/simulate"
)

// BenchmarkJob1000 measures the time from the create of one Job of 1,000
// completions (pods that succeed as soon as they run) until an informer
// sees its Complete condition, on the 100 simulated nodes, with all 1,000
// pods allowed at once and with 100 at a time.
func BenchmarkJob1000(b *testing.B) {
	for _, qps := range qpsSettings {
		for _, parallelism := range []int32{1000, 100} {
			b.Run(fmt.Sprintf("qps=%d/parallelism=%d", qps, parallelism), func(b *testing.B) { benchmarkJob(b, qps, 1000, parallelism) })
		}
	}
}

func benchmarkJob(b *testing.B, qps int, completions, parallelism int32) {
	env := startEnv(b, qps)
	var total, allSucceeded, cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ns := fmt.Sprintf("bench-%d", i)
		if _, err := env.client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatalf("create namespace: %v", err)
		}
		waitServiceAccount(b, env.client, ns)
		cpu0 := env.cm.cpu(b)
		d, pods := env.runJob(b, ns, completions, parallelism)
		total += d
		allSucceeded += pods
		cpu += env.cm.cpu(b) - cpu0
		b.StopTimer()
		env.deleteNamespace(b, ns)
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s_to_complete")
	b.ReportMetric(allSucceeded.Seconds()/float64(b.N), "s_to_last_pod")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cm_cpu_s")
	b.ReportMetric(float64(completions)*float64(b.N)/total.Seconds(), "completions/s")
	hwm, rss := env.cm.memory(b)
	b.ReportMetric(float64(hwm)/(1<<20), "cm_peak_rss_MiB")
	b.ReportMetric(float64(rss)/(1<<20), "cm_rss_MiB")
	b.ReportMetric(float64(env.sim.Stats().Errors), "sim_errors")
}

// runJob creates the Job in ns and returns the time until it is Complete
// and the time until the last of its pods had succeeded (the rest is the
// controller counting); it fails the benchmark if the Job does not count
// exactly completions successes.
func (e *env) runJob(b *testing.B, ns string, completions, parallelism int32) (time.Duration, time.Duration) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	factory := informers.NewSharedInformerFactoryWithOptions(e.client, 0, informers.WithNamespace(ns))
	defer func() { cancel(); factory.Shutdown() }()
	inf := factory.Batch().V1().Jobs().Informer()
	done := make(chan *batchv1.Job, 1)
	check := func(obj any) {
		j, ok := obj.(*batchv1.Job)
		if !ok {
			return
		}
		for _, c := range j.Status.Conditions {
			if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
				select {
				case done <- j:
				default:
				}
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: check, UpdateFunc: func(_, o any) { check(o) }}); err != nil {
		b.Fatal(err)
	}
	var (
		mu        sync.Mutex
		succeeded = map[string]bool{}
		lastPod   time.Time
	)
	podDone := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.Status.Phase == corev1.PodSucceeded {
			mu.Lock()
			if !succeeded[p.Name] {
				succeeded[p.Name] = true
				lastPod = time.Now()
			}
			mu.Unlock()
		}
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: podDone, UpdateFunc: func(_, o any) { podDone(o) }}); err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	start := time.Now()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "work"},
		Spec: batchv1.JobSpec{
			Completions: ptr.To(completions),
			Parallelism: ptr.To(parallelism),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{simulate.RunSecondsAnnotation: "0"}},
				Spec: corev1.PodSpec{
					RestartPolicy:                 corev1.RestartPolicyNever,
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers:                    []corev1.Container{{Name: "work", Image: "busybox"}},
				},
			},
		},
	}
	if _, err := e.client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		b.Fatalf("create job: %v", err)
	}
	select {
	case j := <-done:
		d := time.Since(start)
		if j.Status.Succeeded != completions || j.Status.Failed != 0 {
			b.Fatalf("job finished with succeeded=%d failed=%d conditions %+v", j.Status.Succeeded, j.Status.Failed, j.Status.Conditions)
		}
		mu.Lock()
		defer mu.Unlock()
		return d, lastPod.Sub(start)
	case <-ctx.Done():
		j, _ := e.client.BatchV1().Jobs(ns).Get(context.Background(), "work", metav1.GetOptions{})
		b.Fatalf("job not complete after %v: %+v", time.Since(start), j.Status)
	}
	return 0, 0
}
