// Package robustness checks the API server the way etcd's robustness tests
// check etcd (issue #15): concurrent clients create, update, delete, get
// and list a few ConfigMaps while faults are injected (the API server
// killed with SIGKILL and started again, the etcd member stopped and
// started again, the connections between them cut, the watch caches' etcd
// watches broken, etcd compacted under them, slow and stalled watchers).
// The history of the clients' calls must be linearizable (porcupine, with
// the model in model_test.go), and every watch ordered, unique, reliable
// (no event missing up to the last event or bookmark it delivered),
// bookmarkable and resumable from any resourceVersion it delivered, checked
// against etcd's own history of the keys.
//
// The short run is part of `go test`; a long one:
//
//	go test ./test/robustness -run TestRobustness -robustness.duration=10m -v
package robustness

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/internal/storage"
)

var (
	duration      = flag.Duration("robustness.duration", 12*time.Second, "how long the clients run")
	clients       = flag.Int("robustness.clients", 4, "concurrent writing and reading clients")
	faultInterval = flag.Duration("robustness.fault-interval", 1500*time.Millisecond, "mean time between faults")
	seed          = flag.Int64("robustness.seed", 0, "seed of the faults' choice and timing (0: the time)")
	checkTimeout  = flag.Duration("robustness.check-timeout", 2*time.Minute, "how long porcupine may search for a linearization")
)

const ns = "robustness"

// faults are the kinds injected, in the order they are reported.
var faults = []string{"kill -9 API server", "stop etcd", "cut API server-etcd connections", "break cache watches", "compact and break cache watches"}

// counters is what the run did, logged at its end (bench/README.md).
type counters struct {
	ops, unknown, resolved, dropped, watchEvents, bookmarks, resumes, gone atomic.Int64
	faults                                                                 [5]atomic.Int64
}

// TestRobustness runs the clients and faults twice: against ConfigMaps
// served from the watch cache, and from etcd alone (as Events are).
func TestRobustness(t *testing.T) {
	t.Run("watch cache", func(t *testing.T) { robustness(t, false) })
	t.Run("etcd alone", func(t *testing.T) { robustness(t, true) })
}

