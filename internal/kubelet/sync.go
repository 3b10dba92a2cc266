package kubelet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/kubelet/eviction"
	"github.com/skiff-sh/skiff/internal/kubelet/plan"
	"github.com/skiff-sh/skiff/internal/kubelet/podstate"
	"github.com/skiff-sh/skiff/internal/kubelet/podstatus"
)

// minGracePeriod is the least time a container gets to stop (upstream's
// minimumGracePeriodInSeconds).
const minGracePeriod = 2 * time.Second

// podSync is a pod worker's memory between syncs.
type podSync struct {
	reasons map[string]podstatus.Reason
	// lastStatus is the status last written (or found written); the
	// worker owns it, sent is the copy others read under Kubelet.mu.
	lastStatus *corev1.PodStatus
	sent       *corev1.PodStatus
	// terminated: containers stopped for good (terminal phase or deletion).
	terminated bool
	rejected   bool
	// retryAt is the earliest back-off expiry, to sync again then.
	retryAt time.Time
	// evict is the eviction manager's request (under Kubelet.mu).
	evict *evictRequest
	// firstSeen is when the kubelet first synced the pod; startRecorded
	// says the pod start metrics were taken (or need not be).
	firstSeen     time.Time
	startRecorded bool
	synced        bool
	// pulling is the time spent pulling images (excluded from the SLI).
	pulling time.Duration
	// In-place resize (resize.go): the PodResizePending condition, whether
	// an accepted resize is still being carried out (and its error), the
	// generation of the resize accepted last (0 when none is under way),
	// and the resources the runtime has for each running container, by id.
	resizePending    *corev1.PodCondition
	resizeInProgress bool
	resizeError      string
	resizeGeneration int64
	actual           map[string]*runtimeapi.LinuxContainerResources
}

func (k *Kubelet) podSyncState(uid types.UID) *podSync {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.syncs == nil {
		k.syncs = map[types.UID]*podSync{}
	}
	s, ok := k.syncs[uid]
	if !ok {
		s = &podSync{reasons: map[string]podstatus.Reason{}, firstSeen: k.clock.Now()}
		k.syncs[uid] = s
	}
	return s
}

func (k *Kubelet) apiPod(uid types.UID) *corev1.Pod {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.pods[uid]
}

