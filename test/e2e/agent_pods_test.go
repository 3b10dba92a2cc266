package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	criclient "k8s.io/cri-client/pkg"
)

func waiting(p *corev1.Pod, reason string) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Waiting != nil && cs.State.Waiting.Reason == reason {
			return true
		}
	}
	return false
}

func restarts(p *corev1.Pod) int32 {
	if len(p.Status.ContainerStatuses) == 0 {
		return 0
	}
	return p.Status.ContainerStatuses[0].RestartCount
}

// runningContainers counts the pod's running containers as the runtime
// sees them.
func (c *agentCluster) runningContainers(t *testing.T, uid types.UID) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := criclient.NewRemoteRuntimeService(ctx, "unix://"+filepath.Join(c.dataDir, "agent", "containerd", "containerd.sock"), 10*time.Second, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close(ctx)
	list, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(uid)},
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

func TestAgentCrashLoop(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "agent-crash")
	c.create(t, busyboxPod(ns, "crasher", c.image, "sh", "-c", "echo about to fail; exit 3"))
	p := c.waitPod(t, ns, "crasher", 60*time.Second, "in CrashLoopBackOff", func(p *corev1.Pod) bool {
		return waiting(p, "CrashLoopBackOff") && restarts(p) >= 1
	})
	cs := p.Status.ContainerStatuses[0]
	if !strings.Contains(cs.State.Waiting.Message, "back-off 10s restarting failed container=main pod=crasher_"+ns) {
		t.Errorf("waiting message %q", cs.State.Waiting.Message)
	}
	if term := cs.LastTerminationState.Terminated; term == nil || term.ExitCode != 3 || term.Reason != "Error" {
		t.Errorf("last termination %+v, want exit code 3, reason Error", cs.LastTerminationState)
	}
	// The back-off ends and the container runs again: restarts grow.
	c.waitPod(t, ns, "crasher", 40*time.Second, "restarted after the back-off", func(p *corev1.Pod) bool { return restarts(p) >= 2 })
	if !c.hasEvent(ns, "crasher", "BackOff", "Back-off restarting failed container main") {
		t.Errorf("no BackOff event:\n%s", c.events(ns, "crasher"))
	}
	if got := c.logFile(t, p, "main", 0); got != "about to fail\n" {
		t.Errorf("first run's log %q", got)
	}
	if got := kubectl(t, c.kubeconfig, "logs", "--previous", "-n", ns, "crasher"); got != "about to fail\n" {
		t.Errorf("kubectl logs --previous: %q", got)
	}
}

func TestAgentLivenessRestart(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "agent-liveness")
	p := busyboxPod(ns, "sick", c.image, "sleep", "3600")
	p.Spec.Containers[0].LivenessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
		PeriodSeconds: 1, FailureThreshold: 2,
	}
	c.create(t, p)
	got := c.waitPod(t, ns, "sick", 60*time.Second, "restarted by its liveness probe", func(p *corev1.Pod) bool { return restarts(p) >= 1 })
	if !c.hasEvent(ns, "sick", "Unhealthy", "Liveness probe failed") {
		t.Errorf("no Unhealthy event:\n%s", c.events(ns, "sick"))
	}
	if !c.hasEvent(ns, "sick", "Killing", "Container main failed liveness probe, will be restarted") {
		t.Errorf("no Killing event:\n%s", c.events(ns, "sick"))
	}
	if term := got.Status.ContainerStatuses[0].LastTerminationState.Terminated; term == nil || term.ExitCode != 137 {
		t.Errorf("last termination %+v, want the SIGKILL of a sleep that ignores SIGTERM as PID 1 (137)", got.Status.ContainerStatuses[0].LastTerminationState)
	}
}

func TestAgentReadinessGatesReady(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "agent-readiness")
	p := busyboxPod(ns, "slow", c.image, "sh", "-c", "sleep 4; touch /tmp/ready; sleep 3600")
	p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/ready"}}},
		PeriodSeconds: 1,
	}
	c.create(t, p)
	c.waitPod(t, ns, "slow", 60*time.Second, "Running but not Ready", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 &&
			p.Status.ContainerStatuses[0].State.Running != nil && !p.Status.ContainerStatuses[0].Ready && !podRunningReady(p)
	})
	c.waitPod(t, ns, "slow", 30*time.Second, "Ready once the probe passes", podRunningReady)
}