func robustness(t *testing.T, uncached bool) {
	c := startCluster(t, uncached)
	cs := c.clientset()
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startRV := rvOf(start)

	var n counters
	epoch := time.Now()
	now := func() int64 { return time.Since(epoch).Nanoseconds() }
	ref := newReference(c.etcdClient, startRV, now)
	defer ref.stop()

	runCtx, stopRun := context.WithTimeout(ctx, *duration)
	defer stopRun()
	watchCtx, stopWatchers := context.WithCancel(ctx)
	defer stopWatchers()

	// Watchers: three that keep up, one that reads slowly and now and then
	// not at all for two seconds.
	var wwg sync.WaitGroup
	ws := make([]*watcher, 4)
	for i := range ws {
		ws[i] = &watcher{id: i, cs: c.clientset(), slow: i == len(ws)-1, n: &n, rv: startRV}
		ws[i].segments = []*segment{{start: startRV, upTo: startRV}}
		wwg.Add(1)
		go func() { defer wwg.Done(); ws[i].run(watchCtx) }()
	}

	// Faults, one at a time. A watch from a resourceVersion at or below
	// gonePast may be 410 Gone: etcd was compacted past it, or the watch
	// cache relisted after it.
	faultSeed := *seed
	if faultSeed == 0 {
		faultSeed = time.Now().UnixNano()
	}
	t.Logf("faults with -robustness.seed=%d", faultSeed)
	var gonePast atomic.Int64
	var fwg sync.WaitGroup
	fwg.Add(1)
	go func() {
		defer fwg.Done()
		r := rand.New(rand.NewSource(faultSeed))
		for {
			select {
			case <-runCtx.Done():
				return
			case <-time.After(time.Duration(float64(*faultInterval) * (0.5 + r.Float64()))):
			}
			// relisted records that the watch caches (re)started from a
			// revision no later than that of a consistent list made once
			// they are ready.
			relisted := func() {
				for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
					l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
					if err == nil {
						gonePast.Store(rvOf(l))
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			f := r.Intn(len(faults))
			n.faults[f].Add(1)
			switch f {
			case 0:
				c.killAPIServer()
				time.Sleep(time.Duration(r.Intn(500)) * time.Millisecond)
				c.startAPIServer()
				relisted()
			case 1:
				c.stopEtcd()
				time.Sleep(time.Duration(r.Intn(1000)) * time.Millisecond)
				c.startEtcd()
			case 2:
				c.proxy.cut()
			case 3:
				c.breakCacheWatches()
			case 4:
				// Compact to what etcd's history reader has seen (never
				// past it, or the reference would lose events), then break
				// the watches: the caches must relist.
				rev := ref.revision()
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := c.etcdClient.Compact(cctx, rev)
				cancel()
				if err != nil {
					t.Logf("compact %d: %v", rev, err)
				}
				c.breakCacheWatches()
				relisted()
			}
		}
	}()

	// Clients.
	var (
		hmu     sync.Mutex
		history []porcupine.Operation
	)
	var cwg sync.WaitGroup
	for id := 0; id < *clients; id++ {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			cl := &client{id: id, cs: c.clientset(), r: rand.New(rand.NewSource(int64(id))), seen: map[int]int64{}}
			for runCtx.Err() == nil {
				in := cl.next()
				call := now()
				out := cl.do(ctx, in)
				ret := now()
				if out == nil {
					continue // a read that failed tells nothing
				}
				n.ops.Add(1)
				if out.kind == outUnknown {
					n.unknown.Add(1)
					ret = math.MaxInt64
					time.Sleep(50 * time.Millisecond) // the server may be down
				}
				hmu.Lock()
				history = append(history, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: *out, Return: ret})
				hmu.Unlock()
			}
		}()
	}
	cwg.Wait()
	fwg.Wait()

	// A last write after every client stopped: etcd's history and every
	// watcher must reach it.
	var end *corev1.ConfigMap
	for deadline := time.Now().Add(time.Minute); ; {
		if end, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "end"}}, metav1.CreateOptions{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create the last ConfigMap: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	last := rvOf(end)
	ref.waitFor(t, last)
	for _, w := range ws {
		w.waitFor(t, last)
	}
	stopWatchers()
	wwg.Wait()
	events := ref.events()

	// Writes whose answer was lost are resolved from etcd's history, as
	// etcd's robustness tests do: every value is unique, so a create or
	// update whose value etcd never saw did not happen, and one whose
	// value it saw happened at that revision.
	history = resolveUnknown(history, events, &n)

	violations := 0
	res, info := porcupine.CheckOperationsVerbose(kvModel, history, *checkTimeout)
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		violations++
		t.Errorf("history of %d operations is not linearizable", len(history))
		longest := 0
		for _, p := range info.PartialLinearizations() {
			for _, l := range p {
				longest = max(longest, len(l))
			}
		}
		t.Logf("longest linearizable prefix: %d operations", longest)
	default:
		t.Errorf("porcupine gave no answer within %v for %d operations", *checkTimeout, len(history))
	}
	for _, w := range ws {
		for _, err := range w.check(events) {
			violations++
			t.Error(err)
		}
	}
	// Resumable from any resourceVersion a watcher delivered.
	r := rand.New(rand.NewSource(2))
	resumed, gone := 0, 0
	for _, w := range ws {
		for _, s := range w.segments {
			// Three resourceVersions of the segment, preferring those no
			// fault made too old.
			var fresh []event
			for _, e := range s.events {
				if e.rv > gonePast.Load() {
					fresh = append(fresh, e)
				}
			}
			if len(fresh) == 0 {
				fresh = s.events
			}
			for range 3 {
				if len(fresh) == 0 {
					continue
				}
				from := fresh[r.Intn(len(fresh))].rv
				err := checkResume(ctx, cs, from, events)
				switch {
				case err == nil:
					resumed++
				case apierrors.IsGone(err) || apierrors.IsResourceExpired(err):
					if from > gonePast.Load() {
						violations++
						t.Errorf("watch from %d: %v, though neither compaction nor relist passed it (up to %d)", from, err, gonePast.Load())
					}
					gone++
				default:
					violations++
					t.Errorf("watch from %d: %v", from, err)
				}
			}
		}
	}
	var fs []string
	for i, name := range faults {
		fs = append(fs, fmt.Sprintf("%d %s", n.faults[i].Load(), name))
	}
	t.Logf("robustness: %v, %d clients, %d operations checked (%d with unknown outcome: %d resolved from etcd's history, %d never happened), %d etcd events, %d watch events delivered, %d bookmarks, %d watches, %d 410 Gone relists, %d resumes from a delivered resourceVersion checked (%d 410 Gone after compaction or relist); faults: %v; violations: %d",
		*duration, *clients, len(history), n.unknown.Load(), n.resolved.Load(), n.dropped.Load(), len(events), n.watchEvents.Load(), n.bookmarks.Load(), n.resumes.Load(), n.gone.Load(), resumed, gone, fs, violations)
}