// syncPod brings one pod to what its spec asks for and reports when to
// sync it next, or that the pod is gone and its worker can stop.
func (k *Kubelet) syncPod(ctx context.Context, uid types.UID) (time.Duration, bool) {
	logger := klog.FromContext(ctx)
	pod := k.apiPod(uid)
	st, err := k.readState(ctx, string(uid))
	if err != nil {
		logger.Info("Unable to read the pod's runtime state", "err", err)
		return 2 * time.Second, false
	}
	ps := k.podSyncState(uid)

	if pod == nil {
		// The API object is gone: stop and remove everything.
		k.killPod(ctx, nil, st, 0, "")
		if err := k.removePod(ctx, uid, st); err != nil {
			logger.Info("Unable to clean up a removed pod", "err", err)
			return 2 * time.Second, false
		}
		k.mu.Lock()
		delete(k.syncs, uid)
		delete(k.admitted, uid)
		k.mu.Unlock()
		k.alloc.remove(uid)
		return 0, true
	}
	pod = pod.DeepCopy()
	logger = logger.WithValues("pod", klog.KObj(pod))
	ctx = klog.NewContext(ctx, logger)

	if ps.rejected {
		return k.finishDeleted(ctx, pod, ps)
	}
	k.checkActiveDeadline(pod, ps)
	if ev := k.pendingEviction(ps); ev != nil && !ps.terminated {
		return k.syncEvicted(ctx, pod, ps, ev)
	}
	terminalPhase := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	if pod.DeletionTimestamp != nil || ps.terminated || terminalPhase {
		return k.syncTerminating(ctx, pod, st, ps)
	}

	if !k.admit(ctx, pod, ps) {
		return 0, false
	}
	k.probes.ensure(pod)
	// From here on the pod is the one the kubelet runs: its containers
	// have the allocated resources, which a resize changes (resize.go).
	pod = k.allocatedPod(ctx, pod, ps)

	// Volumes first: containers cannot start without them.
	volumePaths, verr := k.volumes.Setup(ctx, pod)
	if verr != nil {
		k.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedMount", "%s", firstLine(verr.Error()))
	}

	actions := plan.Compute(pod, st, k.probes.lookup)
	retry := k.execute(ctx, pod, st, actions, volumePaths, verr, ps)

	st, err = k.readState(ctx, string(uid))
	if err != nil {
		return 2 * time.Second, false
	}
	if k.actuateResize(ctx, pod, st, ps) {
		if st, err = k.readState(ctx, string(uid)); err != nil {
			return 2 * time.Second, false
		}
		if retry <= 0 || retry > time.Second {
			retry = time.Second
		}
	}
	status := k.generateStatus(pod, st, ps, false)
	if status.Phase == corev1.PodSucceeded || status.Phase == corev1.PodFailed {
		// Every container is done for good: stop what is left (sidecars,
		// the sandbox) and write the final status.
		ps.terminated = true
		k.writeStatus(ctx, pod, status, ps)
		return time.Millisecond, false
	}
	k.writeStatus(ctx, pod, status, ps)
	k.recordPodStart(pod, status, ps)
	if verr != nil && (retry <= 0 || retry > 2*time.Second) {
		retry = 2 * time.Second
	}
	if d, ok := k.untilActiveDeadline(pod, ps); ok && (retry <= 0 || d < retry) {
		retry = d
	}
	return retry, false
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// syncTerminating stops the pod's containers (with grace when the pod is
// being deleted), writes its terminal status and, for a deleted pod,
// deletes the API object with grace 0 and a UID precondition.
func (k *Kubelet) syncTerminating(ctx context.Context, pod *corev1.Pod, st *podstate.Pod, ps *podSync) (time.Duration, bool) {
	grace := gracePeriod(pod)
	if pod.DeletionTimestamp == nil {
		grace = gracePeriodSpec(pod)
	}
	if st.RunningContainers() > 0 || anySandboxReady(st) {
		k.killPod(ctx, pod, st, grace, "")
	}
	k.probes.removePod(pod.UID)
	st2, err := k.readState(ctx, string(pod.UID))
	if err != nil {
		return 2 * time.Second, false
	}
	if st2.RunningContainers() > 0 {
		return time.Second, false
	}
	ps.terminated = true
	ps.resizePending, ps.resizeInProgress = nil, false
	if len(st2.Sandboxes) == 0 && pod.DeletionTimestamp == nil {
		// Nothing ever ran here (a rejected pod, or one finished before
		// the node's runtime state was lost): its status stays as it is.
		return time.Minute, false
	}
	status := k.generateStatus(pod, st2, ps, true)
	if pod.DeletionTimestamp == nil && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed) && len(pod.Status.ContainerStatuses) > 0 {
		// Already terminal in the API: keep what it says (the phase never
		// leaves a terminal value).
		status.Phase = pod.Status.Phase
	}
	k.writeStatus(ctx, pod, status, ps)
	if pod.DeletionTimestamp == nil {
		return time.Minute, false
	}
	return k.finishDeleted(ctx, pod, ps)
}

// finishDeleted removes a deleted pod's API object once its containers
// are gone (the last step of graceful deletion).
func (k *Kubelet) finishDeleted(ctx context.Context, pod *corev1.Pod, ps *podSync) (time.Duration, bool) {
	if pod.DeletionTimestamp == nil {
		return time.Minute, false
	}
	zero := int64(0)
	err := k.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		klog.FromContext(ctx).Info("Unable to delete the pod object", "err", err)
		return 2 * time.Second, false
	}
	// The informer's delete event wakes the worker to clean up.
	return 5 * time.Second, false
}

func anySandboxReady(st *podstate.Pod) bool {
	for _, s := range st.Sandboxes {
		if s.Ready {
			return true
		}
	}
	return false
}

