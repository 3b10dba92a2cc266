// Package nodeipam is the node IPAM controller (upstream's
// node-ipam-controller with its range allocator): it gives every Node a
// block of the cluster CIDR (default a /24 of 10.42.0.0/16) in
// spec.podCIDR and spec.podCIDRs, which the node agent's CNI config and
// the routes between nodes are built from.
//
// As upstream's range allocator:
//   - the blocks already on Nodes are marked used before any is handed out
//     (the informer handler marks them as it sees the Nodes, and the workers
//     start only once it has seen them all), so a restarted controller never
//     hands out a block twice;
//   - a Node that has podCIDRs keeps them (the API makes them immutable);
//     one inside the cluster CIDR is marked used;
//   - blocks are handed out round the range, from the one after the last;
//   - a deleted Node's blocks are released, and Nodes still waiting for a
//     block are queued again at once (upstream waits for their back-off);
//   - when every block is used the Node gets a CIDRNotAvailable event and
//     is retried with back-off; a failed write gives CIDRAssignmentFailed.
//
// Deviations: one cluster CIDR (no dual stack), and a Node whose podCIDR
// lies outside the cluster CIDR is left alone (upstream refuses to start):
// `skiff simulate` gives its nodes beyond the 256th CIDRs past
// 10.42.0.0/16. The service CIDR is not carved out of the cluster CIDR
// (Skiff's default ranges do not overlap). The NetworkUnavailable node
// condition is not this controller's business.
package nodeipam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Name is the controller's name in the manager's registry (upstream's).
const Name = "node-ipam-controller"

// Defaults: Skiff's pod network and a /24 a node (upstream's IPv4 default).
var DefaultClusterCIDR = netip.MustParsePrefix("10.42.0.0/16")

const (
	DefaultNodeCIDRMaskSize = 24
	// DefaultWorkers is upstream's cidrUpdateWorkers.
	DefaultWorkers = 30
)

// Event reasons, upstream's.
const (
	ReasonCIDRNotAvailable     = "CIDRNotAvailable"
	ReasonCIDRAssignmentFailed = "CIDRAssignmentFailed"
)

// ParseRange checks a --cluster-cidr and --node-cidr-mask-size pair: the
// cluster CIDR parses, the mask is at least as long as its prefix and at
// most 16 bits longer (upstream's limits).
func ParseRange(clusterCIDR string, maskSize int) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(clusterCIDR))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("cluster CIDR %q: %w", clusterCIDR, err)
	}
	if _, err := newCIDRSet(p, maskSize); err != nil {
		return netip.Prefix{}, err
	}
	return p.Masked(), nil
}

// Controller hands out node CIDRs.
type Controller struct {
	client     kubernetes.Interface
	nodeLister corelisters.NodeLister
	synced     []cache.InformerSynced
	recorder   record.EventRecorder
	queue      *worker.Queue[string]

	mu   sync.Mutex
	set  *cidrSet
	used map[netip.Prefix]string // block → node holding it, for the log
}

// New builds the controller (a controllercontext.InitFunc).
func New(ctx context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	cidr, mask := cc.Options.ClusterCIDR, cc.Options.NodeCIDRMaskSize
	if cidr == "" {
		cidr = DefaultClusterCIDR.String()
	}
	if mask == 0 {
		mask = DefaultNodeCIDRMaskSize
	}
	cluster, err := ParseRange(cidr, mask)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	set, err := newCIDRSet(cluster, mask)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	recorder := cc.Recorder
	if recorder == nil {
		recorder = &record.FakeRecorder{}
	}
	nodes := cc.Informers.Core().V1().Nodes()
	c := &Controller{
		client:     cc.Client,
		nodeLister: nodes.Lister(),
		recorder:   recorder,
		set:        set,
		used:       map[netip.Prefix]string{},
	}
	workers := DefaultWorkers
	if n := cc.Options.ConcurrentSyncs[Name]; n > 0 {
		workers = n
	}
	c.queue = worker.NewQueue(Name, c.sync, worker.Options[string]{Workers: workers, Clock: cc.Clock})
	reg, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.observe(ctx, obj) },
		UpdateFunc: func(_, obj any) { c.observe(ctx, obj) },
		DeleteFunc: func(obj any) { c.release(ctx, obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("%s: node handler: %w", Name, err)
	}
	// The workers start once this handler has seen every existing Node,
	// so that the blocks in use are known before any is handed out.
	c.synced = []cache.InformerSynced{nodes.Informer().HasSynced, reg.HasSynced}
	return c, nil
}

// Start runs the workers until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, c.synced, c.queue)
}

// observe notes the blocks a Node holds and queues the Node.
func (c *Controller) observe(ctx context.Context, obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	c.occupy(ctx, node)
	c.queue.Add(node.Name)
}

