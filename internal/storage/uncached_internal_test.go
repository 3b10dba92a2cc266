package storage

import (
	"context"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// etcd leaves out the previous value of a change when compaction passed
// it (a watcher catching up). An uncached watch cannot then say what was
// deleted, or whether an object left a selection: it must end, so that
// its client resumes (and gets 410), rather than skip the change. The
// robustness checker found a DELETED lost this way.
func TestUncachedWatchEndsWithoutPreviousValue(t *testing.T) {
	const prefix = "/registry/configmaps/"
	store := NewStore(nil, ProtobufCodec{GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap")},
		func() runtime.Object { return &corev1.ConfigMap{} }, "configmaps", StoreOptions{})
	c := NewCacher(store, prefix, nil, CacherOptions{Uncached: true})
	put := func(name string, created, rev int64) *clientv3.Event {
		b, err := store.encode(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}})
		if err != nil {
			t.Fatal(err)
		}
		return &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(prefix + "ns/" + name), Value: b, CreateRevision: created, ModRevision: rev}}
	}
	for _, tc := range []struct {
		name string
		ev   *clientv3.Event
	}{
		{"delete", &clientv3.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(prefix + "ns/a"), ModRevision: 5}}},
		{"update", put("a", 2, 5)},
	} {
		for _, selectors := range []bool{false, true} {
			ch := make(chan clientv3.WatchResponse, 1)
			ch <- clientv3.WatchResponse{Events: []*clientv3.Event{put("a", 2, 2), tc.ev, put("b", 6, 6)}}
			ctx, cancel := context.WithCancel(context.Background())
			w := newCacheWatcher(prefix, Predicate{}, false, nil)
			cw := &CacheWatch{c: c, w: w, cancel: cancel}
			go c.feedUncached(ctx, cw, ch, selectors)
			go w.run(ctx, nil, false, 0)
			deadline := time.After(10 * time.Second)
		read:
			for {
				select {
				case ev, ok := <-w.result:
					if !ok {
						break read
					}
					if obj, _ := ev.Object.Object(); obj.(*corev1.ConfigMap).Name == "b" {
						t.Fatalf("%s without its previous value (selectors %v): the watch went on past it", tc.name, selectors)
					}
				case <-deadline:
					t.Fatalf("%s without its previous value (selectors %v): the watch did not end", tc.name, selectors)
				}
			}
			cancel()
		}
	}
}
