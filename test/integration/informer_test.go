package integration

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// requestLog records the list and watch requests a client makes, to tell
// which path an informer took.
type requestLog struct {
	mu   sync.Mutex
	urls []string
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.urls = append(l.urls, r.Method+" "+r.URL.RequestURI())
		l.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

func (l *requestLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.urls...)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// recorder collects informer notifications.
type recorder struct {
	mu      sync.Mutex
	adds    map[string]int
	updates []updatePair
	deletes map[string]int
}

type updatePair struct{ name, oldRV, newRV string }

func newRecorder() *recorder {
	return &recorder{adds: map[string]int{}, deletes: map[string]int{}}
}

func (r *recorder) handler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.adds[obj.(*corev1.ConfigMap).Name]++
		},
		UpdateFunc: func(o, n interface{}) {
			r.mu.Lock()
			defer r.mu.Unlock()
			old, cur := o.(*corev1.ConfigMap), n.(*corev1.ConfigMap)
			r.updates = append(r.updates, updatePair{cur.Name, old.ResourceVersion, cur.ResourceVersion})
		},
		DeleteFunc: func(obj interface{}) {
			r.mu.Lock()
			defer r.mu.Unlock()
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			r.deletes[obj.(*corev1.ConfigMap).Name]++
		},
	}
}

func (r *recorder) added(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.adds[name] > 0
}

func (r *recorder) deleted(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deletes[name] > 0
}

// update reports whether an update of name matched f.
func (r *recorder) update(name string, f func(updatePair) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range r.updates {
		if u.name == name && f(u) {
			return true
		}
	}
	return false
}

// TestInformer: a SharedInformerFactory lists, watches, resyncs, and keeps
// delivering after the server restarts over a compacted store (its watch
// is cut and its resourceVersion is too old to resume).
func TestInformer(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 40*time.Second)
	cms := cs.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}

	log := &requestLog{}
	cfg := rest.CopyConfig(c.Config)
	cfg.Wrap(log.wrap)
	ics := kubernetes.NewForConfigOrDie(cfg)
	factory := informers.NewSharedInformerFactoryWithOptions(ics, time.Second, informers.WithNamespace(ns))
	inf := factory.Core().V1().ConfigMaps()
	rec := newRecorder()
	if _, err := inf.Informer().AddEventHandler(rec.handler()); err != nil {
		t.Fatalf("add handler: %v", err)
	}
	stop := make(chan struct{})
	defer func() { close(stop); factory.Shutdown() }()
	factory.Start(stop)
	syncCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for typ, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			t.Fatalf("informer for %v did not sync", typ)
		}
	}
	// handlers are notified asynchronously after the store syncs
	eventually(t, 5*time.Second, "AddFunc for the object that existed before the informer started", func() (bool, error) {
		return rec.added("before"), nil
	})
	watchList := false
	for _, u := range log.all() {
		if strings.Contains(u, "sendInitialEvents=true") {
			watchList = true
		}
	}
	mode := os.Getenv("KUBE_FEATURE_WatchListClient")
	t.Logf("WatchListClient=%q: informer used watch-list: %v; requests: %v", mode, watchList, log.all())
	switch mode {
	case "true":
		if !watchList {
			t.Errorf("KUBE_FEATURE_WatchListClient=true but the informer did not stream its list (sendInitialEvents)")
		}
	case "false":
		if watchList {
			t.Errorf("KUBE_FEATURE_WatchListClient=false but the informer used sendInitialEvents")
		}
	}

	// live add and update
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "live"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	eventually(t, 5*time.Second, "AddFunc for live", func() (bool, error) { return rec.added("live"), nil })
	cm.Data = map[string]string{"k": "v"}
	cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	eventually(t, 5*time.Second, "UpdateFunc with the new version", func() (bool, error) {
		return rec.update("live", func(u updatePair) bool { return u.newRV == cm.ResourceVersion && u.oldRV != u.newRV }), nil
	})
	// resync: UpdateFunc with the same resourceVersion on both sides
	eventually(t, 5*time.Second, "resync UpdateFunc (old and new resourceVersion equal)", func() (bool, error) {
		return rec.update("before", func(u updatePair) bool { return u.oldRV == u.newRV }), nil
	})
	// the lister sees the cache
	got, err := inf.Lister().ConfigMaps(ns).Get("live")
	if err != nil || got.ResourceVersion != cm.ResourceVersion {
		t.Errorf("lister: %v %v", got, err)
	}

	// compact the store to now, restart the server: the informer's watch
	// ends, its resourceVersion predates the new watch cache (410), and it
	// must relist and go on
	rev := etcdRevision(t, c)
	if _, err := c.Etcd().Compact(ctx, rev); err != nil {
		t.Fatalf("compact: %v", err)
	}
	c.Restart()
	cs = c.Clientset()
	cms = cs.CoreV1().ConfigMaps(ns)
	if err := cms.Delete(ctx, "before", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete after restart: %v", err)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create after restart: %v", err)
	}
	eventually(t, 20*time.Second, "informer delivers events after compaction and restart", func() (bool, error) {
		return rec.added("after") && rec.deleted("before"), nil
	})
}

