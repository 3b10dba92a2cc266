package storage_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/skiff-sh/skiff/internal/etcd"
	"github.com/skiff-sh/skiff/internal/storage"
)

const prefix = "/registry/configmaps/"

func startEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e := etcd.New(etcd.Options{Dir: t.TempDir(), UnsafeNoFsync: true})
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-e.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd did not start")
	}
	return e.Client()
}

func attrs(o runtime.Object) (labels.Set, fields.Set, error) {
	cm := o.(*corev1.ConfigMap)
	return cm.Labels, fields.Set{"metadata.name": cm.Name, "metadata.namespace": cm.Namespace}, nil
}

func newCacher(t *testing.T, c *clientv3.Client, opts storage.CacherOptions) *storage.Cacher {
	t.Helper()
	store := storage.NewStore(c, storage.ProtobufCodec{GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap")},
		func() runtime.Object { return &corev1.ConfigMap{} }, "configmaps", storage.StoreOptions{})
	cacher := storage.NewCacher(store, prefix, attrs, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = cacher.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-cacher.Ready()
	return cacher
}

func cm(name string, lbl map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: lbl}, Data: map[string]string{"k": name}}
}

func create(t *testing.T, s *storage.Cacher, obj *corev1.ConfigMap) *corev1.ConfigMap {
	t.Helper()
	out := &corev1.ConfigMap{}
	if err := s.Create(context.Background(), prefix+"ns/"+obj.Name, obj, out); err != nil {
		t.Fatalf("create %s: %v", obj.Name, err)
	}
	return out
}

func TestCreateGetUpdateDelete(t *testing.T) {
	c := startEtcd(t)
	s := newCacher(t, c, storage.CacherOptions{})
	ctx := context.Background()
	created := create(t, s, cm("a", nil))
	if created.ResourceVersion == "" {
		t.Fatal("created object has no resourceVersion")
	}
	if err := s.Create(ctx, prefix+"ns/a", cm("a", nil), nil); !storage.IsExists(err) {
		t.Fatalf("second create: got %v, want exists", err)
	}
	// The stored value is upstream's protobuf envelope without a resourceVersion.
	resp, err := c.Get(ctx, prefix+"ns/a")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("raw get: %v", err)
	}
	if got := string(resp.Kvs[0].Value[:4]); got != "k8s\x00" {
		t.Fatalf("stored prefix %q, want k8s\\x00", got)
	}

	stale := created.ResourceVersion
	out := &corev1.ConfigMap{}
	err = s.GuaranteedUpdate(ctx, prefix+"ns/a", out, nil, func(cur runtime.Object) (runtime.Object, error) {
		c := cur.(*corev1.ConfigMap).DeepCopy()
		c.Data["k"] = "changed"
		return c, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.ResourceVersion == stale || out.Data["k"] != "changed" {
		t.Fatalf("update did not take: %+v", out)
	}
	err = s.GuaranteedUpdate(ctx, prefix+"ns/a", out, &storage.Preconditions{ResourceVersion: &stale}, func(cur runtime.Object) (runtime.Object, error) { return cur, nil })
	if !storage.IsConflict(err) {
		t.Fatalf("stale precondition: got %v, want conflict", err)
	}
	if err := s.Delete(ctx, prefix+"ns/a", nil, &storage.Preconditions{ResourceVersion: &stale}); !storage.IsConflict(err) {
		t.Fatalf("stale delete: got %v, want conflict", err)
	}
	if err := s.Delete(ctx, prefix+"ns/a", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Get(ctx, prefix+"ns/a", &corev1.ConfigMap{}); !storage.IsNotFound(err) {
		t.Fatalf("get after delete: got %v, want not found", err)
	}
}

func names(t *testing.T, list *corev1.ConfigMapList) []string {
	var out []string
	for _, i := range list.Items {
		out = append(out, i.Name)
	}
	return out
}

func TestListConsistentAndPaged(t *testing.T) {
	c := startEtcd(t)
	s := newCacher(t, c, storage.CacherOptions{})
	ctx := context.Background()
	for i := 0; i < 7; i++ {
		create(t, s, cm(fmt.Sprintf("c%d", i), map[string]string{"even": fmt.Sprint(i%2 == 0)}))
	}
	// A consistent list (no resourceVersion) sees every write before it.
	list := &corev1.ConfigMapList{}
	if err := s.List(ctx, prefix, storage.ListOptions{}, list); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"c0", "c1", "c2", "c3", "c4", "c5", "c6"}, names(t, list)); diff != "" {
		t.Fatalf("list (-want +got):\n%s", diff)
	}
	sel, _ := labels.Parse("even=true")
	list = &corev1.ConfigMapList{}
	if err := s.List(ctx, prefix, storage.ListOptions{Predicate: storage.Predicate{Label: sel, GetAttrs: attrs}}, list); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"c0", "c2", "c4", "c6"}, names(t, list)); diff != "" {
		t.Fatalf("selected list (-want +got):\n%s", diff)
	}

	// Pages keep the first page's revision, even across writes.
	var got []string
	opts := storage.ListOptions{Limit: 3}
	var rv string
	for page := 0; ; page++ {
		list = &corev1.ConfigMapList{}
		if err := s.List(ctx, prefix, opts, list); err != nil {
			t.Fatal(err)
		}
		if page == 0 {
			rv = list.ResourceVersion
			create(t, s, cm("c99", nil)) // not in the snapshot
		} else if list.ResourceVersion != rv {
			t.Fatalf("page %d at rv %s, first page at %s", page, list.ResourceVersion, rv)
		}
		got = append(got, names(t, list)...)
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	if diff := cmp.Diff([]string{"c0", "c1", "c2", "c3", "c4", "c5", "c6"}, got); diff != "" {
		t.Fatalf("paged list (-want +got):\n%s", diff)
	}

	// After compaction, an old continue token is expired.
	resp, _ := c.Get(ctx, "x")
	if _, err := c.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	list = &corev1.ConfigMapList{}
	tokenRV, _ := storage.ParseRV(rv)
	err := s.List(ctx, prefix, storage.ListOptions{ResourceVersion: fmt.Sprint(tokenRV), ResourceVersionMatch: "Exact"}, list)
	if !storage.IsExpired(err) {
		t.Fatalf("exact list at compacted revision: got %v, want expired", err)
	}
}