func TestAgentDeployment(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "agent-deploy")
	replicas := int32(3)
	one := int64(1)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &one, Containers: []corev1.Container{{
					Name: "web", Image: c.image, Command: []string{"sh", "-c", "mkdir -p /www; echo ok > /www/index.html; exec httpd -f -p 8080 -h /www"},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intOrStr(8080)}}, PeriodSeconds: 1},
				}}},
			},
		},
	}
	if _, err := c.client.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "3 available replicas", func() bool {
		got, err := c.client.AppsV1().Deployments(ns).Get(context.Background(), "web", metav1.GetOptions{})
		return err == nil && got.Status.AvailableReplicas == 3 && got.Status.ReadyReplicas == 3
	})
	pods, err := c.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	ips := map[string]bool{}
	for _, p := range pods.Items {
		if !podRunningReady(&p) {
			t.Errorf("pod %s is %s, not Running and Ready", p.Name, p.Status.Phase)
		}
		ips[p.Status.PodIP] = true
	}
	if len(ips) != 3 {
		t.Errorf("pod IPs %v: want 3 distinct", ips)
	}
}

func TestAgentGracefulDeletion(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "agent-delete")
	grace := int64(3)
	p := busyboxPod(ns, "stubborn", c.image, "sleep", "3600")
	p.Spec.TerminationGracePeriodSeconds = &grace
	p = c.create(t, p)
	p = c.waitPod(t, ns, "stubborn", 60*time.Second, "Running", podRunningReady)
	if n := c.runningContainers(t, p.UID); n != 1 {
		t.Fatalf("%d running containers, want 1", n)
	}
	start := time.Now()
	if err := c.client.CoreV1().Pods(ns).Delete(context.Background(), "stubborn", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the pod object to go", func() bool {
		_, err := c.client.CoreV1().Pods(ns).Get(context.Background(), "stubborn", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	// The container is gone once the grace period is over (the API
	// server's reaper may remove the object at the deadline, while the
	// kubelet is still sending SIGKILL: allow a moment for that).
	waitFor(t, 5*time.Second, "the pod's container to stop", func() bool { return c.runningContainers(t, p.UID) == 0 })
	took := time.Since(start)
	// sleep ignores SIGTERM as PID 1: it is killed when the grace period
	// ends, and not much later.
	if took < time.Duration(grace)*time.Second-500*time.Millisecond || took > time.Duration(grace)*time.Second+5*time.Second {
		t.Errorf("stopping took %v with a grace period of %ds; events:\n%s", took, grace, c.events(ns, "stubborn"))
	}
}

func TestAgentConfigMapAndSecretVolumes(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "agent-volumes")
	ctx := context.Background()
	if _, err := c.client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"},
		Data: map[string]string{"greeting": "hello-v1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"},
		Data: map[string][]byte{"password": []byte("s3cret")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := busyboxPod(ns, "reader", c.image, "sh", "-c", "while true; do echo \"$(cat /cfg/greeting) $(cat /sec/password) $GREETING\"; sleep 1; done")
	p.Spec.Volumes = []corev1.Volume{
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec"}}},
	}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}, {Name: "sec", MountPath: "/sec", ReadOnly: true}}
	p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "GREETING", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "greeting"}}}}
	c.create(t, p)
	p = c.waitPod(t, ns, "reader", 60*time.Second, "Running", podRunningReady)
	waitFor(t, 15*time.Second, "the volumes' data in the output", func() bool {
		return strings.Contains(c.logFile(t, p, "main", 0), "hello-v1 s3cret hello-v1\n")
	})
	cm, err := c.client.CoreV1().ConfigMaps(ns).Get(ctx, "cfg", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["greeting"] = "hello-v2"
	if _, err := c.client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The volume follows the update; the env var, as upstream, does not.
	waitFor(t, 60*time.Second, "the updated ConfigMap in the volume", func() bool {
		return strings.Contains(c.logFile(t, p, "main", 0), "hello-v2 s3cret hello-v1\n")
	})
}

