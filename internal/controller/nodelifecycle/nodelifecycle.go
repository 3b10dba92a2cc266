// Package nodelifecycle is the node lifecycle controller. It watches node
// Leases in kube-node-lease and node status and
//
//   - marks a node's conditions Unknown (NodeStatusUnknown, "Kubelet
//     stopped posting node status.") when it has not been heard from for
//     NodeMonitorGracePeriod, and marks its pods not ready;
//   - keeps the NoSchedule taints that follow the node's conditions
//     (removing the API server's not-ready taint once the node is Ready);
//   - taints unhealthy nodes node.kubernetes.io/unreachable or not-ready
//     with effect NoExecute, rate-limited per zone (NodeEvictionRate,
//     SecondaryNodeEvictionRate in a partially disrupted large zone, none
//     in a partially disrupted small zone, and no tainting at all when
//     every zone is fully disrupted), and untaints them when they return;
//   - evicts (deletes) pods from NoExecute-tainted nodes: at once without
//     a matching toleration, after tolerationSeconds with one.
//
// The decisions are pure functions (decide.go); time comes from the
// injected clock.
package nodelifecycle

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Name is the controller's name in the manager's registry.
const Name = "nodelifecycle"

// LeaseNamespace holds the node heartbeat Leases.
const LeaseNamespace = corev1.NamespaceNodeLease

// EvictionPeriod is how often the zone tainting queues are drained.
const EvictionPeriod = 100 * time.Millisecond

// nodeNameIndex indexes pods by spec.nodeName.
const nodeNameIndex = "skiff.nodelifecycle/nodeName"

// AddPodIndex adds the controller's index of pods by node to a pod
// informer, before it starts; once there, a second call is a no-op.
// Without it (the informer had started), pods are found by a scan.
func AddPodIndex(inf cache.SharedIndexInformer) error {
	if _, ok := inf.GetIndexer().GetIndexers()[nodeNameIndex]; ok {
		return nil
	}
	return inf.AddIndexers(cache.Indexers{nodeNameIndex: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}})
}

// Options are the controller's durations and rates; zero fields take
// upstream's defaults.
type Options struct {
	NodeMonitorGracePeriod    time.Duration
	NodeMonitorPeriod         time.Duration
	NodeStartupGracePeriod    time.Duration
	NodeEvictionRate          float64
	SecondaryNodeEvictionRate float64
	UnhealthyZoneThreshold    float64
	LargeClusterSizeThreshold int
}

// optionsFrom fills upstream's defaults into the manager's options.
func optionsFrom(o controllercontext.Options) Options {
	out := Options{
		NodeMonitorGracePeriod: o.NodeMonitorGracePeriod, NodeMonitorPeriod: o.NodeMonitorPeriod,
		NodeStartupGracePeriod: o.NodeStartupGracePeriod, NodeEvictionRate: o.NodeEvictionRate,
		SecondaryNodeEvictionRate: o.SecondaryNodeEvictionRate, UnhealthyZoneThreshold: o.UnhealthyZoneThreshold,
		LargeClusterSizeThreshold: o.LargeClusterSizeThreshold,
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&out.NodeMonitorGracePeriod, 50*time.Second)
	def(&out.NodeMonitorPeriod, 5*time.Second)
	def(&out.NodeStartupGracePeriod, 60*time.Second)
	if out.NodeEvictionRate <= 0 {
		out.NodeEvictionRate = 0.1
	}
	if out.SecondaryNodeEvictionRate <= 0 {
		out.SecondaryNodeEvictionRate = 0.01
	}
	if out.UnhealthyZoneThreshold <= 0 {
		out.UnhealthyZoneThreshold = 0.55
	}
	if out.LargeClusterSizeThreshold <= 0 {
		out.LargeClusterSizeThreshold = 50
	}
	return out
}

// Controller is the node lifecycle controller.
type Controller struct {
	client      kubernetes.Interface
	recorder    record.EventRecorder
	clock       clock.WithTicker
	opts        Options
	nodeLister  corelisters.NodeLister
	leaseLister coordinationlisters.LeaseLister
	podLister   corelisters.PodLister
	podIndexer  cache.Indexer
	podIndexed  bool
	synced      []cache.InformerSynced

	// nodeQueue reconciles taints that need no rate limit; podQueue runs
	// the NoExecute eviction of pods.
	nodeQueue *worker.Queue[string]
	podQueue  *worker.Queue[string]

	mu     sync.Mutex
	health map[string]*health
	zones  map[string]*zoneTainter
	// disrupted is true while every zone is fully disrupted.
	disrupted bool
}

