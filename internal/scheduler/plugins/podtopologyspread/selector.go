package podtopologyspread

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
)

// ListerSelector returns the selector of a pod's default constraints, as
// upstream derives it: the requirements of every Service, ReplicationController,
// ReplicaSet and StatefulSet in the pod's namespace that selects the pod,
// ANDed together.
func ListerSelector(f informers.SharedInformerFactory) SelectorFunc {
	services := f.Core().V1().Services().Lister()
	rcs := f.Core().V1().ReplicationControllers().Lister()
	rss := f.Apps().V1().ReplicaSets().Lister()
	sss := f.Apps().V1().StatefulSets().Lister()
	return func(pod *v1.Pod) labels.Selector {
		podLabels := labels.Set(pod.Labels)
		sel := labels.NewSelector()
		addSet := func(m map[string]string) {
			if len(m) == 0 {
				return
			}
			s := labels.SelectorFromSet(m)
			if !s.Matches(podLabels) {
				return
			}
			reqs, _ := s.Requirements()
			sel = sel.Add(reqs...)
		}
		addSelector := func(ls *metav1.LabelSelector) {
			s, err := metav1.LabelSelectorAsSelector(ls)
			if err != nil || s.Empty() || !s.Matches(podLabels) {
				return
			}
			reqs, _ := s.Requirements()
			sel = sel.Add(reqs...)
		}
		if list, err := services.Services(pod.Namespace).List(labels.Everything()); err == nil {
			for _, s := range list {
				addSet(s.Spec.Selector)
			}
		}
		if list, err := rcs.ReplicationControllers(pod.Namespace).List(labels.Everything()); err == nil {
			for _, rc := range list {
				addSet(rc.Spec.Selector)
			}
		}
		if list, err := rss.ReplicaSets(pod.Namespace).List(labels.Everything()); err == nil {
			for _, rs := range list {
				addSelector(rs.Spec.Selector)
			}
		}
		if list, err := sss.StatefulSets(pod.Namespace).List(labels.Everything()); err == nil {
			for _, ss := range list {
				addSelector(ss.Spec.Selector)
			}
		}
		return sel
	}
}
