package sharedinformers_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/server"
	"github.com/skiff-sh/skiff/internal/sharedinformers"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

func testPod(name, node string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
}

// next is the watch's next event, failing after 30 s.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the watch ended")
		}
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event in 30s")
	}
	return watch.Event{}
}

func podName(t *testing.T, ev watch.Event) string {
	t.Helper()
	p, ok := ev.Object.(*corev1.Pod)
	if !ok {
		t.Fatalf("%s event of a %T", ev.Type, ev.Object)
	}
	return p.Name
}

// TestInProcessInformers: the shared informers hold the API server's
// watch-cache objects themselves (with their managedFields, which the API
// server serves), typed and generic alike; updates and deletes arrive, a
// delete with the final state.
func TestInProcessInformers(t *testing.T) {
	c := testapiserver.Start(t)
	cs := c.Clientset()
	ctx := context.Background()
	if _, err := cs.CoreV1().Pods("default").Create(ctx, testPod("one", "", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	caches := server.InProcessCaches(c.Server())
	p := sharedinformers.New(ctx, cs, 0, caches)
	t.Cleanup(p.Shutdown)
	p.IndexAll(cache.Indexers{"by-name": func(obj any) ([]string, error) {
		m, err := meta.Accessor(obj)
		return []string{m.GetName()}, err
	}})
	f := p.Scope(false)
	// The informer InProcess gives (the garbage collector's monitors) is
	// the typed one, with the indexers every in-process informer gets.
	gcPods, ok := f.InProcess(corev1.SchemeGroupVersion.WithResource("pods"))
	if !ok {
		t.Fatal("no in-process informer of pods")
	}
	if _, ok := f.InProcess(corev1.SchemeGroupVersion.WithResource("bindings")); ok {
		t.Error("an in-process informer of bindings, a virtual resource")
	}
	if _, ok := gcPods.GetIndexer().GetIndexers()["by-name"]; !ok {
		t.Error("the in-process pod informer lacks the indexer IndexAll added")
	}
	pods, nodes, cms := f.Core().V1().Pods().Informer(), f.Core().V1().Nodes().Informer(), f.Core().V1().ConfigMaps().Informer()
	if gcPods.GetIndexer() != pods.GetIndexer() {
		t.Error("InProcess gave a pod informer other than the typed one")
	}
	deleted := make(chan *corev1.Node, 1)
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if n, ok := obj.(*corev1.Node); ok {
			deleted <- n
		}
	}}); err != nil {
		t.Fatal(err)
	}
	f.Start(nil)
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v did not sync", typ)
		}
	}

	obj, ok, _ := pods.GetStore().GetByKey("default/one")
	if !ok {
		t.Fatal("the pod informer has no default/one")
	}
	pod := obj.(*corev1.Pod)
	if len(pod.ManagedFields) == 0 {
		t.Error("the in-process pod lost its managedFields: the transform changed the watch cache's object")
	}
	// The very object the watch cache holds: a watch of the cache hands
	// out the same pointer.
	pc, _, ok := caches.ForResource(corev1.SchemeGroupVersion.WithResource("pods"))
	if !ok {
		t.Fatal("no in-process cache of pods")
	}
	w, err := pc.Watch(ctx, "default", metav1.ListOptions{FieldSelector: "metadata.name=one"})
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Object != runtime.Object(pod) {
		t.Error("the informer's pod is a copy, not the watch cache's object")
	}
	w.Stop()
	// Every kind the API server caches is read in process: a ConfigMap
	// too, and the generic informer of a resource is its typed one.
	obj, ok, _ = cms.GetStore().GetByKey("default/cm")
	if !ok {
		t.Fatal("the ConfigMap informer has no default/cm")
	}
	cmc, _, _ := caches.ForResource(corev1.SchemeGroupVersion.WithResource("configmaps"))
	w, err = cmc.Watch(ctx, "default", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Object != obj.(runtime.Object) {
		t.Error("the informer's ConfigMap is a copy, not the watch cache's object")
	}
	w.Stop()
	g, err := f.ForResource(corev1.SchemeGroupVersion.WithResource("configmaps"))
	if err != nil {
		t.Fatal(err)
	}
	if g.Informer().GetIndexer() != cms.GetIndexer() {
		t.Error("the generic ConfigMap informer is not the typed one")
	}
	if got, err := g.Lister().ByNamespace("default").Get("cm"); err != nil || got != obj.(runtime.Object) {
		t.Errorf("the generic lister's default/cm: %v, %v", got, err)
	}

	// An update replaces the object; a delete tells the final state.
	pod = pod.DeepCopy()
	pod.Labels = map[string]string{"v": "2"}
	if _, err := cs.CoreV1().Pods("default").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		obj, ok, _ := pods.GetStore().GetByKey("default/one")
		return ok && obj.(*corev1.Pod).Labels["v"] == "2", nil
	}); err != nil {
		t.Fatal("the informer never saw the pod's update")
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels = map[string]string{"last": "state"}
	if _, err := cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-deleted:
		if n.Labels["last"] != "state" {
			t.Errorf("the deleted node's final state has labels %v, want last=state", n.Labels)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the node informer never told the delete")
	}
	if _, ok, _ := nodes.GetStore().GetByKey("n1"); ok {
		t.Error("the deleted node is still in the informer")
	}
}