// gracePeriod is how long a deleted pod's containers get to stop.
func gracePeriod(pod *corev1.Pod) time.Duration {
	if pod.DeletionGracePeriodSeconds != nil {
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	return gracePeriodSpec(pod)
}

func gracePeriodSpec(pod *corev1.Pod) time.Duration {
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

func (k *Kubelet) generateStatus(pod *corev1.Pod, st *podstate.Pod, ps *podSync, terminal bool) corev1.PodStatus {
	base := pod
	if ps.lastStatus != nil {
		// Our last write may not be in the informer yet; the conditions
		// others own (DisruptionTarget from an eviction, readiness gates)
		// are the API's, or the patch would delete them.
		base = pod.DeepCopy()
		base.Status = *ps.lastStatus.DeepCopy()
		base.Status.Conditions = mergeConditions(ps.lastStatus.Conditions, pod.Status.Conditions)
	}
	s := podstatus.Generate(podstatus.Input{
		Pod:      base,
		State:    st,
		Reasons:  ps.reasons,
		Probes:   k.probes.lookup,
		HostIPs:  k.hostIPs(),
		Terminal: terminal,
		Now:      k.clock.Now(),
		Actual:   ps.actual,
	})
	setResizeConditions(&s, base.Status.Conditions, ps, pod.Generation, metav1.NewTime(k.clock.Now().Truncate(time.Second)))
	// An evicted pod turns Failed once its containers have stopped, not
	// before (upstream's status manager holds back a terminal phase while
	// containers may run).
	if ev := k.pendingEviction(ps); ev != nil && (st == nil || st.RunningContainers() == 0) {
		applyEviction(pod, &s, ev, k.clock.Now())
	}
	return s
}

// mergeConditions is the kubelet's own conditions from mine (the ones it
// generates and the resize ones) and everyone else's from api.
func mergeConditions(mine, api []corev1.PodCondition) []corev1.PodCondition {
	own := func(t corev1.PodConditionType) bool {
		return podstatus.ByKubelet(t) || t == corev1.PodResizePending || t == corev1.PodResizeInProgress
	}
	var out []corev1.PodCondition
	for _, c := range mine {
		if own(c.Type) {
			out = append(out, c)
		}
	}
	for _, c := range api {
		if !own(c.Type) {
			out = append(out, c)
		}
	}
	return out
}

// writeStatus PATCHes the pod's status when it differs from the API's and
// from the last one written.
func (k *Kubelet) writeStatus(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus, ps *podSync) {
	if apiequality.Semantic.DeepEqual(pod.Status, status) {
		k.setLastStatus(ps, status)
		return
	}
	if ps.lastStatus != nil && apiequality.Semantic.DeepEqual(*ps.lastStatus, status) && pod.Status.Phase == status.Phase {
		// Written already; the informer has not caught up.
		return
	}
	type statusOnly struct {
		Metadata struct {
			UID types.UID `json:"uid"`
		} `json:"metadata"`
		Status corev1.PodStatus `json:"status"`
	}
	// The uid only in the new object, so that it is in the patch: the API
	// server refuses it if the pod was deleted and created again under the
	// same name (a StatefulSet's), instead of giving the new pod this one's
	// status.
	var oldObj, newObj statusOnly
	newObj.Metadata.UID = pod.UID
	oldObj.Status, newObj.Status = pod.Status, status
	oldJSON, _ := json.Marshal(oldObj)
	newJSON, _ := json.Marshal(newObj)
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, corev1.Pod{})
	if err != nil {
		klog.FromContext(ctx).Error(err, "Unable to build the status patch")
		return
	}
	if _, err := k.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		klog.FromContext(ctx).Info("Unable to update the pod status", "err", err)
		return
	}
	k.setLastStatus(ps, status)
}

func (k *Kubelet) setLastStatus(ps *podSync, status corev1.PodStatus) {
	ps.lastStatus = status.DeepCopy()
	k.mu.Lock()
	ps.sent = ps.lastStatus
	k.mu.Unlock()
}

