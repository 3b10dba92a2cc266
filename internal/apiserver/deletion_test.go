package apiserver

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/batch"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/namespace"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/pod"
)

func TestDecideDeletion(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	earlier := metav1.NewTime(now.Add(-time.Minute))
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	objMeta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "uid-1", ResourceVersion: "7"}
	}
	boundPod := func(grace int64) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: objMeta("p"), Spec: corev1.PodSpec{NodeName: "n1", TerminationGracePeriodSeconds: &grace}}
	}
	terminatingPod := func(grace int64) *corev1.Pod {
		p := boundPod(30)
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = at(time.Duration(grace)*time.Second), &grace
		return p
	}
	foreground := metav1.DeletePropagationForeground
	withGeneration := func(p *corev1.Pod, g int64) *corev1.Pod { p.Generation = g; return p }

	// want is the decision, and for markForDeletion the marked object's
	// deletionTimestamp, deletionGracePeriodSeconds and finalizers.
	type marked struct {
		DeletionTimestamp *metav1.Time
		Grace             *int64
		Finalizers        []string
		Phase             corev1.NamespacePhase
		Generation        int64
	}
	tests := []struct {
		name     string
		strategy registry.Strategy
		obj      runtime.Object
		opts     metav1.DeleteOptions
		want     deleteAction
		wantMark *marked
	}{
		{"plain object: delete now", registry.DefaultStrategy{},
			&corev1.ConfigMap{ObjectMeta: objMeta("c")}, metav1.DeleteOptions{}, deleteNow, nil},
		{"UID precondition fails", registry.DefaultStrategy{},
			&corev1.ConfigMap{ObjectMeta: objMeta("c")}, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID("other"))}}, refuseDelete, nil},
		{"resourceVersion precondition fails", registry.DefaultStrategy{},
			&corev1.ConfigMap{ObjectMeta: objMeta("c")}, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptr.To("6")}}, refuseDelete, nil},
		{"preconditions hold", registry.DefaultStrategy{},
			&corev1.ConfigMap{ObjectMeta: objMeta("c")}, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID("uid-1")), ResourceVersion: ptr.To("7")}}, deleteNow, nil},
		{"object with a finalizer: marked, grace 0", registry.DefaultStrategy{},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Finalizers: []string{"example.com/hold"}}}, metav1.DeleteOptions{},
			markForDeletion, &marked{DeletionTimestamp: at(0), Grace: ptr.To[int64](0), Finalizers: []string{"example.com/hold"}}},
		{"already marked with the same finalizers: nothing to write", registry.DefaultStrategy{},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Finalizers: []string{"example.com/hold"}, DeletionTimestamp: &earlier, DeletionGracePeriodSeconds: ptr.To[int64](0)}}, metav1.DeleteOptions{},
			alreadyMarked, nil},
		{"foreground: deleteDependents finalizer", registry.DefaultStrategy{},
			&corev1.ConfigMap{ObjectMeta: objMeta("c")}, metav1.DeleteOptions{PropagationPolicy: &foreground},
			markForDeletion, &marked{DeletionTimestamp: at(0), Grace: ptr.To[int64](0), Finalizers: []string{metav1.FinalizerDeleteDependents}}},
		{"orphanDependents: orphan finalizer", registry.DefaultStrategy{},
			&corev1.ConfigMap{ObjectMeta: objMeta("c")}, metav1.DeleteOptions{OrphanDependents: ptr.To(true)},
			markForDeletion, &marked{DeletionTimestamp: at(0), Grace: ptr.To[int64](0), Finalizers: []string{metav1.FinalizerOrphanDependents}}},
		{"job: orphans by default", batch.JobStrategy{},
			&batchv1.Job{ObjectMeta: objMeta("j")}, metav1.DeleteOptions{},
			markForDeletion, &marked{DeletionTimestamp: at(0), Grace: ptr.To[int64](0), Finalizers: []string{metav1.FinalizerOrphanDependents}}},
		{"job with background propagation: delete now", batch.JobStrategy{},
			&batchv1.Job{ObjectMeta: objMeta("j")}, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}, deleteNow, nil},
		{"bound pod: graceful with its termination grace", pod.Strategy{},
			boundPod(30), metav1.DeleteOptions{},
			markForDeletion, &marked{DeletionTimestamp: at(30 * time.Second), Grace: ptr.To[int64](30)}},
		{"bound pod: the first mark moves its generation on", pod.Strategy{},
			withGeneration(boundPod(60), 1), metav1.DeleteOptions{},
			markForDeletion, &marked{DeletionTimestamp: at(60 * time.Second), Grace: ptr.To[int64](60), Generation: 2}},
		{"terminating pod, shorter grace: generation stays", pod.Strategy{},
			withGeneration(terminatingPod(10), 2), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](5)},
			markForDeletion, &marked{DeletionTimestamp: at(5 * time.Second), Grace: ptr.To[int64](5), Generation: 2}},
		{"object with a finalizer and a generation: moves on", registry.DefaultStrategy{},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 3, Finalizers: []string{"example.com/hold"}}}, metav1.DeleteOptions{},
			markForDeletion, &marked{DeletionTimestamp: at(0), Grace: ptr.To[int64](0), Finalizers: []string{"example.com/hold"}, Generation: 4}},
		{"bound pod, grace 0: delete now", pod.Strategy{},
			boundPod(30), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, deleteNow, nil},
		{"unbound pod: delete now", pod.Strategy{},
			&corev1.Pod{ObjectMeta: objMeta("p")}, metav1.DeleteOptions{}, deleteNow, nil},
		{"terminating pod, longer grace: unchanged", pod.Strategy{},
			terminatingPod(10), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](20)}, alreadyMarked, nil},
		{"terminating pod, shorter grace: deadline moves in", pod.Strategy{},
			terminatingPod(10), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](5)},
			markForDeletion, &marked{DeletionTimestamp: at(5 * time.Second), Grace: ptr.To[int64](5)}},
		{"namespace with spec finalizers: Terminating", namespace.Strategy{},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
			metav1.DeleteOptions{}, markForDeletion, &marked{DeletionTimestamp: at(0), Grace: ptr.To[int64](0), Phase: corev1.NamespaceTerminating}},
		{"namespace without spec finalizers: delete now", namespace.Strategy{},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, metav1.DeleteOptions{}, deleteNow, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.obj.DeepCopyObject()
			d := decideDeletion(context.Background(), tc.strategy, tc.obj, &tc.opts, now)
			if d.action != tc.want {
				t.Fatalf("decision %v (err %v), want %v", d.action, d.err, tc.want)
			}
			if diff := cmp.Diff(before, tc.obj); diff != "" {
				t.Errorf("decideDeletion changed the stored object (-before +after):\n%s", diff)
			}
			if (d.err != nil) != (tc.want == refuseDelete) {
				t.Errorf("err = %v", d.err)
			}
			if tc.wantMark == nil {
				return
			}
			m, err := meta.Accessor(d.object)
			if err != nil {
				t.Fatal(err)
			}
			got := &marked{DeletionTimestamp: m.GetDeletionTimestamp(), Grace: m.GetDeletionGracePeriodSeconds(), Finalizers: m.GetFinalizers(), Generation: m.GetGeneration()}
			if ns, ok := d.object.(*corev1.Namespace); ok {
				got.Phase = ns.Status.Phase
			}
			if diff := cmp.Diff(tc.wantMark, got); diff != "" {
				t.Errorf("marked object (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeletionComplete(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	tests := []struct {
		name     string
		strategy registry.Strategy
		obj      runtime.Object
		want     bool
	}{
		{"not marked", registry.DefaultStrategy{}, &corev1.ConfigMap{}, false},
		{"marked, no finalizers", registry.DefaultStrategy{}, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}, true},
		{"marked, a finalizer left", registry.DefaultStrategy{}, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now, Finalizers: []string{"x"}}}, false},
		{"marked, grace left", pod.Strategy{}, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now, DeletionGracePeriodSeconds: ptr.To[int64](30)}}, false},
		{"namespace, spec finalizer left", namespace.Strategy{},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}}}, false},
		{"namespace, finalized", namespace.Strategy{}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := deletionComplete(tc.strategy, tc.obj); got != tc.want {
				t.Errorf("deletionComplete = %v, want %v", got, tc.want)
			}
		})
	}
}