// resolveUnknown replaces each write of unknown outcome by what etcd's
// history says of it, as etcd's robustness tests do, so that porcupine
// need not try every place (or none) for it. Every value is unique, so a
// create or update whose value etcd never saw did not happen, and one whose
// value it saw happened at that revision, before the history reader saw
// it. A delete always names the resourceVersion it deletes, and only one
// delete can remove that version: it happened if etcd's history has that
// delete and no delete known to have succeeded claims it (of several
// candidates, all stay unknown).
func resolveUnknown(history []porcupine.Operation, ref []event, n *counters) []porcupine.Operation {
	type version struct {
		name string
		rv   int64
	}
	byValue := map[string]event{}
	deletes := map[version]event{}
	for _, e := range ref {
		if e.value != "" {
			byValue[e.value] = e
		}
		if e.typ == watch.Deleted {
			deletes[version{e.name, e.prevRV}] = e
		}
	}
	// succeeded: deletes known to have succeeded; candidates: deletes of
	// unknown outcome, by the version they name.
	succeeded, candidates := map[version]bool{}, map[version]int{}
	for _, op := range history {
		in, o := op.Input.(input), op.Output.(output)
		if in.kind == opDelete {
			v := version{keyName(in.key), in.precondition}
			switch o.kind {
			case outOK:
				succeeded[v] = true
			case outUnknown:
				candidates[v]++
			}
		}
	}
	out := history[:0]
	for _, op := range history {
		in, o := op.Input.(input), op.Output.(output)
		if o.kind != outUnknown {
			out = append(out, op)
			continue
		}
		var (
			e     event
			found bool
		)
		switch in.kind {
		case opCreate, opUpdate:
			e, found = byValue[in.value]
			op.Output = output{kind: outOK, rv: e.rv, value: in.value}
		case opDelete:
			v := version{keyName(in.key), in.precondition}
			e, found = deletes[v]
			switch {
			case found && succeeded[v]:
				found = false // a delete known to have succeeded did it
			case found && candidates[v] > 1:
				out = append(out, op) // it or another candidate did it
				continue
			}
			op.Output = output{kind: outOK}
		}
		if !found || e.seen < op.Call {
			n.dropped.Add(1)
			continue
		}
		n.resolved.Add(1)
		op.Return = e.seen
		out = append(out, op)
	}
	return out
}

// client issues random requests on numKeys ConfigMaps, remembering the
// resourceVersions it saw for its preconditions.
type client struct {
	id   int
	cs   kubernetes.Interface
	r    *rand.Rand
	seen map[int]int64
	seq  int
}

func keyName(k int) string { return "k" + strconv.Itoa(k) }