func TestAgentPodToPod(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "agent-net")
	c.create(t, busyboxPod(ns, "server", c.image, "sh", "-c", "mkdir -p /www; echo pong > /www/index.html; exec httpd -f -p 8080 -h /www"))
	srv := c.waitPod(t, ns, "server", 60*time.Second, "Running", podRunningReady)
	client := busyboxPod(ns, "client", c.image, "wget", "-qO-", "http://"+srv.Status.PodIP+":8080/")
	client.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	client = c.create(t, client)
	done := c.waitPod(t, ns, "client", 60*time.Second, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if got := c.logFile(t, done, "main", int(restarts(done))); got != "pong\n" {
		t.Errorf("client output %q, want pong", got)
	}
	// The pod's loopback is up (containerd brings lo up, not a CNI plugin):
	// the server answers itself on 127.0.0.1.
	if got := kubectl(t, c.kubeconfig, "-n", ns, "exec", "server", "--", "wget", "-qO-", "http://127.0.0.1:8080/"); got != "pong\n" {
		t.Errorf("the server through its own loopback: %q, want pong", got)
	}
}

func intOrStr(port int) intstrIntOrString { return intstrFromInt(port) }

// Bad input: each ends in upstream's reason and an event, and the agent
// keeps serving the other pods.
func TestAgentBadInput(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "agent-bad")

	t.Run("image that is not present, pull policy Never", func(t *testing.T) {
		t.Parallel()
		p := busyboxPod(ns, "never", "example.invalid/nothing:1", "true")
		p.Spec.Containers[0].ImagePullPolicy = corev1.PullNever
		c.create(t, p)
		c.waitPod(t, ns, "never", 60*time.Second, "ErrImageNeverPull", func(p *corev1.Pod) bool { return waiting(p, "ErrImageNeverPull") })
		waitFor(t, 10*time.Second, "an ErrImageNeverPull event", func() bool {
			return c.hasEvent(ns, "never", "ErrImageNeverPull", `Container image "example.invalid/nothing:1" is not present with pull policy of Never`)
		})
	})
	t.Run("image that cannot be pulled", func(t *testing.T) {
		t.Parallel()
		// A registry on a loopback port nothing listens on: the pull fails
		// at once, without leaving the machine.
		p := busyboxPod(ns, "nopull", "127.0.0.1:1/nothing:1", "true")
		p.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
		c.create(t, p)
		c.waitPod(t, ns, "nopull", 60*time.Second, "ErrImagePull", func(p *corev1.Pod) bool { return waiting(p, "ErrImagePull") })
		c.waitPod(t, ns, "nopull", 60*time.Second, "ImagePullBackOff", func(p *corev1.Pod) bool { return waiting(p, "ImagePullBackOff") })
		if !c.hasEvent(ns, "nopull", "Failed", `Failed to pull image "127.0.0.1:1/nothing:1"`) {
			t.Errorf("no Failed pull event:\n%s", c.events(ns, "nopull"))
		}
	})
	t.Run("command that does not exist", func(t *testing.T) {
		t.Parallel()
		c.create(t, busyboxPod(ns, "nocmd", c.image, "/no/such/command"))
		p := c.waitPod(t, ns, "nocmd", 60*time.Second, "failing to start", func(p *corev1.Pod) bool {
			return waiting(p, "RunContainerError") || waiting(p, "CrashLoopBackOff")
		})
		cs := p.Status.ContainerStatuses[0]
		msg := cs.State.Waiting.Message
		if cs.LastTerminationState.Terminated != nil {
			msg += " " + cs.LastTerminationState.Terminated.Message
		}
		if !strings.Contains(msg, "/no/such/command") {
			t.Errorf("status does not name the missing command: %+v", cs)
		}
		waitFor(t, 10*time.Second, "a Failed event", func() bool { return c.hasEvent(ns, "nocmd", "Failed", "/no/such/command") })
	})
	t.Run("volume naming a missing ConfigMap", func(t *testing.T) {
		t.Parallel()
		p := busyboxPod(ns, "nocm", c.image, "sleep", "3600")
		p.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "missing"}}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}}
		c.create(t, p)
		waitFor(t, 30*time.Second, "a FailedMount event", func() bool {
			return c.hasEvent(ns, "nocm", "FailedMount", `MountVolume.SetUp failed for volume "cfg" : configmap "missing" not found`)
		})
		got := c.waitPod(t, ns, "nocm", 10*time.Second, "ContainerCreating", func(p *corev1.Pod) bool { return waiting(p, "ContainerCreating") })
		if got.Status.Phase != corev1.PodPending {
			t.Errorf("phase %s, want Pending", got.Status.Phase)
		}
	})
	t.Run("requests larger than the node", func(t *testing.T) {
		t.Parallel()
		huge := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000")}
		// Through the scheduler: never bound.
		p := busyboxPod(ns, "huge", c.image, "true")
		p.Spec.Containers[0].Resources.Requests = huge
		c.create(t, p)
		waitFor(t, 30*time.Second, "a FailedScheduling event", func() bool {
			return c.hasEvent(ns, "huge", "FailedScheduling", "Insufficient cpu")
		})
		// Bound directly: the kubelet refuses it as upstream does.
		p = busyboxPod(ns, "huge-bound", c.image, "true")
		p.Spec.Containers[0].Resources.Requests = huge
		p.Spec.NodeName = c.node
		c.create(t, p)
		got := c.waitPod(t, ns, "huge-bound", 30*time.Second, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		if got.Status.Reason != "OutOfcpu" || !strings.HasPrefix(got.Status.Message, "Pod was rejected: Node didn't have enough resource: cpu, requested: 1000000") {
			t.Errorf("reason %q message %q", got.Status.Reason, got.Status.Message)
		}
		if !c.hasEvent(ns, "huge-bound", "OutOfcpu", "Node didn't have enough resource: cpu") {
			t.Errorf("no OutOfcpu event:\n%s", c.events(ns, "huge-bound"))
		}
	})
	t.Run("a host port another pod holds", func(t *testing.T) {
		t.Parallel()
		port := int32(freePort(t))
		withPort := func(name string) *corev1.Pod {
			p := busyboxPod(ns, name, c.image, "sleep", "3600")
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: port, Protocol: corev1.ProtocolTCP}}
			return p
		}
		c.create(t, withPort("port-holder"))
		c.waitPod(t, ns, "port-holder", 60*time.Second, "Running", podRunningReady)
		// Through the scheduler: never bound.
		c.create(t, withPort("port-wanted"))
		waitFor(t, 30*time.Second, "a FailedScheduling event", func() bool {
			return c.hasEvent(ns, "port-wanted", "FailedScheduling", "didn't have free ports for the requested pod ports")
		})
		// Bound directly: the kubelet refuses it (upstream's NodePorts).
		p := withPort("port-bound")
		p.Spec.NodeName = c.node
		c.create(t, p)
		got := c.waitPod(t, ns, "port-bound", 30*time.Second, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		if got.Status.Reason != "NodePorts" || !strings.Contains(got.Status.Message, "didn't have free ports for the requested pod ports") {
			t.Errorf("reason %q message %q", got.Status.Reason, got.Status.Message)
		}
		if !c.hasEvent(ns, "port-bound", "NodePorts", "didn't have free ports") {
			t.Errorf("no NodePorts event:\n%s", c.events(ns, "port-bound"))
		}
	})
}

