package replicaset

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// kind is what the controller needs of the objects it manages. Both
// ReplicaSets and ReplicationControllers are handled as ReplicaSets: an RC
// is converted on read and its status converted back on write, the way
// upstream runs its replication manager on the ReplicaSet logic.
type kind struct {
	name     string // the queue's and the controller's name
	gvk      schema.GroupVersionKind
	informer cache.SharedIndexInformer
	// get and list read the informer's cache.
	get  func(namespace, name string) (*appsv1.ReplicaSet, error)
	list func(namespace string) ([]*appsv1.ReplicaSet, error)
	// getLive reads the API server (adoption re-checks against it).
	getLive func(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error)
	// updateStatus writes rs.Status of the object rs was converted from.
	updateStatus func(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error)
	// convert turns an informer object into a ReplicaSet (nil if it is not one).
	convert func(obj any) *appsv1.ReplicaSet
}

func replicaSetKind(client kubernetes.Interface, f informers.SharedInformerFactory) kind {
	inf := f.Apps().V1().ReplicaSets()
	lister := inf.Lister()
	return kind{
		name:     "replicaset",
		gvk:      appsv1.SchemeGroupVersion.WithKind("ReplicaSet"),
		informer: inf.Informer(),
		get: func(ns, name string) (*appsv1.ReplicaSet, error) {
			return lister.ReplicaSets(ns).Get(name)
		},
		list: func(ns string) ([]*appsv1.ReplicaSet, error) {
			return lister.ReplicaSets(ns).List(labels.Everything())
		},
		getLive: func(ctx context.Context, ns, name string) (*appsv1.ReplicaSet, error) {
			return client.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
		},
		updateStatus: func(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
			return client.AppsV1().ReplicaSets(rs.Namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{})
		},
		convert: func(obj any) *appsv1.ReplicaSet {
			rs, _ := obj.(*appsv1.ReplicaSet)
			return rs
		},
	}
}

func replicationControllerKind(client kubernetes.Interface, f informers.SharedInformerFactory) kind {
	inf := f.Core().V1().ReplicationControllers()
	lister := inf.Lister()
	return kind{
		name:     "replicationcontroller",
		gvk:      corev1.SchemeGroupVersion.WithKind("ReplicationController"),
		informer: inf.Informer(),
		get: func(ns, name string) (*appsv1.ReplicaSet, error) {
			rc, err := lister.ReplicationControllers(ns).Get(name)
			if err != nil {
				return nil, err
			}
			return rcToRS(rc), nil
		},
		list: func(ns string) ([]*appsv1.ReplicaSet, error) {
			rcs, err := lister.ReplicationControllers(ns).List(labels.Everything())
			if err != nil {
				return nil, err
			}
			out := make([]*appsv1.ReplicaSet, 0, len(rcs))
			for _, rc := range rcs {
				out = append(out, rcToRS(rc))
			}
			return out, nil
		},
		getLive: func(ctx context.Context, ns, name string) (*appsv1.ReplicaSet, error) {
			rc, err := client.CoreV1().ReplicationControllers(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return rcToRS(rc), nil
		},
		updateStatus: func(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
			rc, err := lister.ReplicationControllers(rs.Namespace).Get(rs.Name)
			if err != nil {
				return nil, err
			}
			rc = rc.DeepCopy()
			rc.ResourceVersion = rs.ResourceVersion
			rc.Status = rsStatusToRC(rs.Status)
			out, err := client.CoreV1().ReplicationControllers(rs.Namespace).UpdateStatus(ctx, rc, metav1.UpdateOptions{})
			if err != nil {
				return nil, err
			}
			return rcToRS(out), nil
		},
		convert: func(obj any) *appsv1.ReplicaSet {
			rc, ok := obj.(*corev1.ReplicationController)
			if !ok {
				return nil
			}
			return rcToRS(rc)
		},
	}
}

// rcToRS converts a ReplicationController into the equivalent ReplicaSet.
func rcToRS(rc *corev1.ReplicationController) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: *rc.ObjectMeta.DeepCopy(),
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        rc.Spec.Replicas,
			MinReadySeconds: rc.Spec.MinReadySeconds,
			Template:        corev1.PodTemplateSpec{},
		},
		Status: appsv1.ReplicaSetStatus{
			Replicas:             rc.Status.Replicas,
			FullyLabeledReplicas: rc.Status.FullyLabeledReplicas,
			ReadyReplicas:        rc.Status.ReadyReplicas,
			AvailableReplicas:    rc.Status.AvailableReplicas,
			ObservedGeneration:   rc.Status.ObservedGeneration,
		},
	}
	if rc.Spec.Selector != nil {
		rs.Spec.Selector = &metav1.LabelSelector{MatchLabels: rc.Spec.Selector}
	} else {
		rs.Spec.Selector = &metav1.LabelSelector{}
	}
	if rc.Spec.Template != nil {
		rs.Spec.Template = *rc.Spec.Template.DeepCopy()
	}
	for _, c := range rc.Status.Conditions {
		rs.Status.Conditions = append(rs.Status.Conditions, appsv1.ReplicaSetCondition{
			Type: appsv1.ReplicaSetConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return rs
}

func rsStatusToRC(s appsv1.ReplicaSetStatus) corev1.ReplicationControllerStatus {
	out := corev1.ReplicationControllerStatus{
		Replicas:             s.Replicas,
		FullyLabeledReplicas: s.FullyLabeledReplicas,
		ReadyReplicas:        s.ReadyReplicas,
		AvailableReplicas:    s.AvailableReplicas,
		ObservedGeneration:   s.ObservedGeneration,
	}
	for _, c := range s.Conditions {
		out.Conditions = append(out.Conditions, corev1.ReplicationControllerCondition{
			Type: corev1.ReplicationControllerConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return out
}

func (k kind) ownerRef(rs *appsv1.ReplicaSet) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion: k.gvk.GroupVersion().String(), Kind: k.gvk.Kind,
		Name: rs.Name, UID: rs.UID, Controller: &yes, BlockOwnerDeletion: &yes,
	}
}

func (k kind) String() string { return fmt.Sprintf("%s (%s)", k.name, k.gvk.Kind) }
