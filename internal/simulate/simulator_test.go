package simulate_test

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/internal/simulate"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

const waitTimeout = 30 * time.Second

// startSimulator runs a simulator until the test ends and waits until its
// nodes are Ready.
func startSimulator(t *testing.T, cs kubernetes.Interface, opts simulate.Options) *simulate.Simulator {
	t.Helper()
	sim := simulate.New(cs, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	select {
	case <-sim.Ready():
	case err := <-done:
		t.Fatalf("Start returned before Ready: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatalf("nodes not Ready after 60s: %+v", sim.Stats())
	}
	return sim
}

func poll(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, waitTimeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func TestSimulator(t *testing.T) {
	cluster := testapiserver.Start(t)
	cs := cluster.Clientset()
	ctx := context.Background()
	const nodes = 20
	sim := startSimulator(t, cs, simulate.Options{
		Nodes:         nodes,
		Zones:         []string{"us-east-1a", "us-east-1b"},
		Labels:        map[string]string{"pool": "sim"},
		Taints:        []corev1.Taint{{Key: "dedicated", Value: "sim", Effect: corev1.TaintEffectPreferNoSchedule}},
		LeaseDuration: 2 * time.Second, // renewed every 500ms
	})

	t.Run("nodes register Ready with labels and capacity", func(t *testing.T) {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != nodes {
			t.Fatalf("got %d nodes, want %d", len(list.Items), nodes)
		}
		sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp) })
		byName := map[string]corev1.Node{}
		for _, n := range list.Items {
			byName[n.Name] = n
		}
		n, ok := byName["sim-node-3"]
		if !ok {
			t.Fatalf("no node sim-node-3 in %v", sim.NodeNames())
		}
		wantLabels := map[string]string{
			"kubernetes.io/hostname":           "sim-node-3",
			"kubernetes.io/os":                 "linux",
			"kubernetes.io/arch":               runtime.GOARCH,
			"beta.kubernetes.io/os":            "linux",
			"beta.kubernetes.io/arch":          runtime.GOARCH,
			"node.kubernetes.io/instance-type": "simulated",
			"topology.kubernetes.io/zone":      "us-east-1b",
			"topology.kubernetes.io/region":    "us-east-1",
			"pool":                             "sim",
		}
		if diff := cmp.Diff(wantLabels, n.Labels); diff != "" {
			t.Errorf("labels (-want +got):\n%s", diff)
		}
		wantCap := map[corev1.ResourceName]string{"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}
		for _, l := range []corev1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
			got := map[corev1.ResourceName]string{}
			for k, v := range l {
				got[k] = v.String()
			}
			if diff := cmp.Diff(wantCap, got); diff != "" {
				t.Errorf("capacity/allocatable (-want +got):\n%s", diff)
			}
		}
		if diff := cmp.Diff([]corev1.Taint{{Key: "dedicated", Value: "sim", Effect: corev1.TaintEffectPreferNoSchedule}}, n.Spec.Taints); diff != "" {
			t.Errorf("taints (not-ready removed) (-want +got):\n%s", diff)
		}
		if n.Spec.PodCIDR != "10.42.3.0/24" {
			t.Errorf("podCIDR = %q, want 10.42.3.0/24", n.Spec.PodCIDR)
		}
		if got := n.Status.NodeInfo.KubeletVersion; got != "v1.37.2-skiff-sim" {
			t.Errorf("kubeletVersion = %q", got)
		}
		for _, node := range list.Items {
			ready := false
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady {
					ready = c.Status == corev1.ConditionTrue && c.Reason == "KubeletReady"
				}
			}
			if !ready {
				t.Errorf("node %s is not Ready: %+v", node.Name, node.Status.Conditions)
			}
			lease, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, node.Name, metav1.GetOptions{})
			if err != nil {
				t.Errorf("lease of %s: %v", node.Name, err)
				continue
			}
			if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != node.Name || lease.Spec.LeaseDurationSeconds == nil || *lease.Spec.LeaseDurationSeconds != 2 {
				t.Errorf("lease of %s: %+v", node.Name, lease.Spec)
			}
			if len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0].UID != node.UID {
				t.Errorf("lease of %s owners = %+v, want the node", node.Name, lease.OwnerReferences)
			}
		}
	})

	ns := "default"
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	t.Run("bound pod runs, then its graceful deletion completes", func(t *testing.T) {
		pod := createAndBind(t, cs, ns, "web", "sim-node-7", nil)
		var running *corev1.Pod
		poll(t, "pod Running", func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			running = p
			return err == nil && p.Status.Phase == corev1.PodRunning, err
		})
		ip, err := netip.ParseAddr(running.Status.PodIP)
		if err != nil || !netip.MustParsePrefix("10.42.7.0/24").Contains(ip) {
			t.Errorf("podIP = %q, want one in 10.42.7.0/24", running.Status.PodIP)
		}
		if running.Status.HostIP != "172.16.0.8" {
			t.Errorf("hostIP = %q, want 172.16.0.8", running.Status.HostIP)
		}
		conds := map[corev1.PodConditionType]corev1.ConditionStatus{}
		for _, c := range running.Status.Conditions {
			conds[c.Type] = c.Status
		}
		for _, ct := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			if conds[ct] != corev1.ConditionTrue {
				t.Errorf("condition %s = %q, want True", ct, conds[ct])
			}
		}
		if len(running.Status.ContainerStatuses) != 1 || !running.Status.ContainerStatuses[0].Ready || running.Status.ContainerStatuses[0].State.Running == nil {
			t.Errorf("container statuses = %+v, want one running and ready", running.Status.ContainerStatuses)
		}
		if running.Status.StartTime == nil {
			t.Error("startTime not set")
		}

		// A graceful delete (the default 30s) only marks the pod; the node
		// confirms it.
		if err := cs.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "pod gone", func(ctx context.Context) (bool, error) {
			_, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
	})

	t.Run("pod with run-seconds succeeds", func(t *testing.T) {
		pod := createAndBind(t, cs, ns, "job", "sim-node-1", func(p *corev1.Pod) {
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			p.Annotations = map[string]string{simulate.RunSecondsAnnotation: "0.5"}
		})
		poll(t, "pod Succeeded", func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			return err == nil && p.Status.Phase == corev1.PodSucceeded, err
		})
	})

	t.Run("pod IPs are distinct on one node", func(t *testing.T) {
		seen := map[string]string{}
		var names []string
		for i := range 5 {
			names = append(names, createAndBind(t, cs, ns, fmt.Sprintf("many-%d", i), "sim-node-2", nil).Name)
		}
		for _, name := range names {
			poll(t, name+" Running", func(ctx context.Context) (bool, error) {
				p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil || p.Status.Phase != corev1.PodRunning {
					return false, err
				}
				if other, dup := seen[p.Status.PodIP]; dup {
					t.Errorf("pods %s and %s share IP %s", other, name, p.Status.PodIP)
				}
				seen[p.Status.PodIP] = name
				return true, nil
			})
		}
	})

	t.Run("leases renew until the node is paused", func(t *testing.T) {
		const node = "sim-node-5"
		renewTime := func(node string) time.Time {
			l, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return l.Spec.RenewTime.Time
		}
		// renewedTwice waits until node has renewed its lease twice from
		// now: one renewal may have been in flight already.
		renewedTwice := func(node string) {
			t.Helper()
			for range 2 {
				before := renewTime(node)
				poll(t, node+" renewing its lease", func(context.Context) (bool, error) { return renewTime(node).After(before), nil })
			}
		}
		renewedTwice(node)

		if !sim.PauseNode(node) {
			t.Fatalf("PauseNode(%s) = false", node)
		}
		// Another node's renewals, not a sleep, say that time has passed.
		const other = "sim-node-6"
		renewedTwice(other) // a renewal of node in flight at the pause has landed
		paused := renewTime(node)
		renewedTwice(other)
		if got := renewTime(node); !got.Equal(paused) {
			t.Errorf("paused node renewed its lease: %v -> %v", paused, got)
		}

		// A node lifecycle controller marks the silent node Unknown.
		markedAt := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				n.Status.Conditions[i].Status, n.Status.Conditions[i].Reason = corev1.ConditionUnknown, "NodeStatusUnknown"
				n.Status.Conditions[i].LastTransitionTime = markedAt
			}
		}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}

		sim.ResumeNode(node)
		poll(t, "renewal after resume", func(context.Context) (bool, error) { return renewTime(node).After(paused), nil })
		poll(t, "Ready again after resume", func(ctx context.Context) (bool, error) {
			n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					if !c.LastTransitionTime.After(markedAt.Time) {
						t.Errorf("Ready lastTransitionTime %v not after the Unknown mark %v", c.LastTransitionTime, markedAt)
					}
					return true, nil
				}
			}
			return false, nil
		})
	})

	if s := sim.Stats(); s.NodeCreates != nodes || s.LeaseCreates != nodes || s.LeaseUpdates == 0 {
		t.Errorf("stats = %+v", s)
	}
}