func (c *client) next() input {
	k := c.r.Intn(numKeys)
	c.seq++
	value := fmt.Sprintf("c%d-%d", c.id, c.seq)
	switch p := c.r.Intn(100); {
	case p < 25:
		return input{kind: opGet, key: k}
	case p < 35:
		return input{kind: opList}
	case p < 50:
		return input{kind: opCreate, key: k, value: value}
	case p < 85:
		// With the resourceVersion last seen; one in five unconditional.
		in := input{kind: opUpdate, key: k, value: value}
		if c.r.Intn(5) != 0 {
			in.precondition = c.seen[k]
		}
		return in
	default:
		// Always with the resourceVersion last seen (so that an answer
		// lost can be told from etcd's history); a get when none was.
		if c.seen[k] == 0 {
			return input{kind: opGet, key: k}
		}
		return input{kind: opDelete, key: k, precondition: c.seen[k]}
	}
}

func rvOf(o interface{ GetResourceVersion() string }) int64 {
	rv, _ := strconv.ParseInt(o.GetResourceVersion(), 10, 64)
	return rv
}

// outcome turns an error into an answer.
func outcome(err error) outKind {
	switch {
	case apierrors.IsNotFound(err):
		return outNotFound
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return outConflict
	}
	return outUnknown
}

// do runs one request; nil for a read that failed.
func (c *client) do(ctx context.Context, in input) *output {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	api := c.cs.CoreV1().ConfigMaps(ns)
	name := keyName(in.key)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": in.value}}
	written := func(got *corev1.ConfigMap, err error) *output {
		if err != nil {
			return &output{kind: outcome(err)}
		}
		c.seen[in.key] = rvOf(got)
		return &output{kind: outOK, rv: rvOf(got), value: got.Data["v"]}
	}
	switch in.kind {
	case opCreate:
		return written(api.Create(ctx, cm, metav1.CreateOptions{}))
	case opUpdate:
		if in.precondition != 0 {
			cm.ResourceVersion = strconv.FormatInt(in.precondition, 10)
		}
		return written(api.Update(ctx, cm, metav1.UpdateOptions{}))
	case opDelete:
		opts := metav1.DeleteOptions{}
		if in.precondition != 0 {
			rv := strconv.FormatInt(in.precondition, 10)
			opts.Preconditions = &metav1.Preconditions{ResourceVersion: &rv}
		}
		if err := api.Delete(ctx, name, opts); err != nil {
			return &output{kind: outcome(err)}
		}
		return &output{kind: outOK}
	case opGet:
		got, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				return &output{kind: outNotFound}
			}
			return nil
		}
		c.seen[in.key] = rvOf(got)
		return &output{kind: outOK, rv: rvOf(got), value: got.Data["v"]}
	case opList:
		l, err := api.List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil
		}
		out := &output{kind: outOK, listRV: rvOf(l)}
		for _, item := range l.Items {
			k, err := strconv.Atoi(item.Name[1:])
			if err != nil || k >= numKeys {
				continue
			}
			out.items[k] = entry{exists: true, rv: rvOf(&item), value: item.Data["v"]}
			c.seen[k] = rvOf(&item)
		}
		return out
	}
	return nil
}

// event is one change as a watch delivers it (or etcd has it). Of etcd's
// history only: value is the ConfigMap's data, prevRV the resourceVersion
// a delete removed, seen when the history reader got it (in the clients'
// clock).
type event struct {
	typ    watch.EventType
	name   string
	rv     int64
	value  string
	prevRV int64
	seen   int64
}

func (e event) String() string { return fmt.Sprintf("%s %s@%d", e.typ, e.name, e.rv) }

// segment is what one watcher received from start on without a 410 Gone
// in between (resumes from its own resourceVersions included).
type segment struct {
	start  int64
	events []event
	// upTo is the highest resourceVersion the watcher was told it has
	// seen everything to (last event or bookmark).
	upTo int64
}

type watcher struct {
	id       int
	cs       kubernetes.Interface
	slow     bool
	n        *counters
	mu       sync.Mutex
	rv       int64
	segments []*segment
	errs     []error
	// trail is what the watcher did last, for the report of a violation.
	trail []string
}