// execute carries out the plan and returns when to sync again (the
// earliest back-off expiry), 0 for the default resync.
func (k *Kubelet) execute(ctx context.Context, pod *corev1.Pod, st *podstate.Pod, a plan.Actions, volumePaths map[string]string, volumeErr error, ps *podSync) time.Duration {
	logger := klog.FromContext(ctx)
	var retry time.Duration
	noteRetry := func(d time.Duration) {
		if d > 0 && (retry == 0 || d < retry) {
			retry = d
		}
	}

	if a.KillPod {
		if a.CreateSandbox && len(st.Sandboxes) > 0 {
			k.recorder.Event(pod, corev1.EventTypeNormal, "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.")
		}
		k.killPod(ctx, pod, st, gracePeriodSpec(pod), "")
	} else {
		var wg sync.WaitGroup
		for _, kill := range a.ContainersToKill {
			spec := specByName(pod, kill.Name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				k.killContainer(ctx, pod, spec, kill.ID, gracePeriodSpec(pod), kill.Message)
			}()
		}
		wg.Wait()
	}

	sandboxID := a.SandboxID
	var podIPs []string
	if a.CreateSandbox {
		if volumeErr != nil {
			return 2 * time.Second
		}
		if !pod.Spec.HostNetwork && !k.isNetworkReady() {
			// The node has no pod network yet (no pod CIDR, no CNI config).
			ps.reasons = map[string]podstatus.Reason{}
			return time.Second
		}
		t0 := k.clock.Now()
		id, err := k.createSandbox(ctx, pod, a.Attempt)
		logger.V(2).Info("RunPodSandbox", "took", k.clock.Since(t0), "err", err)
		if err != nil {
			k.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
			logger.Info("Unable to create the pod sandbox", "err", err)
			return 2 * time.Second
		}
		sandboxID = id
	}
	if sandboxID == "" {
		return 0
	}
	if resp, err := k.runtime.PodSandboxStatus(ctx, sandboxID, false); err == nil {
		if ip := resp.GetStatus().GetNetwork().GetIp(); ip != "" {
			podIPs = append(podIPs, ip)
		}
	}
	if pod.Spec.HostNetwork {
		podIPs = k.hostIPs()
	}
	sandboxConfig := k.sandboxConfig(pod, a.Attempt)
	if volumeErr != nil {
		// Containers whose volumes are missing wait in ContainerCreating.
		return 2 * time.Second
	}
	if err := k.writeEtcHosts(pod, podIPs); err != nil {
		logger.Info("Unable to write the pod's hosts file", "err", err)
	}

	start := func(c *corev1.Container) bool {
		t0 := k.clock.Now()
		d, err := k.startContainer(ctx, pod, st, c, sandboxID, sandboxConfig, volumePaths, podIPs)
		logger.V(2).Info("Started container", "container", c.Name, "took", k.clock.Since(t0), "err", err)
		if err != nil {
			var se *startError
			if errors.As(err, &se) {
				ps.reasons[c.Name] = se.Reason
			} else {
				ps.reasons[c.Name] = podstatus.Reason{Reason: ReasonRunContainerError, Message: err.Error()}
			}
			noteRetry(d)
			if d == 0 {
				noteRetry(2 * time.Second)
			}
			return false
		}
		delete(ps.reasons, c.Name)
		return true
	}
	for _, i := range a.InitContainersToStart {
		c := &pod.Spec.InitContainers[i]
		if !start(c) {
			// A regular init container blocks the ones after it; a sidecar
			// that fails to start waits for its back-off as well.
			break
		}
	}
	for _, i := range a.ContainersToStart {
		start(&pod.Spec.Containers[i])
	}
	for _, i := range a.EphemeralContainersToStart {
		c := corev1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		start(&c)
	}
	return retry
}

func specByName(pod *corev1.Pod, name string) *corev1.Container {
	for _, c := range allContainers(pod) {
		if c.Name == name {
			return c
		}
	}
	return ephemeralSpec(pod, name)
}

func (k *Kubelet) isNetworkReady() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.networkReady
}

func (k *Kubelet) createSandbox(ctx context.Context, pod *corev1.Pod, attempt int) (string, error) {
	cfg := k.sandboxConfig(pod, attempt)
	if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
		return "", err
	}
	handler, err := k.runtimeHandler(pod)
	if err != nil {
		return "", err
	}
	return k.runtime.RunPodSandbox(ctx, cfg, handler)
}

// backoffKey identifies a container's crash-loop back-off: the pod, the
// container and its spec.
func backoffKey(pod *corev1.Pod, c *corev1.Container) string {
	return string(pod.UID) + "/" + c.Name + "/" + plan.Hash(c)
}