// release frees a deleted Node's blocks.
func (c *Controller) release(ctx context.Context, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	freed := false
	c.mu.Lock()
	for _, p := range c.inRange(ctx, node) {
		if c.used[p] != node.Name {
			continue // a block another Node holds now
		}
		if err := c.set.release(p); err == nil {
			delete(c.used, p)
			freed = true
			klog.FromContext(ctx).V(4).Info("Released node CIDR", "node", node.Name, "podCIDR", p)
		}
	}
	c.mu.Unlock()
	if !freed {
		return
	}
	// Nodes still waiting for a block (the range was full) try again now
	// rather than at their next back-off.
	nodes, err := c.nodeLister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, n := range nodes {
		if len(podCIDRs(n)) == 0 {
			c.queue.Add(n.Name)
		}
	}
}

// occupy marks a Node's blocks inside the cluster CIDR used; it reports
// whether the Node has podCIDRs at all.
func (c *Controller) occupy(ctx context.Context, node *corev1.Node) bool {
	cidrs := podCIDRs(node)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.inRange(ctx, node) {
		if err := c.set.occupy(p); err == nil {
			if holder, ok := c.used[p]; !ok || holder == "" {
				c.used[p] = node.Name
			}
		}
	}
	return len(cidrs) > 0
}

// inRange parses a Node's podCIDRs and keeps those inside the cluster
// CIDR; the others are left alone (logged).
func (c *Controller) inRange(ctx context.Context, node *corev1.Node) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range podCIDRs(node) {
		p, err := netip.ParsePrefix(s)
		if err != nil || !c.set.contains(p.Masked()) {
			klog.FromContext(ctx).V(4).Info("Node CIDR outside the cluster CIDR, left alone", "node", node.Name, "podCIDR", s, "clusterCIDR", c.set.cluster)
			continue
		}
		out = append(out, p.Masked())
	}
	return out
}

func podCIDRs(node *corev1.Node) []string {
	if len(node.Spec.PodCIDRs) > 0 {
		return node.Spec.PodCIDRs
	}
	if node.Spec.PodCIDR != "" {
		return []string{node.Spec.PodCIDR}
	}
	return nil
}

// sync gives the Node a block if it has none.
func (c *Controller) sync(ctx context.Context, name string) error {
	node, err := c.nodeLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil // its blocks were released by the delete handler
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", name, err)
	}
	if node.DeletionTimestamp != nil {
		return nil
	}
	if c.occupy(ctx, node) {
		return nil
	}
	c.mu.Lock()
	block, err := c.set.allocateNext()
	if err == nil {
		c.used[block] = node.Name
	}
	c.mu.Unlock()
	if errors.Is(err, ErrFull) {
		c.event(node, ReasonCIDRNotAvailable)
		return fmt.Errorf("allocate a CIDR for node %s from %s: %w", name, c.set.cluster, err)
	}
	if err != nil {
		return fmt.Errorf("allocate a CIDR for node %s: %w", name, err)
	}
	if err := c.assign(ctx, node, block); err != nil {
		// Safer to leak a block than to hand it out twice when it is
		// unknown whether the write went through (upstream's rule); a
		// restart gives leaked blocks back.
		if !apierrors.IsServerTimeout(err) && !apierrors.IsTimeout(err) {
			c.mu.Lock()
			if c.used[block] == node.Name {
				_ = c.set.release(block)
				delete(c.used, block)
			}
			c.mu.Unlock()
		}
		c.event(node, ReasonCIDRAssignmentFailed)
		return fmt.Errorf("assign %s to node %s: %w", block, name, err)
	}
	klog.FromContext(ctx).Info("Set node PodCIDR", "node", name, "podCIDRs", []string{block.String()})
	return nil
}

// assign writes the block into the Node's spec. The patch carries the
// UID, so it never lands on a Node recreated under the same name; a Node
// that got podCIDRs meanwhile is refused by the API (they are immutable)
// and its own blocks are marked used at the next sync.
func (c *Controller) assign(ctx context.Context, node *corev1.Node, block netip.Prefix) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": node.UID},
		"spec":     map[string]any{"podCIDR": block.String(), "podCIDRs": []string{block.String()}},
	})
	if err != nil {
		return err
	}
	_, err = c.client.CoreV1().Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	return err
}

// event records a node status change the way upstream's node controllers
// do: a Normal event on the Node, "Node <name> status is now: <reason>".
func (c *Controller) event(node *corev1.Node, reason string) {
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
	c.recorder.Eventf(ref, corev1.EventTypeNormal, reason, "Node %s status is now: %s", node.Name, reason)
}
