package simulate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// leaseJitter is upstream's kubelet lease renewal jitter factor.
const leaseJitter = 0.04

// nodeNameIndex indexes the pod informer by spec.nodeName.
const nodeNameIndex = "nodeName"

// taskKind is one kind of work on a node.
type taskKind int

const (
	taskRegister taskKind = iota
	taskLease
	taskStatus
)

func (k taskKind) String() string {
	return [...]string{"register", "lease", "status"}[k]
}

// nodeTask is an item of the node queue.
type nodeTask struct {
	node string
	kind taskKind
}

// simNode is the state of one simulated node.
type simNode struct {
	plan   nodePlan
	paused atomic.Bool

	mu         sync.Mutex
	registered bool
	// fullStatus asks the next heartbeat to write every condition, with
	// a new transition time where the status changed (after a pause,
	// when a node lifecycle controller may have marked the node Unknown).
	fullStatus bool
	uid        types.UID
	hostIP     string
	pool       *ipPool
	lease      *coordinationv1.Lease
}

// podState is what the simulator remembers of a pod it handles.
type podState struct {
	node      string
	uid       types.UID
	firstSeen time.Time
}

// Stats counts the API writes of a simulator.
type Stats struct {
	NodeCreates, NodeUpdates, NodeStatusPatches int64
	LeaseCreates, LeaseUpdates                  int64
	PodStatusUpdates, PodDeletes                int64
	// Errors counts failed API calls (each is retried).
	Errors int64
}

// Writes is the sum of all API writes.
func (s Stats) Writes() int64 {
	return s.NodeCreates + s.NodeUpdates + s.NodeStatusPatches + s.LeaseCreates + s.LeaseUpdates + s.PodStatusUpdates + s.PodDeletes
}

type counters struct {
	nodeCreates, nodeUpdates, nodeStatusPatches atomic.Int64
	leaseCreates, leaseUpdates                  atomic.Int64
	podStatusUpdates, podDeletes                atomic.Int64
	errors                                      atomic.Int64
}

// Simulator runs a fixed set of simulated nodes against an API server.
type Simulator struct {
	client kubernetes.Interface
	opts   Options
	err    error // validation error, returned by Start
	nodes  []*simNode
	byName map[string]*simNode

	ready     chan struct{}
	readyOnce sync.Once
	nRegister atomic.Int64
	stats     counters

	// mu guards the fields below. Lock order: Simulator.mu before
	// simNode.mu.
	mu        sync.Mutex
	started   bool
	nodeQueue workqueue.TypedRateLimitingInterface[nodeTask]
	podQueue  workqueue.TypedRateLimitingInterface[string]
	podIndex  cache.Indexer
	pods      map[string]*podState // by namespace/name
}

// New returns a simulator of the nodes opts describes. It has no side
// effects; invalid options make Start fail.
func New(client kubernetes.Interface, opts Options) *Simulator {
	s := &Simulator{
		client: client,
		err:    opts.Validate(),
		opts:   opts.withDefaults(),
		byName: map[string]*simNode{},
		ready:  make(chan struct{}),
		pods:   map[string]*podState{},
	}
	if s.err != nil {
		return s
	}
	for _, p := range plan(s.opts) {
		n := &simNode{plan: p}
		s.nodes = append(s.nodes, n)
		s.byName[p.Name] = n
	}
	return s
}

// NodeNames lists the simulated nodes in index order.
func (s *Simulator) NodeNames() []string {
	names := make([]string, len(s.nodes))
	for i, n := range s.nodes {
		names[i] = n.plan.Name
	}
	return names
}

// Ready is closed once every node is registered, Ready, untainted (unless
// KeepNotReadyTaint) and has its Lease, and the pod informer has synced.
func (s *Simulator) Ready() <-chan struct{} { return s.ready }

// Stats returns the API writes made so far.
func (s *Simulator) Stats() Stats {
	c := &s.stats
	return Stats{
		NodeCreates: c.nodeCreates.Load(), NodeUpdates: c.nodeUpdates.Load(), NodeStatusPatches: c.nodeStatusPatches.Load(),
		LeaseCreates: c.leaseCreates.Load(), LeaseUpdates: c.leaseUpdates.Load(),
		PodStatusUpdates: c.podStatusUpdates.Load(), PodDeletes: c.podDeletes.Load(),
		Errors: c.errors.Load(),
	}
}