// startContainer pulls, creates and starts one container. On failure it
// returns the error (a *startError with the waiting reason) and, for a
// back-off, how long until it may start.
func (k *Kubelet) startContainer(ctx context.Context, pod *corev1.Pod, st *podstate.Pod, c *corev1.Container, sandboxID string,
	sandboxConfig *runtimeapi.PodSandboxConfig, volumePaths map[string]string, podIPs []string) (time.Duration, error) {
	ref := k.containerRef(pod, c)
	restartCount := 0
	if last := st.Latest(c.Name); last != nil {
		restartCount = last.Attempt + 1
		if last.State == podstate.Exited {
			key := backoffKey(pod, c)
			if in, delay := k.crashBackoff.InBackoff(key, last.FinishedAt); in {
				k.recorder.Eventf(ref, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s", c.Name, podDesc(pod))
				wait := delay - k.clock.Since(last.FinishedAt)
				return wait, newStartError(ReasonCrashLoopBackOff,
					fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", delay, c.Name, podDesc(pod)))
			}
			k.crashBackoff.Next(key, last.FinishedAt)
		}
	}
	imageRef, err := k.ensureImage(ctx, pod, c)
	if err != nil {
		return 0, err
	}
	imageVolumes, err := k.ensureImageVolumes(ctx, pod, c)
	if err != nil {
		return 0, err
	}
	cfg, err := k.containerConfig(ctx, pod, c, restartCount, imageRef, volumePaths, imageVolumes, podIPs)
	if err != nil {
		k.recorder.Eventf(ref, corev1.EventTypeWarning, "Failed", "Error: %v", err)
		return 0, newStartError(ReasonCreateContainerConfigError, err.Error())
	}
	logDir := filepath.Join(sandboxConfig.LogDirectory, c.Name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return 0, err
	}
	id, err := k.runtime.CreateContainer(ctx, sandboxID, cfg, sandboxConfig)
	if err != nil {
		k.recorder.Eventf(ref, corev1.EventTypeWarning, "Failed", "Error: %s", errMessage(err))
		return 0, newStartError(ReasonCreateContainerError, errMessage(err))
	}
	k.recorder.Event(ref, corev1.EventTypeNormal, "Created", "Container created")
	if err := k.runtime.StartContainer(ctx, id); err != nil {
		k.recorder.Eventf(ref, corev1.EventTypeWarning, "Failed", "Error: %s", errMessage(err))
		return 0, newStartError(ReasonRunContainerError, errMessage(err))
	}
	k.recorder.Event(ref, corev1.EventTypeNormal, "Started", "Container started")
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		if msg, err := k.runHook(ctx, pod, c, id, c.Lifecycle.PostStart, podIPs, 0); err != nil {
			k.recorder.Eventf(ref, corev1.EventTypeWarning, "FailedPostStartHook", "PostStartHook failed")
			k.killContainer(ctx, pod, c, id, gracePeriodSpec(pod), "FailedPostStartHook")
			return 0, newStartError(ReasonPostStartHookError, msg)
		}
	}
	return 0, nil
}

func podDesc(pod *corev1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// podRef is the object events about the pod as a whole refer to.
func podRef(pod *corev1.Pod) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		APIVersion: "v1", ResourceVersion: pod.ResourceVersion}
}

// containerRef is the object events about a container refer to.
func (k *Kubelet) containerRef(pod *corev1.Pod, c *corev1.Container) *corev1.ObjectReference {
	field := fmt.Sprintf("spec.containers{%s}", c.Name)
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			field = fmt.Sprintf("spec.initContainers{%s}", c.Name)
		}
	}
	if ephemeralSpec(pod, c.Name) != nil {
		field = fmt.Sprintf("spec.ephemeralContainers{%s}", c.Name)
	}
	return &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		APIVersion: "v1", ResourceVersion: pod.ResourceVersion, FieldPath: field}
}