type seen struct {
	Type watch.EventType
	Name string
}

func collect(t *testing.T, w *storage.CacheWatch, n int) ([]seen, []storage.WatchEvent) {
	t.Helper()
	var out []seen
	var raw []storage.WatchEvent
	deadline := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %v", out)
			}
			raw = append(raw, ev)
			name := ""
			if ev.Object != nil {
				name = mustObject(t, ev.Object).(*corev1.ConfigMap).Name
			}
			out = append(out, seen{ev.Type, name})
		case <-deadline:
			t.Fatalf("timed out with %v", out)
		}
	}
	return out, raw
}

func TestWatchFromRevisionAndFilters(t *testing.T) {
	c := startEtcd(t)
	s := newCacher(t, c, storage.CacherOptions{Capacity: 5})
	ctx := context.Background()
	first := create(t, s, cm("a", map[string]string{"app": "x"}))

	sel, _ := labels.Parse("app=x")
	w, err := s.WatchCached(ctx, prefix, storage.ListOptions{ResourceVersion: first.ResourceVersion, Predicate: storage.Predicate{Label: sel, GetAttrs: attrs}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	create(t, s, cm("b", map[string]string{"app": "y"})) // filtered out
	create(t, s, cm("c", map[string]string{"app": "x"})) // added
	out := &corev1.ConfigMap{}
	_ = s.GuaranteedUpdate(ctx, prefix+"ns/c", out, nil, func(cur runtime.Object) (runtime.Object, error) {
		c := cur.(*corev1.ConfigMap).DeepCopy()
		c.Labels = map[string]string{"app": "z"} // leaves the selection: a DELETED for this watcher
		return c, nil
	})
	_ = s.GuaranteedUpdate(ctx, prefix+"ns/b", out, nil, func(cur runtime.Object) (runtime.Object, error) {
		c := cur.(*corev1.ConfigMap).DeepCopy()
		c.Labels = map[string]string{"app": "x"} // enters it: an ADDED
		return c, nil
	})
	if err := s.Delete(ctx, prefix+"ns/b", nil, nil); err != nil {
		t.Fatal(err)
	}
	got, _ := collect(t, w, 4)
	want := []seen{{watch.Added, "c"}, {watch.Deleted, "c"}, {watch.Added, "b"}, {watch.Deleted, "b"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}

	// With a history of 5 events, the first revision is gone: 410.
	for i := 0; i < 6; i++ {
		create(t, s, cm(fmt.Sprintf("fill%d", i), nil))
	}
	// A consistent list makes the cache catch up with those writes first.
	if err := s.List(ctx, prefix, storage.ListOptions{}, &corev1.ConfigMapList{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WatchCached(ctx, prefix, storage.ListOptions{ResourceVersion: first.ResourceVersion}); !storage.IsExpired(err) {
		t.Fatalf("watch from evicted revision: got %v, want expired", err)
	}
}

func TestWatchInitialEventsAndEncodeOnce(t *testing.T) {
	c := startEtcd(t)
	s := newCacher(t, c, storage.CacherOptions{})
	ctx := context.Background()
	create(t, s, cm("a", nil))
	create(t, s, cm("b", nil))
	yes := true
	var watches []*storage.CacheWatch
	for i := 0; i < 3; i++ {
		w, err := s.WatchCached(ctx, prefix, storage.ListOptions{SendInitialEvents: &yes, ResourceVersionMatch: "NotOlderThan", AllowWatchBookmarks: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		watches = append(watches, w)
	}
	for _, w := range watches {
		got, raw := collect(t, w, 3)
		want := []seen{{watch.Added, "a"}, {watch.Added, "b"}, {watch.Bookmark, ""}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("initial events (-want +got):\n%s", diff)
		}
		if !raw[2].InitialEventsEnd || raw[2].RV == 0 {
			t.Fatalf("bookmark does not mark the end of initial events: %+v", raw[2])
		}
	}
	create(t, s, cm("c", nil))
	encodings := 0
	var held [][]byte // the watchers' frames in flight keep the bytes
	for _, w := range watches {
		_, raw := collect(t, w, 1)
		b, err := raw[0].Object.Encoded("test", func(o runtime.Object) ([]byte, error) {
			encodings++
			return []byte(o.(*corev1.ConfigMap).Name), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, b)
	}
	goruntime.KeepAlive(held)
	if encodings != 1 {
		t.Fatalf("one change seen by 3 watchers was encoded %d times, want 1", encodings)
	}
}

func TestBookmarks(t *testing.T) {
	c := startEtcd(t)
	s := newCacher(t, c, storage.CacherOptions{BookmarkInterval: 100 * time.Millisecond})
	first := create(t, s, cm("a", nil))
	w, err := s.WatchCached(context.Background(), prefix, storage.ListOptions{ResourceVersion: first.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	got, raw := collect(t, w, 1)
	if got[0].Type != watch.Bookmark {
		t.Fatalf("got %v, want a bookmark", got)
	}
	rv, _ := storage.ParseRV(first.ResourceVersion)
	if raw[0].RV < rv {
		t.Fatalf("bookmark at %d, before the watch's start %d", raw[0].RV, rv)
	}
}

// mustObject is a cached object's object (safe in goroutines: it reports
// with Error).
func mustObject(t testing.TB, o *storage.CachedObject) runtime.Object {
	t.Helper()
	obj, err := o.Object()
	if err != nil {
		t.Error(err)
		return &corev1.ConfigMap{}
	}
	return obj
}

// TestServeAs: a second version served from one cache converts its
// objects on the way out, without touching the cached ones, matches its
// own field names, and caches its encodings apart from the stored
// version's, once each.
func TestServeAs(t *testing.T) {
	c := startEtcd(t)
	s := newCacher(t, c, storage.CacherOptions{})
	ctx := context.Background()
	// The "served version": ConfigMaps whose data values are upper case,
	// with a field "meta.name" for metadata.name.
	servedStore := storage.NewStore(c, storage.ProtobufCodec{GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap")},
		func() runtime.Object { return &corev1.ConfigMap{} }, "configmaps.served", storage.StoreOptions{})
	v := s.ServeAs(servedStore, &storage.ServedVersion{
		Name: "served/v1",
		Convert: func(stored runtime.Object) (runtime.Object, error) {
			out := stored.(*corev1.ConfigMap).DeepCopy()
			for k, val := range out.Data {
				out.Data[k] = strings.ToUpper(val)
			}
			return out, nil
		},
		FieldLabel: func(name string) string {
			if name == "meta.name" {
				return "metadata.name"
			}
			return name
		},
	})
	w, err := v.WatchCached(ctx, prefix, storage.ListOptions{Predicate: storage.Predicate{Field: fields.OneTermEqualSelector("meta.name", "b")}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	create(t, s, cm("a", nil))
	create(t, s, cm("b", nil))

	_, raw := collect(t, w, 1)
	if got := mustObject(t, raw[0].Object).(*corev1.ConfigMap); got.Name != "b" || got.Data["k"] != "B" {
		t.Fatalf("watch of meta.name=b through the served version: %+v", got)
	}
	for _, rv := range []string{"0", ""} {
		objs, _, err := v.ListCached(ctx, prefix, storage.ListOptions{ResourceVersion: rv, Predicate: storage.Predicate{Field: fields.OneTermEqualSelector("meta.name", "a")}})
		if err != nil || len(objs) != 1 {
			t.Fatalf("list of meta.name=a: %v, %d objects", err, len(objs))
		}
		if got := mustObject(t, objs[0]).(*corev1.ConfigMap); got.Data["k"] != "A" {
			t.Fatalf("served object %+v", got)
		}
		list := &corev1.ConfigMapList{}
		if err := v.List(ctx, prefix, storage.ListOptions{ResourceVersion: rv}, list); err != nil || len(list.Items) != 2 || list.Items[1].Data["k"] != "B" {
			t.Fatalf("typed list through the served version: %v %+v", err, list.Items)
		}
	}
	stored, _, err := s.ListCached(ctx, prefix, storage.ListOptions{ResourceVersion: "0"})
	if err != nil || len(stored) != 2 || mustObject(t, stored[0]).(*corev1.ConfigMap).Data["k"] != "a" {
		t.Fatalf("stored version after conversions: %v %+v", err, stored)
	}
	got := &corev1.ConfigMap{}
	if err := v.GetRV(ctx, prefix+"ns/a", "0", got); err != nil || got.Data["k"] != "A" {
		t.Fatalf("get from the cache through the served version: %v %+v", err, got)
	}

	// Each version's encoding is made once, for all lists.
	var held [][]byte
	encodings := map[string]int{}
	encode := func(o runtime.Object) ([]byte, error) {
		d := o.(*corev1.ConfigMap).Data["k"]
		encodings[d]++
		return []byte(d), nil
	}
	for range 3 {
		for _, c := range []*storage.Cacher{s, v} {
			objs, _, err := c.ListCached(ctx, prefix+"ns/a", storage.ListOptions{ResourceVersion: "0"})
			if err != nil || len(objs) != 1 {
				t.Fatalf("list: %v %d", err, len(objs))
			}
			b, err := objs[0].Encoded("test", encode)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, b) // readers that hold the bytes share them
			if want := map[*storage.Cacher]string{s: "a", v: "A"}[c]; string(b) != want {
				t.Fatalf("encoding %q, want %q", b, want)
			}
		}
	}
	goruntime.KeepAlive(held)
	if diff := cmp.Diff(map[string]int{"a": 1, "A": 1}, encodings); diff != "" {
		t.Errorf("encodings made (-want +got):\n%s", diff)
	}
}

// TestEncodingsNotKeptForLife: once no reader holds an object's encoding,
// the cache lets it go (it is made again when asked).
func TestEncodingsNotKeptForLife(t *testing.T) {
	o := storage.NewCachedObject("/p/a", cm("a", nil), 1)
	encodings := 0
	encode := func(runtime.Object) ([]byte, error) {
		encodings++
		return make([]byte, 4096), nil
	}
	b, _ := o.Encoded("test", encode)
	if again, _ := o.Encoded("test", encode); encodings != 1 || &again[0] != &b[0] {
		t.Fatalf("encoded %d times while held, want 1", encodings)
	}
	goruntime.KeepAlive(b)
	b = nil
	goruntime.GC()
	goruntime.GC()
	if _, err := o.Encoded("test", encode); err != nil || encodings != 2 {
		t.Fatalf("encoded %d times after the readers let go, want 2 (the first kept for the object's life)", encodings)
	}
}