// zoneTainter is one zone's rate-limited queue of nodes to taint.
type zoneTainter struct {
	rate    float64
	limiter flowcontrol.PassiveRateLimiter
	order   []string
	queued  map[string]bool
}

// New builds the controller and registers its informers.
func New(ctx context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	nodeInf := cc.Informers.Core().V1().Nodes()
	leaseInf := cc.Informers.Coordination().V1().Leases()
	podInf := cc.Informers.Core().V1().Pods()
	c := &Controller{
		client:      cc.Client,
		recorder:    cc.Recorder,
		clock:       cc.Clock,
		opts:        optionsFrom(cc.Options),
		nodeLister:  nodeInf.Lister(),
		leaseLister: leaseInf.Lister(),
		podLister:   podInf.Lister(),
		podIndexer:  podInf.Informer().GetIndexer(),
		synced:      []cache.InformerSynced{nodeInf.Informer().HasSynced, leaseInf.Informer().HasSynced, podInf.Informer().HasSynced},
		health:      map[string]*health{},
		zones:       map[string]*zoneTainter{},
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.recorder == nil {
		c.recorder = &record.FakeRecorder{}
	}
	c.nodeQueue = worker.NewQueue("node_lifecycle_controller", c.syncNode, worker.Options[string]{Workers: 4, Clock: c.clock})
	c.podQueue = worker.NewQueue("noexecute_taint_eviction", c.syncPod, worker.Options[string]{Workers: 4, Clock: c.clock})
	c.podIndexed = AddPodIndex(podInf.Informer()) == nil

	if _, err := nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.nodeChanged(nil, obj) },
		UpdateFunc: c.nodeChanged,
	}); err != nil {
		return nil, fmt.Errorf("nodelifecycle: node handler: %w", err)
	}
	enqueuePod := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			c.podQueue.Add(p.Namespace + "/" + p.Name)
		}
	}
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueuePod,
		UpdateFunc: func(_, obj any) { enqueuePod(obj) },
	}); err != nil {
		return nil, fmt.Errorf("nodelifecycle: pod handler: %w", err)
	}
	return c, nil
}

// nodeChanged queues the node for its NoSchedule taints and, when its
// NoExecute taints changed, the pods on it for eviction.
func (c *Controller) nodeChanged(old, obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	c.nodeQueue.Add(n.Name)
	var before []corev1.Taint
	if o, ok := old.(*corev1.Node); ok {
		before = o.Spec.Taints
	}
	if noExecuteKey(before) != noExecuteKey(n.Spec.Taints) {
		for _, p := range c.podsOn(n.Name) {
			c.podQueue.Add(p.Namespace + "/" + p.Name)
		}
	}
}

func noExecuteKey(taints []corev1.Taint) string {
	s := ""
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			s += t.Key + "=" + t.Value + ";"
		}
	}
	return s
}

func (c *Controller) podsOn(node string) []*corev1.Pod {
	var out []*corev1.Pod
	if c.podIndexed {
		objs, _ := c.podIndexer.ByIndex(nodeNameIndex, node)
		for _, o := range objs {
			if p, ok := o.(*corev1.Pod); ok {
				out = append(out, p)
			}
		}
		return out
	}
	all, _ := c.podLister.List(labels.Everything())
	for _, p := range all {
		if p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out
}

// Start runs the health monitor, the zone tainters and the workers until
// ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, c.synced, c.nodeQueue, c.podQueue, worker.LoopFunc(c.watch))
}

// watch checks node health every NodeMonitorPeriod and drains the zone
// tainters every EvictionPeriod until ctx is done.
func (c *Controller) watch(ctx context.Context) {
	monitor := c.clock.NewTicker(c.opts.NodeMonitorPeriod)
	defer monitor.Stop()
	evict := c.clock.NewTicker(EvictionPeriod)
	defer evict.Stop()
	c.monitor(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-monitor.C():
			c.monitor(ctx)
		case <-evict.C():
			c.taintZones(ctx)
		}
	}
}

// zoneOf is a node's zone key (region and zone labels).
func zoneOf(node *corev1.Node) string {
	return node.Labels[corev1.LabelTopologyRegion] + "/" + node.Labels[corev1.LabelTopologyZone]
}