// killContainer runs the preStop hook, then stops the container with what
// is left of the grace period (at least 2 s): SIGTERM (or the image's stop
// signal), then SIGKILL.
func (k *Kubelet) killContainer(ctx context.Context, pod *corev1.Pod, spec *corev1.Container, id string, grace time.Duration, message string) {
	logger := klog.FromContext(ctx)
	start := k.clock.Now()
	if spec != nil && pod != nil {
		if message == "" {
			message = fmt.Sprintf("Stopping container %s", spec.Name)
		}
		k.recorder.Event(k.containerRef(pod, spec), corev1.EventTypeNormal, "Killing", message)
		if spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil {
			hookCtx, cancel := context.WithTimeout(ctx, grace)
			if _, err := k.runHook(hookCtx, pod, spec, id, spec.Lifecycle.PreStop, k.podIPsOf(ctx, pod), grace); err != nil {
				k.recorder.Event(k.containerRef(pod, spec), corev1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed")
			}
			cancel()
		}
	}
	left := grace - k.clock.Since(start)
	if left < minGracePeriod {
		left = minGracePeriod
	}
	if err := k.runtime.StopContainer(ctx, id, int64(left.Round(time.Second)/time.Second)); err != nil {
		logger.Info("Unable to stop container", "containerID", id, "err", err)
	}
}

func (k *Kubelet) podIPsOf(ctx context.Context, pod *corev1.Pod) []string {
	if pod.Spec.HostNetwork {
		return k.hostIPs()
	}
	var ips []string
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	return ips
}

// killPod stops every running container (regular ones first, then init
// and sidecar containers) and every ready sandbox.
func (k *Kubelet) killPod(ctx context.Context, pod *corev1.Pod, st *podstate.Pod, grace time.Duration, message string) {
	isInit := func(name string) bool {
		if pod == nil {
			return false
		}
		for i := range pod.Spec.InitContainers {
			if pod.Spec.InitContainers[i].Name == name {
				return true
			}
		}
		return false
	}
	for _, initPhase := range []bool{false, true} {
		var wg sync.WaitGroup
		for _, c := range st.Containers {
			if c.State != podstate.Running && c.State != podstate.Created && c.State != podstate.Unknown {
				continue
			}
			if isInit(c.Name) != initPhase {
				continue
			}
			var spec *corev1.Container
			if pod != nil {
				spec = specByName(pod, c.Name)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				k.killContainer(ctx, pod, spec, c.ID, grace, message)
			}()
		}
		wg.Wait()
	}
	for _, s := range st.Sandboxes {
		if s.Ready {
			if err := k.runtime.StopPodSandbox(ctx, s.ID); err != nil {
				klog.FromContext(ctx).Info("Unable to stop the pod sandbox", "sandbox", s.ID, "err", err)
			}
		}
	}
}

// removePod removes a gone pod's containers, sandboxes and directories,
// after killPod.
func (k *Kubelet) removePod(ctx context.Context, uid types.UID, st *podstate.Pod) error {
	for _, c := range st.Containers {
		if err := k.runtime.RemoveContainer(ctx, c.ID); err != nil {
			return err
		}
	}
	for _, s := range st.Sandboxes {
		// No StopPodSandbox here: the kill before stopped the sandboxes,
		// RemovePodSandbox stops one anyway, and containerd tears the pod
		// network down (CNI DEL, every plugin of the network run again) at
		// each stop.
		if err := k.runtime.RemovePodSandbox(ctx, s.ID); err != nil {
			return err
		}
	}
	return k.volumes.Teardown(string(uid))
}

// admit checks once that the pod fits the node (upstream's resource
// predicates); a pod that does not fit is Failed with OutOf<resource>.
func (k *Kubelet) admit(ctx context.Context, pod *corev1.Pod, ps *podSync) bool {
	k.mu.Lock()
	done := k.admitted[pod.UID]
	k.mu.Unlock()
	if done {
		return true
	}
	// A pod the runtime already runs (an agent restart) was admitted before.
	if pod.Status.Phase == corev1.PodRunning {
		k.markAdmitted(pod.UID)
		return true
	}
	node := k.currentNode()
	if node == nil {
		return false
	}
	var others []*corev1.Pod
	k.mu.Lock()
	for uid, p := range k.pods {
		if uid != pod.UID && k.admitted[uid] && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			others = append(others, p)
		}
	}
	k.mu.Unlock()
	for i, p := range others { // with what they were allocated (resize.go)
		a, _ := k.alloc.get(p.UID)
		others[i] = withAllocation(p, a)
	}
	reason, msg := fits(pod, others, node.Status.Allocatable)
	if reason == "" {
		if ok, pmsg := k.admitPressure(pod); !ok {
			reason, msg = eviction.Reason, pmsg
		}
	}
	if reason != "" {
		k.recorder.Event(pod, corev1.EventTypeWarning, reason, msg)
		status := podstatus.Rejected(pod, reason, msg, k.clock.Now())
		ps.rejected = true
		k.writeStatus(ctx, pod, status, ps)
		return false
	}
	k.markAdmitted(pod.UID)
	return true
}

func (k *Kubelet) markAdmitted(uid types.UID) {
	k.mu.Lock()
	k.admitted[uid] = true
	k.mu.Unlock()
}