func (w *watcher) note(format string, args ...any) {
	w.trail = append(w.trail, fmt.Sprintf(format, args...))
	if len(w.trail) > 12 {
		w.trail = w.trail[1:]
	}
}

func (w *watcher) failf(format string, args ...any) {
	w.errs = append(w.errs, fmt.Errorf("watcher %d: "+format+" (last: %s)", append(append([]any{w.id}, args...), strings.Join(w.trail, "; "))...))
}

// run watches until ctx ends, resuming from the last resourceVersion it
// got whenever the watch ends, and now and then on purpose.
func (w *watcher) run(ctx context.Context) {
	r := rand.New(rand.NewSource(int64(100 + w.id)))
	for ctx.Err() == nil {
		w.mu.Lock()
		from := w.rv
		w.mu.Unlock()
		wctx, cancel := context.WithTimeout(ctx, time.Duration(300+r.Intn(2000))*time.Millisecond)
		wi, err := w.cs.CoreV1().ConfigMaps(ns).Watch(wctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(from, 10), AllowWatchBookmarks: true})
		if err != nil {
			cancel()
			if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
				w.relist(ctx)
				continue
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		w.n.resumes.Add(1)
		w.mu.Lock()
		w.note("watch from %d", from)
		w.mu.Unlock()
		w.consume(ctx, wi, r)
		wi.Stop()
		cancel()
	}
}

// relist starts a new segment after a 410 Gone, as an informer would.
func (w *watcher) relist(ctx context.Context) {
	w.n.gone.Add(1)
	for ctx.Err() == nil {
		l, err := w.cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		w.mu.Lock()
		w.rv = rvOf(l)
		w.note("relist at %d", w.rv)
		w.segments = append(w.segments, &segment{start: w.rv, upTo: w.rv})
		w.mu.Unlock()
		return
	}
}

func (w *watcher) consume(ctx context.Context, wi watch.Interface, r *rand.Rand) {
	for ev := range wi.ResultChan() {
		if w.slow {
			time.Sleep(5 * time.Millisecond)
			if r.Intn(500) == 0 {
				time.Sleep(2 * time.Second) // a stalled reader
			}
		}
		switch ev.Type {
		case watch.Error:
			err := apierrors.FromObject(ev.Object)
			w.mu.Lock()
			w.note("error %v", err)
			w.mu.Unlock()
			if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
				w.relist(ctx)
			}
			return
		case watch.Bookmark:
			m, err := meta.Accessor(ev.Object)
			if err != nil {
				continue
			}
			w.n.bookmarks.Add(1)
			rv, _ := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
			w.mu.Lock()
			s := w.segments[len(w.segments)-1]
			w.note("bookmark %d", rv)
			if rv < s.upTo {
				w.failf("bookmark %d after resourceVersion %d", rv, s.upTo)
			} else {
				s.upTo, w.rv = rv, rv
			}
			w.mu.Unlock()
		default:
			m, err := meta.Accessor(ev.Object)
			if err != nil {
				continue
			}
			w.n.watchEvents.Add(1)
			rv, _ := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
			e := event{typ: ev.Type, name: m.GetName(), rv: rv}
			w.mu.Lock()
			s := w.segments[len(w.segments)-1]
			w.note("%s", e)
			if e.rv <= s.upTo {
				// Ordered and unique: every event is newer than all before
				// it, and than any bookmark.
				w.failf("%s after resourceVersion %d", e, s.upTo)
			}
			s.events = append(s.events, e)
			s.upTo, w.rv = e.rv, e.rv
			w.mu.Unlock()
		}
	}
}

