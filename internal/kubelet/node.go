package kubelet

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/kubelet/cni"
	"github.com/skiff-sh/skiff/internal/kubelet/eviction"
)

// Machine is what the node reports about the host.
type Machine struct {
	CPUs           int
	MemoryBytes    int64
	EphemeralBytes int64
	MachineID      string
	SystemUUID     string
	BootID         string
	KernelVersion  string
	OSImage        string
	Hostname       string
}

// readMachine reads the host's facts (best effort).
func readMachine(root string) Machine {
	m := Machine{CPUs: runtime.NumCPU()}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) >= 2 && fields[0] == "MemTotal:" {
				kb, _ := strconv.ParseInt(fields[1], 10, 64)
				m.MemoryBytes = kb * 1024
			}
		}
		f.Close()
	}
	var fs unix.Statfs_t
	if unix.Statfs(root, &fs) == nil {
		m.EphemeralBytes = int64(fs.Blocks) * int64(fs.Bsize)
	}
	read := func(p string) string { b, _ := os.ReadFile(p); return strings.TrimSpace(string(b)) }
	m.MachineID = read("/etc/machine-id")
	m.SystemUUID = read("/sys/class/dmi/id/product_uuid")
	m.BootID = read("/proc/sys/kernel/random/boot_id")
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.KernelVersion = unix.ByteSliceToString(u.Release[:])
	}
	m.OSImage = "Linux"
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
				m.OSImage = strings.Trim(v, `"`)
			}
		}
	}
	m.Hostname, _ = os.Hostname()
	return m
}

// Node conditions' reasons and messages, as upstream's kubelet words them.
const (
	msgSufficientMemory = "kubelet has sufficient memory available"
	msgNoDiskPressure   = "kubelet has no disk pressure"
	msgSufficientPID    = "kubelet has sufficient PID available"
	msgReady            = "kubelet is posting ready status"
)

// capacity returns the node's capacity and allocatable: allocatable is
// capacity minus kube-reserved, system-reserved and the hard eviction
// thresholds (memory.available, nodefs.available), as upstream.
func capacity(m Machine, o *Options) (corev1.ResourceList, corev1.ResourceList) {
	capList := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(m.CPUs), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(m.MemoryBytes, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(m.EphemeralBytes, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(int64(o.MaxPods), resource.DecimalSI),
		"hugepages-1Gi":                 *resource.NewQuantity(0, resource.BinarySI),
		"hugepages-2Mi":                 *resource.NewQuantity(0, resource.BinarySI),
	}
	alloc := corev1.ResourceList{}
	for name, q := range capList {
		v := q.DeepCopy()
		for _, reserved := range []corev1.ResourceList{o.KubeReserved, o.SystemReserved} {
			if r, ok := reserved[name]; ok {
				v.Sub(r)
			}
		}
		switch name {
		case corev1.ResourceMemory:
			v.Sub(*resource.NewQuantity(eviction.HardValue(o.Eviction.Thresholds, eviction.SignalMemoryAvailable, m.MemoryBytes), resource.BinarySI))
		case corev1.ResourceEphemeralStorage:
			v.Sub(*resource.NewQuantity(eviction.HardValue(o.Eviction.Thresholds, eviction.SignalNodeFsAvailable, m.EphemeralBytes), resource.BinarySI))
		}
		if v.Sign() < 0 {
			v = *resource.NewQuantity(0, q.Format)
		}
		alloc[name] = v
	}
	return capList, alloc
}

// nodeConditions returns the four kubelet conditions; pressure lists the
// pressure conditions that are true (the eviction manager's). Transition
// times are kept from old when the status did not change.
func nodeConditions(old []corev1.NodeCondition, readyErr string, pressure []corev1.NodeConditionType, now metav1.Time) []corev1.NodeCondition {
	want := []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: msgSufficientMemory},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: msgNoDiskPressure},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: msgSufficientPID},
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: msgReady},
	}
	for _, p := range pressure {
		switch p {
		case corev1.NodeMemoryPressure:
			want[0] = corev1.NodeCondition{Type: p, Status: corev1.ConditionTrue, Reason: "KubeletHasInsufficientMemory", Message: "kubelet has insufficient memory available"}
		case corev1.NodeDiskPressure:
			want[1] = corev1.NodeCondition{Type: p, Status: corev1.ConditionTrue, Reason: "KubeletHasDiskPressure", Message: "kubelet has disk pressure"}
		case corev1.NodePIDPressure:
			want[2] = corev1.NodeCondition{Type: p, Status: corev1.ConditionTrue, Reason: "KubeletHasInsufficientPID", Message: "kubelet has insufficient PID available"}
		}
	}
	if readyErr != "" {
		want[3] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: readyErr}
	}
	for i := range want {
		want[i].LastHeartbeatTime = now
		want[i].LastTransitionTime = now
		for _, o := range old {
			if o.Type == want[i].Type && o.Status == want[i].Status {
				want[i].LastTransitionTime = o.LastTransitionTime
			}
		}
	}
	// Conditions other components own are kept.
	for _, o := range old {
		switch o.Type {
		case corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeReady:
		default:
			want = append(want, o)
		}
	}
	return want
}