func TestDeleteNodesOnExit(t *testing.T) {
	cluster := testapiserver.Start(t)
	cs := cluster.Clientset()
	ctx := context.Background()
	sim := simulate.New(cs, simulate.Options{Nodes: 3, NamePrefix: "gone-", DeleteNodesOnExit: true, KeepNotReadyTaint: true})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sim.Start(runCtx) }()
	select {
	case <-sim.Ready():
	case <-time.After(60 * time.Second):
		t.Fatal("not Ready")
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, "gone-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != corev1.TaintNodeNotReady {
		t.Errorf("taints = %+v, want the not-ready taint kept", n.Spec.Taints)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start: %v", err)
	}
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := cs.CoordinationV1().Leases("kube-node-lease").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 || len(leases.Items) != 0 {
		t.Errorf("after exit: %d nodes, %d leases; want none", len(list.Items), len(leases.Items))
	}
}

func TestStartRejectsInvalidOptions(t *testing.T) {
	err := simulate.New(nil, simulate.Options{Nodes: 0}).Start(context.Background())
	if err == nil || err.Error() != "at least one node is needed" {
		t.Errorf("Start() = %v, want %q", err, "at least one node is needed")
	}
}

func createAndBind(t *testing.T, cs kubernetes.Interface, ns, name, node string, edit func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "registry.example/app:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
		}}},
	}
	if edit != nil {
		edit(pod)
	}
	created, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	if err := cs.CoreV1().Pods(ns).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind pod %s: %v", name, err)
	}
	return created
}