// waitFor waits until the watcher has delivered rv.
func (w *watcher) waitFor(t *testing.T, rv int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		w.mu.Lock()
		got := w.rv
		w.mu.Unlock()
		if got >= rv {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("watcher %d: at resourceVersion %d, never reached %d", w.id, got, rv)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// check compares each segment with etcd's own history: every change after
// the segment's start up to what it was told it has seen, none missing,
// none extra, in order.
func (w *watcher) check(ref []event) []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	errs := w.errs
	for _, s := range w.segments {
		if err := sameEvents(s.events, between(ref, s.start, s.upTo)); err != nil {
			errs = append(errs, fmt.Errorf("watcher %d from %d to %d: %v", w.id, s.start, s.upTo, err))
		}
	}
	return errs
}

// between is the events of ref after from and at most to.
func between(ref []event, from, to int64) []event {
	var out []event
	for _, e := range ref {
		if e.rv > from && e.rv <= to {
			out = append(out, event{typ: e.typ, name: e.name, rv: e.rv})
		}
	}
	return out
}

func sameEvents(got, want []event) error {
	for i := 0; i < len(got) || i < len(want); i++ {
		switch {
		case i >= len(got):
			return fmt.Errorf("missing %v (and %d more)", want[i], len(want)-i-1)
		case i >= len(want):
			return fmt.Errorf("extra %v", got[i])
		case got[i] != want[i]:
			return fmt.Errorf("event %d: got %v, want %v", i, got[i], want[i])
		}
	}
	return nil
}

// checkResume watches from rv and compares what comes with etcd's
// history; a 410 is returned as the API error it is.
func checkResume(ctx context.Context, cs kubernetes.Interface, from int64, ref []event) error {
	want := between(ref, from, math.MaxInt64)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	wi, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(from, 10)})
	if err != nil {
		return err
	}
	defer wi.Stop()
	if len(want) == 0 {
		return nil
	}
	var got []event
	for ev := range wi.ResultChan() {
		if ev.Type == watch.Error {
			return apierrors.FromObject(ev.Object)
		}
		m, err := meta.Accessor(ev.Object)
		if err != nil {
			return err
		}
		rv, _ := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
		got = append(got, event{typ: ev.Type, name: m.GetName(), rv: rv})
		if len(got) == len(want) {
			break
		}
	}
	return sameEvents(got, want)
}

// reference is etcd's own history of the namespace's ConfigMaps, read by
// a watch on etcd itself (which the etcd client resumes across restarts
// of the member).
type reference struct {
	mu     sync.Mutex
	evs    []event
	rev    int64
	cancel context.CancelFunc
	done   chan struct{}
}

func newReference(client *clientv3.Client, startRV int64, now func() int64) *reference {
	prefix := "/registry/configmaps/" + ns + "/"
	ctx, cancel := context.WithCancel(context.Background())
	r := &reference{rev: startRV, cancel: cancel, done: make(chan struct{})}
	ch := client.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(startRV+1), clientv3.WithPrevKV(), clientv3.WithProgressNotify())
	codec := storage.ProtobufCodec{GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}}
	go func() {
		defer close(r.done)
		for resp := range ch {
			r.mu.Lock()
			for _, ev := range resp.Events {
				e := event{name: string(ev.Kv.Key[len(prefix):]), rv: ev.Kv.ModRevision, seen: now()}
				if ev.PrevKv != nil {
					e.prevRV = ev.PrevKv.ModRevision
				}
				switch {
				case ev.Type == clientv3.EventTypeDelete:
					e.typ = watch.Deleted
				case ev.IsCreate():
					e.typ = watch.Added
				default:
					e.typ = watch.Modified
				}
				if ev.Type != clientv3.EventTypeDelete {
					var cm corev1.ConfigMap
					if err := codec.Decode(ev.Kv.Value, &cm); err == nil {
						e.value = cm.Data["v"]
					}
				}
				r.evs = append(r.evs, e)
				r.rev = e.rv
			}
			if resp.IsProgressNotify() && resp.Header.Revision > r.rev {
				r.rev = resp.Header.Revision
			}
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *reference) stop() {
	r.cancel()
	<-r.done
}

// revision is the etcd revision up to which the history is complete.
func (r *reference) revision() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rev
}

// waitFor waits until etcd's history has reached rv.
func (r *reference) waitFor(t *testing.T, rv int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for r.revision() < rv {
		if time.Now().After(deadline) {
			t.Fatalf("etcd history at %d, never reached %d", r.revision(), rv)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *reference) events() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.evs...)
}