// PauseNode stops the node's Lease renewals, status heartbeats and pod
// handling, as if the node had died. It reports whether the node is one
// of this simulator's.
func (s *Simulator) PauseNode(name string) bool {
	n, ok := s.byName[name]
	if ok {
		n.paused.Store(true)
	}
	return ok
}

// ResumeNode undoes PauseNode: the node renews its Lease and writes its
// status at once, and handles its pods again.
func (s *Simulator) ResumeNode(name string) bool {
	n, ok := s.byName[name]
	if !ok || !n.paused.Swap(false) {
		return ok
	}
	n.mu.Lock()
	n.fullStatus = true
	n.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nodeQueue == nil {
		return true
	}
	n.mu.Lock()
	registered := n.registered
	n.mu.Unlock()
	if registered {
		s.nodeQueue.Add(nodeTask{name, taskLease})
		s.nodeQueue.Add(nodeTask{name, taskStatus})
	} else {
		s.nodeQueue.Add(nodeTask{name, taskRegister})
	}
	if s.podIndex != nil {
		objs, _ := s.podIndex.ByIndex(nodeNameIndex, name)
		for _, o := range objs {
			if key, err := cache.MetaNamespaceKeyFunc(o); err == nil {
				s.podQueue.Add(key)
			}
		}
	}
	return true
}

// Start registers the nodes and keeps them alive until ctx is done. It
// returns nil then, or an error for invalid options or when the pod
// informer cannot start.
func (s *Simulator) Start(ctx context.Context) error {
	if s.err != nil {
		return s.err
	}
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("simulator already started")
	}
	s.started = true
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[nodeTask](100*time.Millisecond, 10*time.Second)
	s.nodeQueue = workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[nodeTask]{Clock: s.opts.Clock})
	s.podQueue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 10*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: s.opts.Clock})
	s.mu.Unlock()
	logger := klog.FromContext(ctx).WithName("simulate")
	ctx = klog.NewContext(ctx, logger)

	informer, err := s.podInformer()
	if err != nil {
		return err
	}
	informerCtx, stopInformer := context.WithCancel(ctx)
	var informerDone sync.WaitGroup
	informerDone.Go(func() { informer.RunWithContext(informerCtx) })
	defer func() {
		stopInformer()
		informerDone.Wait()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		s.shutdown()
		return nil // ctx is done
	}
	s.reserveRunningPodIPs(informer.GetIndexer())
	s.mu.Lock()
	s.podIndex = informer.GetIndexer()
	s.mu.Unlock()

	logger.Info("Registering simulated nodes", "nodes", len(s.nodes))
	for _, n := range s.nodes {
		if !n.paused.Load() {
			s.nodeQueue.Add(nodeTask{n.plan.Name, taskRegister})
		}
	}
	var workers sync.WaitGroup
	for range s.opts.Workers {
		workers.Go(func() {
			for s.processNodeTask(ctx) {
			}
		})
		workers.Go(func() {
			for s.processPod(ctx) {
			}
		})
	}
	<-ctx.Done()
	s.shutdown()
	workers.Wait()
	if s.opts.DeleteNodesOnExit {
		s.deleteNodes(context.WithoutCancel(ctx))
	}
	return nil
}

func (s *Simulator) shutdown() {
	s.nodeQueue.ShutDown()
	s.podQueue.ShutDown()
}

// podInformer watches every bound pod (spec.nodeName!=""), indexed by node
// name; the handlers queue the keys of pods on this simulator's nodes.
func (s *Simulator) podInformer() (cache.SharedIndexInformer, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(s.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermNotEqualSelector("spec.nodeName", "").String()
	}))
	informer := factory.Core().V1().Pods().Informer()
	if err := informer.AddIndexers(cache.Indexers{nodeNameIndex: func(obj any) ([]string, error) {
		return []string{obj.(*corev1.Pod).Spec.NodeName}, nil
	}}); err != nil {
		return nil, fmt.Errorf("pod informer: %w", err)
	}
	// Managed fields are never read here; dropping them saves memory with
	// many pods.
	if err := informer.SetTransform(func(obj any) (any, error) {
		if acc, ok := obj.(metav1.ObjectMetaAccessor); ok {
			acc.GetObjectMeta().SetManagedFields(nil)
		}
		return obj, nil
	}); err != nil {
		return nil, fmt.Errorf("pod informer: %w", err)
	}
	enqueue := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		if _, ours := s.byName[pod.Spec.NodeName]; !ours {
			return
		}
		if key, err := cache.MetaNamespaceKeyFunc(pod); err == nil {
			s.podQueue.Add(key)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return nil, fmt.Errorf("pod informer: %w", err)
	}
	return informer, nil
}