// monitor is one health pass over every node.
func (c *Controller) monitor(ctx context.Context) {
	logger := klog.FromContext(ctx)
	nodes, err := c.nodeLister.List(labels.Everything())
	if err != nil {
		return
	}
	now := c.clock.Now()
	zoneStatuses := map[string][]corev1.ConditionStatus{}
	seen := map[string]bool{}
	for _, n := range nodes {
		seen[n.Name] = true
		lease, _ := c.leaseLister.Leases(LeaseNamespace).Get(n.Name)
		c.mu.Lock()
		prev := c.health[n.Name]
		h := observe(prev, n, lease, now)
		c.health[n.Name] = h
		c.mu.Unlock()

		if conds, changed := staleConditions(n, h, now, c.opts.NodeMonitorGracePeriod, c.opts.NodeStartupGracePeriod); changed {
			next := n.DeepCopy()
			next.Status.Conditions = conds
			updated, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, next, metav1.UpdateOptions{})
			if err != nil {
				logger.V(2).Info("node lifecycle: cannot mark node unknown", "node", n.Name, "err", err)
			} else {
				n = updated
			}
		}
		ready := readyStatus(n)
		if prev != nil && prev.ready == corev1.ConditionTrue && ready != corev1.ConditionTrue {
			c.recorder.Eventf(&corev1.ObjectReference{Kind: "Node", Name: n.Name, UID: n.UID},
				corev1.EventTypeNormal, "NodeNotReady", "Node %s status is now: NodeNotReady", n.Name)
			c.markPodsNotReady(ctx, n.Name)
		}
		c.mu.Lock()
		c.health[n.Name].ready = ready
		c.mu.Unlock()
		zoneStatuses[zoneOf(n)] = append(zoneStatuses[zoneOf(n)], ready)
		c.nodeQueue.Add(n.Name)
	}
	c.mu.Lock()
	for name := range c.health {
		if !seen[name] {
			delete(c.health, name)
		}
	}
	allFull := len(zoneStatuses) > 0
	states := map[string]zoneState{}
	for z, st := range zoneStatuses {
		states[z] = computeZoneState(st, c.opts.UnhealthyZoneThreshold)
		if states[z] != stateFullDisruption {
			allFull = false
		}
	}
	wasDisrupted := c.disrupted
	c.disrupted = allFull
	for z, s := range states {
		zt := c.zones[z]
		if zt == nil {
			zt = &zoneTainter{queued: map[string]bool{}}
			c.zones[z] = zt
		}
		rate := zoneRate(s, len(zoneStatuses[z]), c.opts)
		if allFull {
			rate = 0
		}
		if zt.limiter == nil || rate != zt.rate {
			zt.rate = rate
			zt.limiter = newLimiter(rate, c.clock)
		}
	}
	c.mu.Unlock()
	if allFull && !wasDisrupted {
		logger.Info("node lifecycle: every node is not ready; stopping NoExecute tainting until one returns")
	}
	// Queue unhealthy nodes for tainting, or untaint them in disruption mode.
	for _, n := range nodes {
		c.nodeQueue.Add(n.Name)
	}
}

func newLimiter(rate float64, clk clock.PassiveClock) flowcontrol.PassiveRateLimiter {
	if rate <= 0 {
		return nil
	}
	return flowcontrol.NewTokenBucketPassiveRateLimiterWithClock(float32(rate), 1, clk)
}

// syncNode reconciles the NoSchedule taints of a node at once, swaps or
// removes its NoExecute taint at once, and queues it in its zone for a
// new NoExecute taint (which is rate-limited).
func (c *Controller) syncNode(ctx context.Context, name string) error {
	node, err := c.nodeLister.Get(name)
	if apierrors.IsNotFound(err) {
		c.dequeue(name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", name, err)
	}
	taints, changed := withNoSchedule(node.Spec.Taints, wantNoSchedule(node))
	want := wantNoExecute(node)
	c.mu.Lock()
	disrupted := c.disrupted
	c.mu.Unlock()
	if disrupted {
		want = nil // every zone down: evict nothing, as upstream
	}
	switch {
	case want == nil:
		c.dequeue(name)
		var ch bool
		taints, ch = withNoExecute(taints, nil, c.clock.Now())
		changed = changed || ch
	case hasNoExecute(node, want):
		c.dequeue(name)
	case hasNoExecute(node, &UnreachableNoExecute) || hasNoExecute(node, &NotReadyNoExecute):
		// Already tainted for the other reason: swap without waiting.
		c.dequeue(name)
		taints, _ = withNoExecute(taints, want, c.clock.Now())
		changed = true
	default:
		c.enqueueZone(zoneOf(node), name)
	}
	if !changed {
		return nil
	}
	return c.writeTaints(ctx, node, taints)
}

func (c *Controller) writeTaints(ctx context.Context, node *corev1.Node, taints []corev1.Taint) error {
	next := node.DeepCopy()
	next.Spec.Taints = taints
	if _, err := c.client.CoreV1().Nodes().Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("update taints of node %s: %w", node.Name, err)
	}
	return nil
}

