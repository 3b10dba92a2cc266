// Package podgc is the pod garbage collector. Every GCPeriod it
// force-deletes
//
//   - terminated pods (Succeeded or Failed) beyond TerminatedPodGCThreshold,
//     oldest first;
//   - pods bound to nodes that no longer exist, once the node has been
//     missing for Quarantine (checked live, so a node whose informer event
//     is late is not mistaken for a deleted one); non-terminal ones are
//     first marked Failed with a DisruptionTarget condition, as upstream;
//   - terminating pods that were never scheduled;
//   - terminating pods on not-ready nodes carrying the
//     node.kubernetes.io/out-of-service taint.
package podgc

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Name is the controller's name in the manager's registry.
const Name = "podgc"

const (
	// GCPeriod is how often pods are collected (upstream 20s).
	GCPeriod = 20 * time.Second
	// Quarantine is how long a node must be missing before its pods go
	// (upstream 40s).
	Quarantine = 40 * time.Second
	// DefaultThreshold is upstream's --terminated-pod-gc-threshold.
	DefaultThreshold = 12500
	// OutOfServiceTaint marks a node declared out of service.
	OutOfServiceTaint = "node.kubernetes.io/out-of-service"
)

// Controller is the pod garbage collector.
type Controller struct {
	client     kubernetes.Interface
	clock      clock.WithTicker
	threshold  int
	podLister  corelisters.PodLister
	nodeLister corelisters.NodeLister
	synced     []cache.InformerSynced

	mu sync.Mutex
	// missingSince is when each missing node was first seen missing.
	missingSince map[string]time.Time
}

// New builds the collector.
func New(ctx context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	podInf := cc.Informers.Core().V1().Pods()
	nodeInf := cc.Informers.Core().V1().Nodes()
	c := &Controller{
		client:       cc.Client,
		clock:        cc.Clock,
		threshold:    cc.Options.TerminatedPodGCThreshold,
		podLister:    podInf.Lister(),
		nodeLister:   nodeInf.Lister(),
		synced:       []cache.InformerSynced{podInf.Informer().HasSynced, nodeInf.Informer().HasSynced},
		missingSince: map[string]time.Time{},
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.threshold == 0 {
		c.threshold = DefaultThreshold
	}
	return c, nil
}

// Start collects every GCPeriod until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, c.synced, worker.LoopFunc(c.loop))
}

// loop collects at once, then every GCPeriod until ctx is done.
func (c *Controller) loop(ctx context.Context) {
	t := c.clock.NewTicker(GCPeriod)
	defer t.Stop()
	for {
		if err := c.gc(ctx); err != nil {
			klog.FromContext(ctx).V(2).Info("pod gc incomplete", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// gc runs one collection pass.
func (c *Controller) gc(ctx context.Context) error {
	pods, err := c.podLister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	nodes, err := c.nodeLister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	byName := map[string]*corev1.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	var errs []error
	for _, p := range c.plan(ctx, pods, byName) {
		if err := c.forceDelete(ctx, p.pod, p.markFailed); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

type victim struct {
	pod        *corev1.Pod
	markFailed bool
}

// plan chooses the pods to delete in this pass.
func (c *Controller) plan(ctx context.Context, pods []*corev1.Pod, nodes map[string]*corev1.Node) []victim {
	var out []victim
	chosen := map[*corev1.Pod]bool{}
	add := func(p *corev1.Pod, markFailed bool) {
		if !chosen[p] {
			chosen[p] = true
			out = append(out, victim{pod: p, markFailed: markFailed})
		}
	}
	for _, p := range TerminatedOverThreshold(pods, c.threshold) {
		add(p, false)
	}
	now := c.clock.Now()
	missing := map[string]bool{}
	for _, p := range pods {
		if p.Spec.NodeName != "" && nodes[p.Spec.NodeName] == nil {
			missing[p.Spec.NodeName] = true
		}
	}
	c.mu.Lock()
	for n := range c.missingSince {
		if !missing[n] {
			delete(c.missingSince, n)
		}
	}
	var expired []string
	for n := range missing {
		since, ok := c.missingSince[n]
		if !ok {
			c.missingSince[n] = now
			continue
		}
		if now.Sub(since) >= Quarantine {
			expired = append(expired, n)
		}
	}
	c.mu.Unlock()
	gone := map[string]bool{}
	for _, n := range expired {
		_, err := c.client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			gone[n] = true
		}
	}
	for _, p := range pods {
		switch {
		case p.Spec.NodeName != "" && gone[p.Spec.NodeName]:
			add(p, !terminated(p))
		case p.DeletionTimestamp != nil && p.Spec.NodeName == "":
			add(p, false)
		case p.DeletionTimestamp != nil && outOfService(nodes[p.Spec.NodeName]):
			add(p, !terminated(p))
		}
	}
	return out
}

// TerminatedOverThreshold returns the oldest terminated pods beyond
// threshold (none when threshold is negative).
func TerminatedOverThreshold(pods []*corev1.Pod, threshold int) []*corev1.Pod {
	if threshold < 0 {
		return nil
	}
	var term []*corev1.Pod
	for _, p := range pods {
		if terminated(p) {
			term = append(term, p)
		}
	}
	if len(term) <= threshold {
		return nil
	}
	sort.SliceStable(term, func(i, j int) bool {
		a, b := term[i].CreationTimestamp, term[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return term[i].Namespace+"/"+term[i].Name < term[j].Namespace+"/"+term[j].Name
	})
	return term[:len(term)-threshold]
}

func terminated(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func outOfService(n *corev1.Node) bool {
	if n == nil {
		return false
	}
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if ready {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == OutOfServiceTaint && t.Effect == corev1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}

// forceDelete deletes the pod with a zero grace period, first marking a
// running pod Failed with a DisruptionTarget condition.
func (c *Controller) forceDelete(ctx context.Context, p *corev1.Pod, markFailed bool) error {
	logger := klog.FromContext(ctx)
	if markFailed {
		next := p.DeepCopy()
		next.Status.Phase = corev1.PodFailed
		now := metav1.NewTime(c.clock.Now())
		cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByPodGC",
			Message: "PodGC: node no longer exists", LastTransitionTime: now}
		replaced := false
		for i := range next.Status.Conditions {
			if next.Status.Conditions[i].Type == corev1.DisruptionTarget {
				next.Status.Conditions[i], replaced = cond, true
			}
		}
		if !replaced {
			next.Status.Conditions = append(next.Status.Conditions, cond)
		}
		if _, err := c.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			logger.V(2).Info("pod gc: cannot mark pod failed", "pod", p.Namespace+"/"+p.Name, "err", err)
		}
	}
	logger.V(2).Info("pod gc: deleting pod", "pod", p.Namespace+"/"+p.Name)
	zero := int64(0)
	uid := p.UID
	err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}
