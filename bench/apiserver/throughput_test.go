package apiserver_test

import (
	"context"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

var concurrency = []int{1, 8, 32}

const benchNS = "bench"

func newConfigMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench"}},
		Data: map[string]string{
			"config.yaml": "listen: 0.0.0.0:8080\nlog-level: info\nworkers: 4\n",
			"seq":         "0",
		},
	}
}

func newPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench", "tier": "web"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "web",
				Image: "registry.example/web:1.2.3",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				Env:   []corev1.EnvVar{{Name: "MODE", Value: "bench"}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
			}},
		},
	}
}

// kind is one resource the create benchmark writes.
type kind struct {
	name   string
	prefix string // etcd key prefix of the namespace
	create func(ctx context.Context, cs kubernetes.Interface, name string) error
}

var kinds = []kind{
	{
		name: "configmap", prefix: "/registry/configmaps/" + benchNS + "/",
		create: func(ctx context.Context, cs kubernetes.Interface, name string) error {
			_, err := cs.CoreV1().ConfigMaps(benchNS).Create(ctx, newConfigMap(name), metav1.CreateOptions{})
			return err
		},
	},
	{
		name: "pod", prefix: "/registry/pods/" + benchNS + "/",
		create: func(ctx context.Context, cs kubernetes.Interface, name string) error {
			_, err := cs.CoreV1().Pods(benchNS).Create(ctx, newPod(name), metav1.CreateOptions{})
			return err
		},
	},
}

// storedValue creates one object of k and returns the bytes the server
// stored for it in etcd (the protobuf envelope), for the baseline to put.
func storedValue(b *testing.B, c *cluster, cs kubernetes.Interface, k kind) []byte {
	b.Helper()
	ctx := context.Background()
	if err := k.create(ctx, cs, "sample"); err != nil {
		b.Fatalf("create sample %s: %v", k.name, err)
	}
	resp, err := c.etcd.Get(ctx, k.prefix+"sample")
	if err != nil || len(resp.Kvs) != 1 {
		b.Fatalf("read sample %s from etcd: %v (%d keys)", k.name, err, len(resp.Kvs))
	}
	return resp.Kvs[0].Value
}

// BenchmarkCreate creates objects through the API server with 1, 8 and 32
// clients, then puts the same number of values of the same size straight
// into the same etcd with the same concurrency, and reports both and their
// ratio (API server creates/s ÷ etcd puts/s).
func BenchmarkCreate(b *testing.B) {
	c := startCluster(b)
	cs := c.clients(b, concurrency[len(concurrency)-1], protobuf)
	createNamespace(b, cs[0], benchNS)
	ctx := context.Background()
	for _, k := range kinds {
		value := storedValue(b, c, cs[0], k)
		round := 0
		for _, n := range concurrency {
			b.Run(fmt.Sprintf("kind=%s/clients=%d", k.name, n), func(b *testing.B) {
				round++
				prefix := fmt.Sprintf("r%d-", round)
				api, err := runConcurrent(n, b.N, func(w, i int) error {
					return k.create(ctx, cs[w], prefix+fmt.Sprint(i))
				})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer() // ns/op covers the API server phase only
				raw, err := runConcurrent(n, b.N, func(_, i int) error {
					_, err := c.etcd.Put(ctx, fmt.Sprintf("/bench/raw/%s/%s%d", k.name, prefix, i), string(value))
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				report(b, "", api)
				report(b, "etcd_", raw)
				reportRatios(b, api, raw)
				b.ReportMetric(float64(len(value)), "obj_bytes")
			})
		}
	}
}

// BenchmarkGet reads one object per client through the API server (a
// consistent read, served by etcd) and the same key straight from etcd.
func BenchmarkGet(b *testing.B) {
	c := startCluster(b)
	cs := c.clients(b, concurrency[len(concurrency)-1], protobuf)
	createNamespace(b, cs[0], benchNS)
	ctx := context.Background()
	for w := range cs {
		if _, err := cs[w].CoreV1().ConfigMaps(benchNS).Create(ctx, newConfigMap(fmt.Sprintf("get-%d", w)), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for _, n := range concurrency {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			api, err := runConcurrent(n, b.N, func(w, _ int) error {
				_, err := cs[w].CoreV1().ConfigMaps(benchNS).Get(ctx, fmt.Sprintf("get-%d", w), metav1.GetOptions{})
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer() // ns/op covers the API server phase only
			raw, err := runConcurrent(n, b.N, func(w, _ int) error {
				_, err := c.etcd.Get(ctx, fmt.Sprintf("/registry/configmaps/%s/get-%d", benchNS, w))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			report(b, "", api)
			report(b, "etcd_", raw)
			reportRatios(b, api, raw)
		})
	}
}

// listSize is how many configmaps BenchmarkList lists each time.
const listSize = 100

// BenchmarkList lists a namespace of 100 configmaps through the API server
// (a consistent list, served by the watch cache) and reads the same range
// straight from etcd.
func BenchmarkList(b *testing.B) {
	c := startCluster(b)
	cs := c.clients(b, concurrency[len(concurrency)-1], protobuf)
	createNamespace(b, cs[0], benchNS)
	ctx := context.Background()
	if _, err := runConcurrent(len(cs), listSize, func(w, i int) error {
		_, err := cs[w].CoreV1().ConfigMaps(benchNS).Create(ctx, newConfigMap(fmt.Sprintf("cm-%03d", i)), metav1.CreateOptions{})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	prefix := "/registry/configmaps/" + benchNS + "/"
	for _, n := range concurrency {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			api, err := runConcurrent(n, b.N, func(w, _ int) error {
				l, err := cs[w].CoreV1().ConfigMaps(benchNS).List(ctx, metav1.ListOptions{})
				if err == nil && len(l.Items) != listSize {
					err = fmt.Errorf("listed %d configmaps, want %d", len(l.Items), listSize)
				}
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer() // ns/op covers the API server phase only
			raw, err := runConcurrent(n, b.N, func(_, _ int) error {
				resp, err := c.etcd.Get(ctx, prefix, clientv3.WithPrefix())
				if err == nil && len(resp.Kvs) != listSize {
					err = fmt.Errorf("etcd range has %d keys, want %d", len(resp.Kvs), listSize)
				}
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			report(b, "", api)
			report(b, "etcd_", raw)
			reportRatios(b, api, raw)
		})
	}
}