// TestInProcessCache: lists and watches served in process follow the API's
// rules: a watch from a list's resourceVersion tells what came after,
// selectors filter (a bad one is 400), a resourceVersion older than the
// cache's history is 410 Gone (the reflector then relists), a watch-list
// ends its initial events with the bookmark informers wait for, and a
// cancelled context ends the watch.
func TestInProcessCache(t *testing.T) {
	c := testapiserver.Start(t)
	cs := c.Clientset()
	ctx := context.Background()
	pc, _, ok := server.InProcessCaches(c.Server()).ForResource(corev1.SchemeGroupVersion.WithResource("pods"))
	if !ok {
		t.Fatal("no in-process cache of pods")
	}
	if _, _, ok := server.InProcessCaches(c.Server()).ForResource(corev1.SchemeGroupVersion.WithResource("bindings")); ok {
		t.Error("an in-process cache of bindings, a virtual resource")
	}
	create := func(p *corev1.Pod) *corev1.Pod {
		t.Helper()
		created, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return created
	}
	before := create(testPod("before", "", map[string]string{"app": "a"}))
	// Not older than the create: "0" (any) may find a cache that has not
	// seen it yet.
	obj, err := pc.List(ctx, "", metav1.ListOptions{ResourceVersion: before.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	list := obj.(*corev1.PodList)
	if len(list.Items) != 1 || list.Items[0].Name != "before" {
		t.Fatalf("list has %d pods, want [before]", len(list.Items))
	}

	all, err := pc.Watch(ctx, "default", metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer all.Stop()
	labelled, err := pc.Watch(ctx, "", metav1.ListOptions{ResourceVersion: list.ResourceVersion, LabelSelector: "app=a"})
	if err != nil {
		t.Fatal(err)
	}
	defer labelled.Stop()
	onNode, err := pc.Watch(ctx, "", metav1.ListOptions{ResourceVersion: list.ResourceVersion, FieldSelector: "spec.nodeName=n1"})
	if err != nil {
		t.Fatal(err)
	}
	defer onNode.Stop()
	create(testPod("b-unscheduled", "", map[string]string{"app": "b"}))
	create(testPod("a-on-n1", "n1", map[string]string{"app": "a"}))
	for _, tc := range []struct {
		name string
		w    watch.Interface
		want []string
	}{
		{"all after the list", all, []string{"b-unscheduled", "a-on-n1"}},
		{"app=a", labelled, []string{"a-on-n1"}},
		{"spec.nodeName=n1", onNode, []string{"a-on-n1"}},
	} {
		for _, want := range tc.want {
			ev := next(t, tc.w)
			if ev.Type != watch.Added || podName(t, ev) != want {
				t.Errorf("%s: got %s %s, want ADDED %s", tc.name, ev.Type, podName(t, ev), want)
			}
		}
	}

	if _, err := pc.Watch(ctx, "", metav1.ListOptions{FieldSelector: "spec.nope=x"}); !apierrors.IsBadRequest(err) {
		t.Errorf("a watch with an unknown field: %v, want 400 Bad Request", err)
	}

	// A watch-list: the current pods, then the bookmark that ends them.
	wctx, cancel := context.WithCancel(ctx)
	wl, err := pc.Watch(wctx, "default", metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	var initial []string
	for {
		ev := next(t, wl)
		if ev.Type == watch.Bookmark {
			m := ev.Object.(*corev1.Pod)
			if m.Annotations[metav1.InitialEventsAnnotationKey] != "true" || m.ResourceVersion == "" {
				t.Errorf("the bookmark after the initial events has annotations %v and resourceVersion %q", m.Annotations, m.ResourceVersion)
			}
			break
		}
		initial = append(initial, podName(t, ev))
	}
	if len(initial) != 3 {
		t.Errorf("initial events %v, want the 3 pods", initial)
	}
	cancel()
	select {
	case _, ok := <-wl.ResultChan():
		if ok {
			t.Error("an event after the context was cancelled")
		}
	case <-time.After(10 * time.Second):
		t.Error("the watch did not end when its context was cancelled")
	}

	// A restarted server's cache holds no history from before it started:
	// a watch from the first list's resourceVersion is 410 Gone, and the
	// reflector relists.
	create(testPod("last", "", nil))
	c.Restart()
	pc, _, _ = server.InProcessCaches(c.Server()).ForResource(corev1.SchemeGroupVersion.WithResource("pods"))
	if _, err := pc.Watch(ctx, "", metav1.ListOptions{ResourceVersion: list.ResourceVersion}); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Errorf("a watch from a resourceVersion before the cache's history: %v, want 410 Gone", err)
	}
}