// reserveRunningPodIPs records the IPs of pods that already run on our
// nodes (from an earlier run of the simulator), before any new pod gets
// one.
func (s *Simulator) reserveRunningPodIPs(index cache.Indexer) {
	now := s.opts.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.nodes {
		pool, err := newIPPool(n.plan.PodCIDR)
		if err != nil {
			continue // plan CIDRs are always valid
		}
		n.mu.Lock()
		n.pool = pool
		n.hostIP = n.plan.InternalIP
		objs, _ := index.ByIndex(nodeNameIndex, n.plan.Name)
		for _, o := range objs {
			pod := o.(*corev1.Pod)
			if pod.Status.PodIP == "" || pod.Spec.HostNetwork {
				continue
			}
			ip, err := netip.ParseAddr(pod.Status.PodIP)
			if err != nil {
				continue
			}
			key, _ := cache.MetaNamespaceKeyFunc(pod)
			if pool.reserve(key, ip) {
				s.pods[key] = &podState{node: n.plan.Name, uid: pod.UID, firstSeen: now}
			}
		}
		n.mu.Unlock()
	}
}

// --- nodes ---

func (s *Simulator) processNodeTask(ctx context.Context) bool {
	task, quit := s.nodeQueue.Get()
	if quit {
		return false
	}
	defer s.nodeQueue.Done(task)
	n := s.byName[task.node]
	if n.paused.Load() {
		// A dead node does nothing; ResumeNode queues its work again.
		s.nodeQueue.Forget(task)
		return true
	}
	var next time.Duration
	var err error
	switch task.kind {
	case taskRegister:
		err = s.register(ctx, n)
		if err == nil {
			// Spread the nodes' renewals evenly over one interval, and
			// their heartbeats over one status period.
			s.nodeQueue.AddAfter(nodeTask{task.node, taskLease}, randomIn(s.opts.LeaseRenewInterval))
			s.nodeQueue.AddAfter(nodeTask{task.node, taskStatus}, randomIn(s.opts.StatusUpdateFrequency))
		}
	case taskLease:
		err = s.renewLease(ctx, n)
		next = jitter(s.opts.LeaseRenewInterval, leaseJitter)
	case taskStatus:
		err = s.heartbeat(ctx, n)
		next = jitter(s.opts.StatusUpdateFrequency, leaseJitter)
	}
	if err != nil {
		if ctx.Err() != nil {
			return true
		}
		s.stats.errors.Add(1)
		if task.kind == taskRegister && s.nodeQueue.NumRequeues(task) == 0 {
			// Worth seeing by default (a wrong kubeconfig, RBAC), once a node.
			klog.FromContext(ctx).Error(err, "Node registration failed; retrying", "node", task.node)
		} else {
			klog.FromContext(ctx).V(2).Info("Node task failed; retrying", "node", task.node, "task", task.kind.String(), "err", err)
		}
		s.nodeQueue.AddRateLimited(task)
		return true
	}
	s.nodeQueue.Forget(task)
	if next > 0 {
		s.nodeQueue.AddAfter(task, next)
	}
	return true
}