// desiredStatus is the node status the kubelet reports now.
func (k *Kubelet) desiredStatus(old *corev1.Node, m Machine, readyErr string) corev1.NodeStatus {
	now := metav1.NewTime(k.clock.Now().Truncate(time.Second))
	capList, alloc := capacity(m, &k.opts)
	s := corev1.NodeStatus{
		Capacity:        capList,
		Allocatable:     alloc,
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: k.nodeIP()}, {Type: corev1.NodeHostName, Address: m.Hostname}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(k.opts.Port)}},
		NodeInfo: corev1.NodeSystemInfo{
			MachineID:               m.MachineID,
			SystemUUID:              m.SystemUUID,
			BootID:                  m.BootID,
			KernelVersion:           m.KernelVersion,
			OSImage:                 m.OSImage,
			ContainerRuntimeVersion: k.runtimeName + "://" + k.runtimeVersion,
			KubeletVersion:          Version,
			OperatingSystem:         "linux",
			Architecture:            arch(),
		},
	}
	var oldConds []corev1.NodeCondition
	if old != nil {
		oldConds = old.Status.Conditions
		s.Images = old.Status.Images
		s.VolumesInUse = old.Status.VolumesInUse
		s.VolumesAttached = old.Status.VolumesAttached
		s.Config = old.Status.Config
		s.RuntimeHandlers = old.Status.RuntimeHandlers
		s.Features = old.Status.Features
		s.DeclaredFeatures = old.Status.DeclaredFeatures
	}
	if hs := k.nodeRuntimeHandlers(); hs != nil {
		s.RuntimeHandlers = hs
	}
	s.Conditions = nodeConditions(oldConds, readyErr, k.pressureConditions(), now)
	return s
}

func (k *Kubelet) nodeIP() string {
	if k.opts.NodeIP != "" {
		return k.opts.NodeIP
	}
	return primaryAddress()
}

// runtimeReadyError is empty when the runtime and its network are ready,
// else upstream's NotReady message.
func (k *Kubelet) runtimeReadyError(ctx context.Context) string {
	resp, err := k.runtime.Status(ctx, false)
	if err != nil {
		return fmt.Sprintf("container runtime is down: %v", err)
	}
	var msgs []string
	for _, c := range resp.GetStatus().GetConditions() {
		if (c.Type == runtimeapi.RuntimeReady || c.Type == runtimeapi.NetworkReady) && !c.Status {
			msgs = append(msgs, fmt.Sprintf("%s=false reason:%s message:%s", c.Type, c.Reason, c.Message))
		}
	}
	if hs := resp.GetRuntimeHandlers(); hs != nil {
		k.setRuntimeHandlers(hs)
	}
	netReady := true
	for _, c := range resp.GetStatus().GetConditions() {
		if c.Type == runtimeapi.NetworkReady && !c.Status {
			netReady = false
		}
	}
	k.mu.Lock()
	k.networkReady = netReady
	k.mu.Unlock()
	if len(msgs) == 0 {
		return ""
	}
	prefix := "container runtime network not ready: "
	if len(msgs) > 1 || !strings.HasPrefix(msgs[0], runtimeapi.NetworkReady) {
		prefix = "container runtime not ready: "
	}
	return prefix + strings.Join(msgs, ", ")
}

// registerNode creates the Node, or updates the one a previous run left.
func (k *Kubelet) registerNode(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	m := readMachine(k.opts.RootDir)
	k.mu.Lock()
	k.hostAddrs = []string{k.nodeIP()}
	k.mu.Unlock()
	labels := map[string]string{
		corev1.LabelHostname:      k.opts.NodeName,
		corev1.LabelOSStable:      "linux",
		corev1.LabelArchStable:    arch(),
		"beta.kubernetes.io/os":   "linux",
		"beta.kubernetes.io/arch": arch(),
	}
	for key, v := range k.opts.NodeLabels {
		labels[key] = v
	}
	return wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		readyErr := k.runtimeReadyError(ctx)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: k.opts.NodeName, Labels: labels,
				Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
			Spec: corev1.NodeSpec{Taints: k.opts.RegisterWithTaints, PodCIDR: k.opts.PodCIDR},
		}
		if k.opts.PodCIDR != "" {
			node.Spec.PodCIDRs = []string{k.opts.PodCIDR}
		}
		node.Status = k.desiredStatus(nil, m, readyErr)
		created, err := k.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err == nil {
			k.setNode(created)
			logger.Info("Registered node")
			return true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			logger.Info("Unable to register node", "err", err)
			return false, nil
		}
		existing, err := k.client.CoreV1().Nodes().Get(ctx, k.opts.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		updated := existing.DeepCopy()
		changed := false
		for key, v := range labels {
			if updated.Labels[key] != v {
				if updated.Labels == nil {
					updated.Labels = map[string]string{}
				}
				updated.Labels[key] = v
				changed = true
			}
		}
		if updated.Spec.PodCIDR == "" && k.opts.PodCIDR != "" {
			updated.Spec.PodCIDR, updated.Spec.PodCIDRs = k.opts.PodCIDR, []string{k.opts.PodCIDR}
			changed = true
		}
		if changed {
			if updated, err = k.client.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
				return false, nil
			}
		}
		if err := k.patchNodeStatus(ctx, updated, k.desiredStatus(updated, m, readyErr)); err != nil {
			logger.Info("Unable to update node status", "err", err)
			return false, nil
		}
		logger.Info("Node was already registered; status updated")
		return true, nil
	})
}