// TestAgentRestart kills the server with its agent (SIGKILL: no clean
// shutdown) and starts it again: running containers keep running and are
// adopted without a restart, and a pod deleted while the agent was down is
// cleaned up. It does not run in parallel: the other tests' pods start
// after it.
func TestAgentRestart(t *testing.T) {
	c := cluster(t)
	ns := c.namespace(t, "agent-restart")
	keep := c.create(t, busyboxPod(ns, "survivor", c.image, "sleep", "3600"))
	gone := c.create(t, busyboxPod(ns, "doomed", c.image, "sleep", "3600"))
	keep = c.waitPod(t, ns, "survivor", 60*time.Second, "Running", podRunningReady)
	gone = c.waitPod(t, ns, "doomed", 60*time.Second, "Running", podRunningReady)
	before := keep.Status.ContainerStatuses[0].ContainerID

	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	if n := c.runningContainers(t, keep.UID); n != 1 {
		t.Fatalf("%d running containers after the agent died, want 1", n)
	}

	// While the agent is down, the doomed pod is deleted: the API server
	// comes back alone (--disable-agent), the pod is deleted, then the
	// server starts again with its agent.
	if err := c.startWith(false); err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if err := c.client.CoreV1().Pods(ns).Delete(context.Background(), "doomed", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	p = c.proc
	c.mu.Unlock()
	c.stopProc(p)
	if n := c.runningContainers(t, gone.UID); n != 1 {
		t.Fatalf("%d running containers of the deleted pod before the agent is back, want 1", n)
	}
	if err := c.start(); err != nil {
		t.Fatal(err)
	}
	after := c.waitPod(t, ns, "survivor", 60*time.Second, "Running and Ready again", podRunningReady)
	if got := after.Status.ContainerStatuses[0]; got.ContainerID != before || got.RestartCount != 0 {
		t.Errorf("container %s (restarts %d) after the restart, want the same %s with no restart", got.ContainerID, got.RestartCount, before)
	}
	waitFor(t, 30*time.Second, "the deleted pod's containers to stop", func() bool { return c.runningContainers(t, gone.UID) == 0 })
}

// TestAgentHostNetworkAndHostPort: a hostNetwork pod has the node's IP,
// and a hostPort reaches a pod's server from the host through portmap.
func TestAgentHostNetworkAndHostPort(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "agent-host")
	node, err := c.client.CoreV1().Nodes().Get(context.Background(), c.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodeIP := ""
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			nodeIP = a.Address
		}
	}

	hn := busyboxPod(ns, "hostnet", c.image, "sleep", "3600")
	hn.Spec.HostNetwork = true
	c.create(t, hn)
	got := c.waitPod(t, ns, "hostnet", 60*time.Second, "Running", podRunningReady)
	if got.Status.PodIP != nodeIP || got.Status.HostIP != nodeIP {
		t.Errorf("hostNetwork pod: podIP %q hostIP %q, want the node's %q", got.Status.PodIP, got.Status.HostIP, nodeIP)
	}

	port := freePortNoT()
	web := busyboxPod(ns, "web", c.image, "sh", "-c", "mkdir -p /www; echo via-hostport > /www/index.html; exec httpd -f -p 8080 -h /www")
	web.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: int32(port), Protocol: corev1.ProtocolTCP}}
	c.create(t, web)
	c.waitPod(t, ns, "web", 60*time.Second, "Running", podRunningReady)
	waitFor(t, 20*time.Second, "the pod's server on the node's hostPort", func() bool {
		body, err := httpGet(fmt.Sprintf("http://%s:%d/", nodeIP, port))
		return err == nil && body == "via-hostport\n"
	})
}