// register creates (or adopts) the Node, removes the not-ready taint and
// creates the Lease. It is idempotent, so a failed step is retried from
// the start.
func (s *Simulator) register(ctx context.Context, n *simNode) error {
	nodes := s.client.CoreV1().Nodes()
	now := metav1.NewTime(s.opts.Clock.Now())
	node, err := nodes.Create(ctx, newNode(n.plan, now), metav1.CreateOptions{})
	switch {
	case err == nil:
		s.stats.nodeCreates.Add(1)
	case apierrors.IsAlreadyExists(err):
		// The node exists, from an earlier run: report our status on it
		// as a restarted kubelet does.
		node, err = s.client.CoreV1().Nodes().Get(ctx, n.plan.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node %s: %w", n.plan.Name, err)
		}
		want := newNode(n.plan, now)
		node.Status = want.Status
		if node, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update status of node %s: %w", n.plan.Name, err)
		}
		s.stats.nodeUpdates.Add(1)
	default:
		return fmt.Errorf("create node %s: %w", n.plan.Name, err)
	}
	if !s.opts.KeepNotReadyTaint {
		if node, err = s.untaint(ctx, node); err != nil {
			return err
		}
	}
	if err := s.setNode(n, node); err != nil {
		return err
	}
	if err := s.renewLease(ctx, n); err != nil {
		return err
	}
	if err := s.publishDevices(ctx, node); err != nil {
		return err
	}
	n.mu.Lock()
	first := !n.registered
	n.registered = true
	n.mu.Unlock()
	if first && s.nRegister.Add(1) == int64(len(s.nodes)) {
		klog.FromContext(ctx).Info("All simulated nodes are Ready", "nodes", len(s.nodes))
		s.readyOnce.Do(func() { close(s.ready) })
	}
	return nil
}

// untaint removes the not-ready:NoSchedule taint from a node that reports
// Ready. In a full cluster the node lifecycle controller does this; the
// simulator does it so that nodes are schedulable without one.
func (s *Simulator) untaint(ctx context.Context, node *corev1.Node) (*corev1.Node, error) {
	nodes := s.client.CoreV1().Nodes()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		taints, found := withoutNotReadyTaint(node.Spec.Taints)
		if !found || !isReady(node) {
			return nil
		}
		upd := node.DeepCopy()
		upd.Spec.Taints = taints
		got, err := nodes.Update(ctx, upd, metav1.UpdateOptions{})
		if err == nil {
			s.stats.nodeUpdates.Add(1)
			node = got
			return nil
		}
		if apierrors.IsConflict(err) {
			if fresh, gerr := nodes.Get(ctx, node.Name, metav1.GetOptions{}); gerr == nil {
				node = fresh
			}
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("remove not-ready taint of node %s: %w", node.Name, err)
	}
	return node, nil
}

// setNode records what the server says of the node: its UID, its pod CIDR
// (which a node IPAM controller may have chosen) and its InternalIP.
func (s *Simulator) setNode(n *simNode, node *corev1.Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.uid = node.UID
	if node.Spec.PodCIDR != "" && (n.pool == nil || node.Spec.PodCIDR != n.plan.PodCIDR) {
		pool, err := newIPPool(node.Spec.PodCIDR)
		if err != nil {
			return fmt.Errorf("node %s: %w", node.Name, err)
		}
		n.pool = pool
	}
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			n.hostIP = a.Address
		}
	}
	return nil
}

// renewLease creates or renews the node's Lease, as upstream's kubelet
// does: an update of the last known Lease, a fresh read on conflict.
func (s *Simulator) renewLease(ctx context.Context, n *simNode) error {
	leases := s.client.CoordinationV1().Leases(LeaseNamespace)
	n.mu.Lock()
	cached, uid := n.lease, n.uid
	n.mu.Unlock()
	now := metav1.NewMicroTime(s.opts.Clock.Now())
	durationSeconds := int32(s.opts.LeaseDuration / time.Second)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.plan.Name, UID: uid}}
	want := newLease(node, durationSeconds, now)
	var got *coordinationv1.Lease
	var err error
	if cached != nil {
		upd := cached.DeepCopy()
		upd.Spec = want.Spec
		if len(upd.OwnerReferences) == 0 {
			upd.OwnerReferences = want.OwnerReferences
		}
		got, err = leases.Update(ctx, upd, metav1.UpdateOptions{})
		if err == nil {
			s.stats.leaseUpdates.Add(1)
		}
	}
	if cached == nil || apierrors.IsNotFound(err) {
		got, err = leases.Create(ctx, want, metav1.CreateOptions{})
		if err == nil {
			s.stats.leaseCreates.Add(1)
		}
	}
	if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
		// Someone else wrote it (or an earlier run made it): read it and
		// retry once.
		var cur *coordinationv1.Lease
		if cur, err = leases.Get(ctx, n.plan.Name, metav1.GetOptions{}); err == nil {
			upd := cur.DeepCopy()
			upd.Spec = want.Spec
			upd.OwnerReferences = want.OwnerReferences
			if got, err = leases.Update(ctx, upd, metav1.UpdateOptions{}); err == nil {
				s.stats.leaseUpdates.Add(1)
			}
		}
	}
	if err != nil {
		n.mu.Lock()
		n.lease = nil // read it again next time
		n.mu.Unlock()
		return fmt.Errorf("renew lease of node %s: %w", n.plan.Name, err)
	}
	n.mu.Lock()
	n.lease = got
	n.mu.Unlock()
	return nil
}