func (k *Kubelet) setNode(n *corev1.Node) {
	k.mu.Lock()
	k.node = n
	k.mu.Unlock()
}

func (k *Kubelet) currentNode() *corev1.Node {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.node
}

func (k *Kubelet) patchNodeStatus(ctx context.Context, node *corev1.Node, status corev1.NodeStatus) error {
	body, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	updated, err := k.client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	if err != nil {
		return err
	}
	k.setNode(updated)
	return nil
}

// statusLoop reports the node status every StatusReportFrequency, and at
// once when the Ready condition or the allocatable resources change
// (checked every 10 s).
func (k *Kubelet) statusLoop(ctx context.Context) {
	logger := klog.FromContext(ctx)
	m := readMachine(k.opts.RootDir)
	lastReport := k.clock.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.clock.After(10 * time.Second):
		case <-k.statusKick:
		}
		node := k.currentNode()
		if node == nil {
			continue
		}
		readyErr := k.runtimeReadyError(ctx)
		want := k.desiredStatus(node, m, readyErr)
		if k.clock.Since(lastReport) < k.opts.StatusReportFrequency && !statusChanged(node.Status, want) {
			continue
		}
		if err := k.patchNodeStatus(ctx, node, want); err != nil {
			if apierrors.IsNotFound(err) {
				logger.Info("Node was deleted; registering it again")
				_ = k.registerNode(ctx)
			} else {
				logger.Info("Unable to update node status", "err", err)
			}
			continue
		}
		lastReport = k.clock.Now()
	}
}

// statusChanged ignores heartbeat times.
func statusChanged(old, want corev1.NodeStatus) bool {
	strip := func(s corev1.NodeStatus) corev1.NodeStatus {
		s = *s.DeepCopy()
		for i := range s.Conditions {
			s.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		return s
	}
	return !apiequality.Semantic.DeepEqual(strip(old), strip(want))
}

// leaseLoop keeps the node's Lease, renewed every quarter of its duration.
func (k *Kubelet) leaseLoop(ctx context.Context) {
	logger := klog.FromContext(ctx)
	interval := k.opts.LeaseDuration / 4
	for {
		if err := k.renewLease(ctx); err != nil && ctx.Err() == nil {
			logger.Info("Unable to renew the node lease", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-k.clock.After(interval):
		}
	}
}

func (k *Kubelet) renewLease(ctx context.Context) error {
	leases := k.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	want := leaseFor(k.currentNode(), k.opts.NodeName, k.opts.LeaseDuration, k.clock.Now())
	cur, err := leases.Get(ctx, k.opts.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	cur.Spec = want.Spec
	if len(cur.OwnerReferences) == 0 {
		cur.OwnerReferences = want.OwnerReferences
	}
	_, err = leases.Update(ctx, cur, metav1.UpdateOptions{})
	return err
}

// nodeChanged notices the node's pod CIDR and writes the CNI config.
func (k *Kubelet) nodeChanged(ctx context.Context, n *corev1.Node) {
	k.setNode(n)
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	if len(cidrs) == 0 {
		return
	}
	logger := klog.FromContext(ctx)
	if k.opts.CNIConfDir != "" {
		conf := k.opts.CNI
		conf.PodCIDRs = cidrs
		changed, err := cni.Write(k.opts.CNIConfDir, conf)
		if err != nil {
			logger.Error(err, "Unable to write the CNI config")
			return
		}
		if changed {
			logger.Info("Wrote the CNI config", "podCIDRs", cidrs, "dir", k.opts.CNIConfDir)
			// The runtime's network turns ready within a moment: report it
			// then, not at the next 10 s check.
			go func() {
				for i := 0; i < 20; i++ {
					select {
					case <-ctx.Done():
						return
					case <-k.clock.After(250 * time.Millisecond):
					}
					if k.runtimeReadyError(ctx) == "" {
						k.kickStatus()
						return
					}
				}
			}()
		}
	}
	if err := k.runtime.UpdateRuntimeConfig(ctx, &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: strings.Join(cidrs, ",")}}); err != nil {
		logger.V(2).Info("Unable to pass the pod CIDR to the runtime", "err", err)
	}
}

// kickStatus makes the status loop check the node status now.
func (k *Kubelet) kickStatus() {
	select {
	case k.statusKick <- struct{}{}:
	default:
	}
}
