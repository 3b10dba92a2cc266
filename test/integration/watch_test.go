package integration

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/ptr"

	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// testWatchOrder: a watch from a resourceVersion sees every later change
// to the objects it selects, in order, each with its own version.
func testWatchOrder(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 20*time.Second)
	cms := cs.CoreV1().ConfigMaps(ns)
	l, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	// a watch from "now" (no resourceVersion, sendInitialEvents=false)
	// starts empty and sees only what follows
	wNow, err := cms.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch now: %v", err)
	}
	defer wNow.Stop()

	var want []watchRecord
	a, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	want = append(want, watchRecord{watch.Added, "a", a.ResourceVersion})
	b, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	want = append(want, watchRecord{watch.Added, "b", b.ResourceVersion})
	for i := 0; i < 3; i++ {
		a.Data = map[string]string{"i": strconv.Itoa(i)}
		if a, err = cms.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update: %v", err)
		}
		want = append(want, watchRecord{watch.Modified, "a", a.ResourceVersion})
	}
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	want = append(want, watchRecord{watch.Deleted, "a", ""})
	for _, ww := range []watch.Interface{w, wNow} {
		got := readEvents(t, ww, len(want), 5*time.Second)
		if len(got) == len(want) {
			delRV, _ := strconv.ParseInt(got[len(got)-1].RV, 10, 64)
			prev, _ := strconv.ParseInt(a.ResourceVersion, 10, 64)
			if delRV <= prev {
				t.Errorf("DELETED event resourceVersion %d, want after the last update's %d", delRV, prev)
			}
			got[len(got)-1].RV = ""
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	}

	// a watch from a version in the middle replays what followed it
	mid, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: b.ResourceVersion})
	if err != nil {
		t.Fatalf("watch from b: %v", err)
	}
	defer mid.Stop()
	got := readEvents(t, mid, len(want)-2, 5*time.Second)
	for i := range got {
		got[i].RV = ""
	}
	var wantMid []watchRecord
	for _, r := range want[2:] {
		wantMid = append(wantMid, watchRecord{r.Type, r.Name, ""})
	}
	if diff := cmp.Diff(wantMid, got); diff != "" {
		t.Errorf("replay from b's resourceVersion (-want +got):\n%s", diff)
	}

	// a watch with timeoutSeconds ends by itself
	tw, err := cms.Watch(ctx, metav1.ListOptions{TimeoutSeconds: ptr.To[int64](1)})
	if err != nil {
		t.Fatalf("watch with timeout: %v", err)
	}
	select {
	case _, ok := <-tw.ResultChan():
		for ok {
			_, ok = <-tw.ResultChan()
		}
	case <-time.After(5 * time.Second):
		t.Errorf("watch with timeoutSeconds=1 still open after 5s")
		tw.Stop()
	}
}

// testWatchInitialEvents: sendInitialEvents streams the current objects,
// then a bookmark annotated k8s.io/initial-events-end, then live changes.
func testWatchInitialEvents(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 20*time.Second)
	cms := cs.CoreV1().ConfigMaps(ns)
	var last string
	for _, n := range []string{"one", "two", "three"} {
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		last = cm.ResourceVersion
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{
		SendInitialEvents:    ptr.To(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
	})
	if err != nil {
		t.Fatalf("watch-list: %v", err)
	}
	defer w.Stop()
	var added []string
	var bookmark *corev1.ConfigMap
	timeout := time.After(5 * time.Second)
	for bookmark == nil {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed before the initial-events bookmark")
			}
			switch ev.Type {
			case watch.Added:
				added = append(added, ev.Object.(*corev1.ConfigMap).Name)
			case watch.Bookmark:
				bookmark = ev.Object.(*corev1.ConfigMap)
			default:
				t.Fatalf("unexpected %s event before the bookmark: %v", ev.Type, ev.Object)
			}
		case <-timeout:
			t.Fatalf("no initial-events bookmark after 5s; got ADDED %v", added)
		}
	}
	sortStrings(added)
	if diff := cmp.Diff([]string{"one", "three", "two"}, added); diff != "" {
		t.Errorf("initial ADDED events (-want +got):\n%s", diff)
	}
	if bookmark.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
		t.Errorf("bookmark annotations %v, want %s=true", bookmark.Annotations, metav1.InitialEventsAnnotationKey)
	}
	brv, _ := strconv.ParseInt(bookmark.ResourceVersion, 10, 64)
	lrv, _ := strconv.ParseInt(last, 10, 64)
	if brv < lrv {
		t.Errorf("bookmark resourceVersion %d older than the last write %d", brv, lrv)
	}
	// then live events
	if err := cms.Delete(ctx, "two", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	got := readEvents(t, w, 1, 5*time.Second)
	if len(got) == 1 && (got[0].Type != watch.Deleted || got[0].Name != "two") {
		t.Errorf("live event after the bookmark = %v, want DELETED two", got[0])
	}

	// sendInitialEvents needs resourceVersionMatch=NotOlderThan
	_, err = cms.Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true)})
	if !apierrors.IsBadRequest(err) && !apierrors.IsInvalid(err) {
		t.Errorf("sendInitialEvents without resourceVersionMatch: err %v, want 400/422", err)
	}
}

// TestWatchBookmarks: a watch that allows bookmarks receives one within
// the server's bookmark interval.
func TestWatchBookmarks(t *testing.T) {
	t.Parallel()
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) {
		cfg.WatchBookmarkInterval = 200 * time.Millisecond
	}})
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 20*time.Second)
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Two watches side by side: one allows bookmarks, one does not.
	with, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer with.Stop()
	without, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer without.Stop()

	// The one that allows them gets two bookmarks, so at least one whole
	// bookmark interval passes with both watches open.
	start, _ := strconv.ParseInt(cm.ResourceVersion, 10, 64)
	for i := 0; i < 2; i++ {
		select {
		case ev := <-with.ResultChan():
			if ev.Type != watch.Bookmark {
				t.Fatalf("watch with allowWatchBookmarks: got %v, want a BOOKMARK", ev.Type)
			}
			rv, _ := strconv.ParseInt(ev.Object.(*corev1.ConfigMap).ResourceVersion, 10, 64)
			if rv < start {
				t.Fatalf("bookmark resourceVersion %d is before the watch start %d", rv, start)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("watch with allowWatchBookmarks: no BOOKMARK %d within 5s", i+1)
		}
	}
	// A metadata watch (what metadata informers, e.g. the garbage
	// collector's, run) gets its bookmarks as PartialObjectMetadata too;
	// a bookmark of another kind fails the client's decoding.
	mc, err := metadata.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := mc.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Stop()
	select {
	case ev := <-meta.ResultChan():
		pm, ok := ev.Object.(*metav1.PartialObjectMetadata)
		if ev.Type != watch.Bookmark || !ok || pm.ResourceVersion == "" {
			t.Fatalf("metadata watch: got %v %T (%v), want a BOOKMARK carrying PartialObjectMetadata with a resourceVersion", ev.Type, ev.Object, ev.Object)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("metadata watch with allowWatchBookmarks: no BOOKMARK within 5s")
	}

	// Then a change: it must be the first thing the other watch sees.
	cm.Data = map[string]string{"k": "v"}
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-without.ResultChan():
		if ev.Type != watch.Modified {
			t.Fatalf("watch without allowWatchBookmarks: first event %v, want MODIFIED (no bookmark)", ev.Type)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch without allowWatchBookmarks: no MODIFIED event within 5s")
	}
}