// heartbeat writes the node status heartbeat: a strategic merge patch of
// the conditions' lastHeartbeatTime, as a kubelet sends when nothing
// changed.
func (s *Simulator) heartbeat(ctx context.Context, n *simNode) error {
	now := metav1.NewTime(s.opts.Clock.Now())
	n.mu.Lock()
	full := n.fullStatus
	n.mu.Unlock()
	if full {
		if err := s.writeFullStatus(ctx, n, now); err != nil {
			return err
		}
		n.mu.Lock()
		n.fullStatus = false
		n.mu.Unlock()
		return nil
	}
	patch, err := heartbeatPatch(now)
	if err != nil {
		return err
	}
	if _, err := s.client.CoreV1().Nodes().Patch(ctx, n.plan.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		if apierrors.IsNotFound(err) {
			// Someone deleted the node: register it again, as a kubelet
			// does on restart.
			n.mu.Lock()
			n.lease = nil
			n.mu.Unlock()
			s.nodeQueue.Add(nodeTask{n.plan.Name, taskRegister})
			return nil
		}
		return fmt.Errorf("patch status of node %s: %w", n.plan.Name, err)
	}
	s.stats.nodeStatusPatches.Add(1)
	return nil
}

// writeFullStatus reads the node and writes the kubelet's conditions,
// keeping each one's lastTransitionTime unless its status changes.
func (s *Simulator) writeFullStatus(ctx context.Context, n *simNode, now metav1.Time) error {
	nodes := s.client.CoreV1().Nodes()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		node, err := nodes.Get(ctx, n.plan.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Status.Conditions = mergeConditions(node.Status.Conditions, nodeConditions(now))
		if _, err := nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			return err
		}
		s.stats.nodeUpdates.Add(1)
		return nil
	})
	if err != nil {
		return fmt.Errorf("update status of node %s: %w", n.plan.Name, err)
	}
	return nil
}

// deleteNodes deletes the nodes and their Leases, with a few workers.
func (s *Simulator) deleteNodes(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	logger := klog.FromContext(ctx)
	names := make(chan string)
	var wg sync.WaitGroup
	for range s.opts.Workers {
		wg.Go(func() {
			for name := range names {
				if err := s.client.CoordinationV1().Leases(LeaseNamespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					logger.Error(err, "Delete lease", "node", name)
				}
				if err := s.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					logger.Error(err, "Delete node", "node", name)
				}
			}
		})
	}
	for _, n := range s.nodes {
		names <- n.plan.Name
	}
	close(names)
	wg.Wait()
	logger.Info("Deleted simulated nodes", "nodes", len(s.nodes))
}

// --- pods ---

func (s *Simulator) processPod(ctx context.Context) bool {
	key, quit := s.podQueue.Get()
	if quit {
		return false
	}
	defer s.podQueue.Done(key)
	retryAfter, err := s.syncPod(ctx, key)
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return true
		}
		s.stats.errors.Add(1)
		klog.FromContext(ctx).V(2).Info("Pod sync failed; retrying", "pod", key, "err", err)
		s.podQueue.AddRateLimited(key)
	default:
		s.podQueue.Forget(key)
		if retryAfter > 0 {
			s.podQueue.AddAfter(key, retryAfter)
		}
	}
	return true
}