// TestAgentInitAndSidecar: init containers run in order before the app,
// sharing an emptyDir; a sidecar (restartPolicy Always init container)
// starts before the app and keeps running beside it.
func TestAgentInitAndSidecar(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "agent-init")
	always := corev1.ContainerRestartPolicyAlways
	p := busyboxPod(ns, "staged", c.image, "sh", "-c", "cat /work/steps; echo app; sleep 3600")
	p.Spec.Volumes = []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	mount := []corev1.VolumeMount{{Name: "work", MountPath: "/work"}}
	p.Spec.Containers[0].VolumeMounts = mount
	p.Spec.InitContainers = []corev1.Container{
		{Name: "first", Image: c.image, Command: []string{"sh", "-c", "echo first >> /work/steps"}, VolumeMounts: mount},
		{Name: "helper", Image: c.image, Command: []string{"sh", "-c", "echo helper >> /work/steps; sleep 3600"}, VolumeMounts: mount, RestartPolicy: &always},
		{Name: "second", Image: c.image, Command: []string{"sh", "-c", "echo second >> /work/steps"}, VolumeMounts: mount},
	}
	c.create(t, p)
	got := c.waitPod(t, ns, "staged", 90*time.Second, "Running and Ready", podRunningReady)
	waitFor(t, 10*time.Second, "the app's output", func() bool {
		return c.logFile(t, got, "main", 0) == "first\nhelper\nsecond\napp\n"
	})
	for _, cs := range got.Status.InitContainerStatuses {
		switch cs.Name {
		case "helper":
			if cs.State.Running == nil || !cs.Ready {
				t.Errorf("sidecar %+v: want running and ready", cs.State)
			}
		default:
			if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 || cs.State.Terminated.Reason != "Completed" {
				t.Errorf("init container %s: %+v, want terminated Completed", cs.Name, cs.State)
			}
		}
	}
}