func (c *Controller) enqueueZone(zone, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	zt := c.zones[zone]
	if zt == nil {
		zt = &zoneTainter{queued: map[string]bool{}, rate: c.opts.NodeEvictionRate, limiter: newLimiter(c.opts.NodeEvictionRate, c.clock)}
		c.zones[zone] = zt
	}
	if !zt.queued[name] {
		zt.queued[name] = true
		zt.order = append(zt.order, name)
	}
}

func (c *Controller) dequeue(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, zt := range c.zones {
		if zt.queued[name] {
			delete(zt.queued, name)
			for i, n := range zt.order {
				if n == name {
					zt.order = append(zt.order[:i], zt.order[i+1:]...)
					break
				}
			}
		}
	}
}

// taintZones takes from each zone's queue as many nodes as its rate
// allows and taints them NoExecute.
func (c *Controller) taintZones(ctx context.Context) {
	var todo []string
	c.mu.Lock()
	if !c.disrupted {
		for _, zt := range c.zones {
			for len(zt.order) > 0 && zt.limiter != nil && zt.limiter.TryAccept() {
				name := zt.order[0]
				zt.order = zt.order[1:]
				delete(zt.queued, name)
				todo = append(todo, name)
			}
		}
	}
	c.mu.Unlock()
	for _, name := range todo {
		node, err := c.nodeLister.Get(name)
		if err != nil {
			continue
		}
		want := wantNoExecute(node)
		if want == nil || hasNoExecute(node, want) {
			continue
		}
		taints, _ := withNoExecute(node.Spec.Taints, want, c.clock.Now())
		if err := c.writeTaints(ctx, node, taints); err != nil {
			klog.FromContext(ctx).V(2).Info("node lifecycle: taint failed", "node", name, "err", err)
			c.enqueueZone(zoneOf(node), name)
		}
	}
}

// markPodsNotReady sets the Ready condition of the node's pods False.
func (c *Controller) markPodsNotReady(ctx context.Context, node string) {
	for _, p := range c.podsOn(node) {
		if p.DeletionTimestamp != nil {
			continue
		}
		for i, cond := range p.Status.Conditions {
			if cond.Type != corev1.PodReady || cond.Status == corev1.ConditionFalse {
				continue
			}
			next := p.DeepCopy()
			next.Status.Conditions[i].Status = corev1.ConditionFalse
			next.Status.Conditions[i].LastTransitionTime = metav1.NewTime(c.clock.Now())
			if _, err := c.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
				klog.FromContext(ctx).V(2).Info("node lifecycle: cannot mark pod not ready", "pod", p.Namespace+"/"+p.Name, "err", err)
				continue
			}
			c.recorder.Eventf(p, corev1.EventTypeWarning, "NodeNotReady", "Node is not ready")
		}
	}
}

// syncPod evicts a pod from a NoExecute-tainted node when its tolerations
// run out, or schedules another look for when they will.
func (c *Controller) syncPod(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := c.podLister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get pod %s: %w", key, err)
	}
	if pod.DeletionTimestamp != nil || pod.Spec.NodeName == "" {
		return nil
	}
	node, err := c.nodeLister.Get(pod.Spec.NodeName)
	if apierrors.IsNotFound(err) {
		return nil // pod GC's business
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", pod.Spec.NodeName, err)
	}
	now := c.clock.Now()
	at, evict := evictionTime(pod.Spec.Tolerations, node.Spec.Taints, now)
	if !evict {
		return nil
	}
	if at.After(now) {
		return worker.RequeueAfter(at.Sub(now))
	}
	c.recorder.Eventf(pod, corev1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod %s", key)
	uid := pod.UID
	err = c.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("evict pod %s: %w", key, err)
	}
	return nil
}