// syncPod moves one pod on its way: to Running, to Succeeded, or out of
// the store once it is being deleted. It returns a delay after which to
// look at the pod again.
func (s *Simulator) syncPod(ctx context.Context, key string) (time.Duration, error) {
	obj, exists, err := s.podIndex.GetByKey(key)
	if err != nil {
		return 0, err
	}
	if !exists {
		s.forgetPod(key)
		return 0, nil
	}
	pod := obj.(*corev1.Pod)
	n := s.byName[pod.Spec.NodeName]
	if n == nil {
		s.forgetPod(key)
		return 0, nil
	}
	if n.paused.Load() {
		return 0, nil // ResumeNode queues the node's pods again
	}
	n.mu.Lock()
	registered, pool, hostIP := n.registered, n.pool, n.hostIP
	n.mu.Unlock()
	if !registered {
		return time.Second, nil // bound before the node registered
	}
	now := s.opts.Clock.Now()
	st := s.podState(key, pod, now)

	switch {
	case pod.DeletionTimestamp != nil:
		// Confirm the termination as a kubelet does once its containers
		// stopped: delete at once, only this incarnation of the pod.
		err := s.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: new(int64(0)),
			Preconditions:      metav1.NewUIDPreconditions(string(pod.UID)),
		})
		switch {
		case err == nil:
			s.stats.podDeletes.Add(1)
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// Gone already, or another pod of the same name.
		default:
			return 0, fmt.Errorf("delete pod %s: %w", key, err)
		}
		return 0, nil
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		s.releaseIP(n, key)
		return 0, nil
	case pod.Status.Phase == corev1.PodRunning:
		d, ok := runFor(pod)
		if !ok {
			return 0, nil
		}
		started := st.firstSeen
		if pod.Status.StartTime != nil {
			started = pod.Status.StartTime.Time
		}
		if left := started.Add(d).Sub(now); left > 0 {
			return left, nil
		}
		upd := pod.DeepCopy()
		upd.Status = finishedStatus(pod, metav1.NewTime(now), exitCode(pod))
		if _, err := s.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return 0, ignoreGone(fmt.Errorf("update status of pod %s: %w", key, err))
		}
		s.stats.podStatusUpdates.Add(1)
		return 0, nil
	}
	if left := st.firstSeen.Add(s.opts.PodStartLatency).Sub(now); left > 0 {
		return left, nil
	}
	podIP := hostIP
	if !pod.Spec.HostNetwork {
		n.mu.Lock()
		ip, err := pool.allocate(key)
		n.mu.Unlock()
		if err != nil {
			return 0, fmt.Errorf("pod %s: %w", key, err)
		}
		podIP = ip.String()
	}
	upd := pod.DeepCopy()
	upd.Status = runningStatus(pod, hostIP, podIP, metav1.NewTime(now))
	if _, err := s.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
		return 0, ignoreGone(fmt.Errorf("update status of pod %s: %w", key, err))
	}
	s.stats.podStatusUpdates.Add(1)
	return 0, nil
}

// ignoreGone drops the error of a write to a pod that was deleted in the
// meantime: its delete event will come.
func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// podState returns the state of pod, starting afresh for a new pod of the
// same name.
func (s *Simulator) podState(key string, pod *corev1.Pod, now time.Time) *podState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.pods[key]
	if st != nil && st.uid == pod.UID {
		return st
	}
	if st != nil {
		if old := s.byName[st.node]; old != nil {
			s.releaseIP(old, key)
		}
	}
	st = &podState{node: pod.Spec.NodeName, uid: pod.UID, firstSeen: now}
	s.pods[key] = st
	return st
}

func (s *Simulator) releaseIP(n *simNode, key string) {
	n.mu.Lock()
	if n.pool != nil {
		n.pool.release(key)
	}
	n.mu.Unlock()
}

// forgetPod drops a deleted pod and frees its IP.
func (s *Simulator) forgetPod(key string) {
	s.mu.Lock()
	st := s.pods[key]
	delete(s.pods, key)
	s.mu.Unlock()
	if st == nil {
		return
	}
	if n := s.byName[st.node]; n != nil {
		s.releaseIP(n, key)
	}
}

// randomIn is a uniformly random duration in (0, d].
func randomIn(d time.Duration) time.Duration {
	return time.Duration(rand.Int64N(int64(d))) + 1
}

// jitter is d plus up to factor×d, as wait.Jitter.
func jitter(d time.Duration, factor float64) time.Duration {
	return d + time.Duration(rand.Float64()*factor*float64(d))
}
