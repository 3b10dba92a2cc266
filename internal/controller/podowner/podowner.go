// Package podowner indexes pods by the controller that owns them: one
// index on the shared pod informer for every controller that lists its own
// pods and the orphans it may adopt (DaemonSet, StatefulSet, Job), instead
// of one identical index each.
package podowner

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// IndexName is the index on the pod informer.
const IndexName = "skiff.sh/pod-controller"

// AddIndex adds the index to a pod informer (before it starts). A second
// call, by another controller on the same shared informer, is a no-op.
func AddIndex(inf cache.SharedIndexInformer) error {
	if _, ok := inf.GetIndexer().GetIndexers()[IndexName]; ok {
		return nil
	}
	if err := inf.AddIndexers(cache.Indexers{IndexName: index}); err != nil {
		return fmt.Errorf("pod owner index: %w", err)
	}
	return nil
}

// index keys a pod by "<namespace>/<controller UID>", or "<namespace>/"
// when it has no controller (an orphan).
func index(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		return []string{pod.Namespace + "/" + string(ref.UID)}, nil
	}
	return []string{pod.Namespace + "/"}, nil
}

// Owned lists the pods in namespace whose controller has uid.
func Owned(idx cache.Indexer, namespace string, uid types.UID) ([]any, error) {
	return idx.ByIndex(IndexName, namespace+"/"+string(uid))
}

// Orphans lists the pods in namespace without a controller.
func Orphans(idx cache.Indexer, namespace string) ([]any, error) {
	return idx.ByIndex(IndexName, namespace+"/")
}

// Candidates returns the pods in namespace that the controller with uid may
// claim: those it controls and the orphans, in that order.
func Candidates(idx cache.Indexer, namespace string, uid types.UID) ([]*corev1.Pod, error) {
	owned, err := Owned(idx, namespace, uid)
	if err != nil {
		return nil, err
	}
	orphans, err := Orphans(idx, namespace)
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(owned)+len(orphans))
	for _, obj := range append(owned, orphans...) {
		if pod, ok := obj.(*corev1.Pod); ok {
			out = append(out, pod)
		}
	}
	return out, nil
}
