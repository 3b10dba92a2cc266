// Package metrics serves metrics.k8s.io/v1beta1 NodeMetrics and PodMetrics,
// the resource metrics API that upstream's metrics-server serves through
// API aggregation and that `kubectl top` and the horizontal pod autoscaler
// read. Here the API server serves it itself from its resource metrics
// pipeline (internal/apiserver/resourcemetrics): read-only, get and list,
// never stored. Objects carry their node's or pod's labels, so a label
// selector works as it does on metrics-server.
package metrics

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/resourcemetrics"
)

// Source is the pipeline's read side.
type Source = registry.ResourceMetrics

// Resources are metrics.k8s.io/v1beta1 nodes and pods; none without a
// source or a reader.
func Resources(deps registry.Deps) []registry.Resource {
	if deps.ResourceMetrics == nil || deps.Reader == nil {
		return nil
	}
	gv := metricsv1beta1.SchemeGroupVersion
	return []registry.Resource{{
		GroupVersion: gv, Resource: "nodes", Kind: "NodeMetrics", ListKind: "NodeMetricsList",
		StoragePrefix: "metrics.k8s.io/nodes",
		New:           func() runtime.Object { return &metricsv1beta1.NodeMetrics{} },
		NewList:       func() runtime.Object { return &metricsv1beta1.NodeMetricsList{} },
		Strategy:      nodeStrategy{strategy{src: deps.ResourceMetrics, reader: deps.Reader}},
	}, {
		GroupVersion: gv, Resource: "pods", Kind: "PodMetrics", ListKind: "PodMetricsList", Namespaced: true,
		StoragePrefix: "metrics.k8s.io/pods",
		New:           func() runtime.Object { return &metricsv1beta1.PodMetrics{} },
		NewList:       func() runtime.Object { return &metricsv1beta1.PodMetricsList{} },
		Strategy:      podStrategy{strategy{src: deps.ResourceMetrics, reader: deps.Reader}},
	}}
}

// strategy is what both resources share: read-only, get and list.
type strategy struct {
	registry.DefaultStrategy
	src    Source
	reader registry.Reader
}

// Verbs are get and list, as metrics-server serves them.
func (strategy) Verbs() []string { return []string{"get", "list"} }

const readOnly = "resource metrics are read-only"

func (strategy) Validate(context.Context, runtime.Object) field.ErrorList {
	return field.ErrorList{field.Forbidden(field.NewPath(""), readOnly)}
}

func (strategy) ValidateUpdate(context.Context, runtime.Object, runtime.Object) field.ErrorList {
	return field.ErrorList{field.Forbidden(field.NewPath(""), readOnly)}
}

type nodeStrategy struct{ strategy }

var _ registry.ScopedVirtualReader = nodeStrategy{}

func (s nodeStrategy) ListScoped(ctx context.Context, q registry.VirtualQuery) (runtime.Object, error) {
	var nodes corev1.NodeList
	if err := s.reader.List(ctx, corev1.SchemeGroupVersion.WithResource("nodes"), "", false, &nodes); err != nil {
		return nil, err
	}
	byName := make(map[string]*corev1.Node, len(nodes.Items))
	for i := range nodes.Items {
		byName[nodes.Items[i].Name] = &nodes.Items[i]
	}
	out := &metricsv1beta1.NodeMetricsList{}
	now := metav1.Now()
	for _, u := range s.src.Nodes(ctx) {
		node := byName[u.Name]
		if node == nil || !q.Labels.Matches(labels.Set(node.Labels)) {
			continue
		}
		out.Items = append(out.Items, metricsv1beta1.NodeMetrics{
			ObjectMeta: metav1.ObjectMeta{Name: u.Name, Labels: node.Labels, CreationTimestamp: now},
			Timestamp:  metav1.NewTime(u.Timestamp),
			Window:     metav1.Duration{Duration: u.Window.Round(time.Millisecond)},
			Usage:      usage(u.Usage),
		})
	}
	return out, nil
}

func (s nodeStrategy) GetScoped(ctx context.Context, q registry.VirtualQuery, name string) (runtime.Object, error) {
	list, err := s.ListScoped(ctx, q)
	if err != nil {
		return nil, err
	}
	for i, m := range list.(*metricsv1beta1.NodeMetricsList).Items {
		if m.Name == name {
			return &list.(*metricsv1beta1.NodeMetricsList).Items[i], nil
		}
	}
	return nil, apierrors.NewNotFound(metricsv1beta1.Resource("nodes"), name)
}

type podStrategy struct{ strategy }

var _ registry.ScopedVirtualReader = podStrategy{}

func (s podStrategy) ListScoped(ctx context.Context, q registry.VirtualQuery) (runtime.Object, error) {
	var pods corev1.PodList
	if err := s.reader.List(ctx, corev1.SchemeGroupVersion.WithResource("pods"), q.Namespace, false, &pods); err != nil {
		return nil, err
	}
	type key struct{ ns, name string }
	byName := make(map[key]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		p := &pods.Items[i]
		byName[key{p.Namespace, p.Name}] = p
	}
	out := &metricsv1beta1.PodMetricsList{}
	now := metav1.Now()
	for _, u := range s.src.Pods(ctx, q.Namespace) {
		pod := byName[key{u.Namespace, u.Name}]
		if pod == nil || !q.Labels.Matches(labels.Set(pod.Labels)) {
			continue
		}
		m := metricsv1beta1.PodMetrics{
			ObjectMeta: metav1.ObjectMeta{Namespace: u.Namespace, Name: u.Name, Labels: pod.Labels, CreationTimestamp: now},
			Timestamp:  metav1.NewTime(u.Timestamp),
			Window:     metav1.Duration{Duration: u.Window.Round(time.Millisecond)},
			Containers: []metricsv1beta1.ContainerMetrics{},
		}
		for _, c := range u.Containers {
			m.Containers = append(m.Containers, metricsv1beta1.ContainerMetrics{Name: c.Name, Usage: usage(c.Usage)})
		}
		out.Items = append(out.Items, m)
	}
	return out, nil
}

func (s podStrategy) GetScoped(ctx context.Context, q registry.VirtualQuery, name string) (runtime.Object, error) {
	list, err := s.ListScoped(ctx, q)
	if err != nil {
		return nil, err
	}
	items := list.(*metricsv1beta1.PodMetricsList).Items
	for i := range items {
		if items[i].Name == name {
			return &items[i], nil
		}
	}
	return nil, apierrors.NewNotFound(metricsv1beta1.Resource("pods"), name)
}

func usage(u resourcemetrics.Usage) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: u.CPU, corev1.ResourceMemory: u.Memory}
}