// TestInformerWatchListModes runs TestInformer with the client's
// WatchListClient feature switched off (client-go reads the gate once per
// process, so it runs in its own process). The default of client-go
// v0.37, watch-list on, is what TestInformer itself runs with.
func TestInformerWatchListModes(t *testing.T) {
	t.Parallel()
	if os.Getenv("KUBE_FEATURE_WatchListClient") != "" {
		t.Skip("already a child run")
	}
	for _, mode := range []string{"false"} {
		t.Run("WatchListClient="+mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestInformer$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), "KUBE_FEATURE_WatchListClient="+mode)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("TestInformer with WatchListClient=%s failed: %v\n%s", mode, err, lastLines(string(out), 30))
			}
			for _, l := range strings.Split(string(out), "\n") {
				if strings.Contains(l, "informer used watch-list") {
					t.Log(strings.TrimSpace(l))
				}
			}
		})
	}
}

func lastLines(s string, n int) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		// drop klog lines
		if len(l) > 1 && (l[0] == 'I' || l[0] == 'E' || l[0] == 'W') && l[1] >= '0' && l[1] <= '9' {
			continue
		}
		keep = append(keep, l)
	}
	if len(keep) > n {
		keep = keep[len(keep)-n:]
	}
	return strings.Join(keep, "\n")
}

// TestExpired: a resourceVersion the server no longer has is 410 Gone:
// a watch from before the watch cache's start, an exact list and a
// continue token from before a compaction.
func TestExpired(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 30*time.Second)
	cms := cs.CoreV1().ConfigMaps(ns)
	first, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	for _, n := range []string{"b", "c", "d"} {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create: %v", err)
		}
	}
	page, err := cms.List(ctx, metav1.ListOptions{Limit: 2})
	if err != nil || page.Continue == "" {
		t.Fatalf("first page: %v (continue %q)", err, page.Continue)
	}
	// an exact list at an old revision works before compaction
	if _, err := cms.List(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact}); err != nil {
		t.Fatalf("exact list before compaction: %v", err)
	}
	if _, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: first.ResourceVersion}, Data: map[string]string{"x": "y"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update: %v", err)
	}
	if _, err := c.Etcd().Compact(ctx, etcdRevision(t, c)); err != nil {
		t.Fatalf("compact: %v", err)
	}
	isGone := func(err error) bool { return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) }
	if _, err := cms.List(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact}); !isGone(err) {
		t.Errorf("exact list at a compacted revision: err %v, want 410", err)
	}
	if _, err := cms.List(ctx, metav1.ListOptions{Limit: 2, Continue: page.Continue}); !isGone(err) {
		t.Errorf("continue token from before compaction: err %v, want 410", err)
	}

	// restart: the new watch cache starts at the current revision, so a
	// watch from before it is 410
	c.Restart()
	cms = c.Clientset().CoreV1().ConfigMaps(ns)
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
	if err == nil {
		defer w.Stop()
		select {
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type != watch.Error {
				t.Fatalf("watch from a compacted revision: first event %v %v, want an ERROR event with 410", ev.Type, ev.Object)
			}
			err = apierrors.FromObject(ev.Object)
		case <-time.After(5 * time.Second):
			t.Fatalf("watch from a compacted revision: no error after 5s")
		}
	}
	if !isGone(err) {
		t.Errorf("watch from a compacted revision: err %v, want 410 Gone/Expired", err)
	}
	// a watch from a current version still works
	l, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	w2, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatalf("watch from current: %v", err)
	}
	defer w2.Stop()
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "e"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	if got := readEvents(t, w2, 1, 5*time.Second); len(got) == 1 && got[0].Name != "e" {
		t.Errorf("event %v, want ADDED e", got[0])
	}
}

// TestPersistence: objects survive a restart of etcd and the API server.
func TestPersistence(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 30*time.Second)
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	svc, err := cs.CoreV1().Services(ns).Create(ctx, newService("kept", corev1.ServiceTypeNodePort, "", 0), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service: %v", err)
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, newDeployment("kept"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	c.Restart()
	cs = c.Clientset()
	got, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after restart: %v", err)
	}
	if got.UID != cm.UID || got.ResourceVersion != cm.ResourceVersion || got.Data["k"] != "v" {
		t.Errorf("after restart: uid %s rv %s data %v; want %s %s k=v", got.UID, got.ResourceVersion, got.Data, cm.UID, cm.ResourceVersion)
	}
	if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("deployment after restart: %v", err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		t.Errorf("namespace after restart: %v", err)
	}
	// the allocator was rebuilt: the service's IP and port are still taken
	_, err = cs.CoreV1().Services(ns).Create(ctx, newService("clash", corev1.ServiceTypeClusterIP, svc.Spec.ClusterIP, 0), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("reusing a live service's clusterIP after restart: err %v, want Invalid", err)
	}
	_, err = cs.CoreV1().Services(ns).Create(ctx, newService("clash2", corev1.ServiceTypeNodePort, "", svc.Spec.Ports[0].NodePort), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("reusing a live service's nodePort after restart: err %v, want Invalid", err)
	}
}
