package robustness

import (
	"math"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/watch"
)

// TestModel shows that the checker tells linearizable histories from ones
// a buggy server could produce (a stale read, a lost update, a revision
// going back, a list missing a write), so that the 0 violations of
// TestRobustness mean something. Each op is [call, return] in time; ret -1
// is a lost answer.
func TestModel(t *testing.T) {
	type op struct {
		client    int
		call, ret int64
		in        input
		out       output
	}
	create := func(k int, v string) input { return input{kind: opCreate, key: k, value: v} }
	update := func(k int, v string, pre int64) input {
		return input{kind: opUpdate, key: k, value: v, precondition: pre}
	}
	del := func(k int, pre int64) input { return input{kind: opDelete, key: k, precondition: pre} }
	get := func(k int) input { return input{kind: opGet, key: k} }
	list := input{kind: opList}
	ok := func(rv int64, v string) output { return output{kind: outOK, rv: rv, value: v} }
	listed := func(rv int64, items map[int]entry) output {
		o := output{kind: outOK, listRV: rv}
		for k, e := range items {
			e.exists = true
			o.items[k] = e
		}
		return o
	}
	var (
		notFound = output{kind: outNotFound}
		conflict = output{kind: outConflict}
		unknown  = output{kind: outUnknown}
		deleted  = output{kind: outOK}
	)
	for _, tc := range []struct {
		name string
		ops  []op
		want porcupine.CheckResult
	}{
		{name: "sequential writes and reads", want: porcupine.Ok, ops: []op{
			{0, 0, 1, create(0, "a"), ok(5, "a")},
			{1, 2, 3, get(0), ok(5, "a")},
			{0, 4, 5, update(0, "b", 5), ok(9, "b")},
			{1, 6, 7, list, listed(12, map[int]entry{0: {rv: 9, value: "b"}})},
			{1, 8, 9, update(0, "c", 5), conflict},
			{0, 10, 11, del(0, 9), deleted},
			{1, 12, 13, get(0), notFound},
		}},
		{name: "concurrent writes in either order", want: porcupine.Ok, ops: []op{
			{0, 0, 1, create(0, "a"), ok(5, "a")},
			{0, 2, 10, update(0, "b", 0), ok(8, "b")},
			{1, 3, 9, update(0, "c", 0), ok(7, "c")},
			{2, 11, 12, get(0), ok(8, "b")},
		}},
		{name: "stale read after a write returned", want: porcupine.Illegal, ops: []op{
			{0, 0, 1, create(0, "a"), ok(5, "a")},
			{0, 2, 3, update(0, "b", 5), ok(6, "b")},
			{1, 4, 5, get(0), ok(5, "a")},
		}},
		{name: "read misses a create that returned", want: porcupine.Illegal, ops: []op{
			{0, 0, 1, create(0, "a"), ok(5, "a")},
			{1, 2, 3, get(0), notFound},
		}},
		{name: "lost update: two writes succeed on one precondition", want: porcupine.Illegal, ops: []op{
			{0, 0, 1, create(0, "a"), ok(5, "a")},
			{0, 2, 5, update(0, "b", 5), ok(6, "b")},
			{1, 2, 5, update(0, "c", 5), ok(7, "c")},
		}},
		{name: "revision goes back", want: porcupine.Illegal, ops: []op{
			{0, 0, 1, create(0, "a"), ok(5, "a")},
			{1, 2, 3, create(1, "b"), ok(4, "b")},
		}},
		{name: "update with a stale precondition succeeds", want: porcupine.Illegal, ops: []op{
			{0, 0, 1, create(0, "a"), ok(5, "a")},
			{0, 2, 3, update(0, "b", 5), ok(6, "b")},
			{1, 4, 5, update(0, "c", 5), ok(7, "c")},
		}},
		{name: "list older than a write that returned", want: porcupine.Illegal, ops: []op{
			{0, 0, 1, create(0, "a"), ok(5, "a")},
			{1, 2, 3, list, listed(4, nil)},
		}},
		{name: "list misses a key", want: porcupine.Illegal, ops: []op{
			{0, 0, 1, create(0, "a"), ok(5, "a")},
			{0, 2, 3, create(1, "b"), ok(6, "b")},
			{1, 4, 5, list, listed(7, map[int]entry{1: {rv: 6, value: "b"}})},
		}},
		{name: "write with a lost answer seen later", want: porcupine.Ok, ops: []op{
			{0, 0, -1, create(0, "a"), unknown},
			{1, 2, 3, get(0), notFound},
			{1, 4, 5, get(0), ok(9, "a")},
			{1, 6, 7, update(0, "b", 9), ok(11, "b")},
		}},
		{name: "write with a lost answer cannot undo itself", want: porcupine.Illegal, ops: []op{
			{0, 0, -1, create(0, "a"), unknown},
			{1, 2, 3, get(0), ok(9, "a")},
			{1, 4, 5, get(0), notFound},
		}},
		{name: "write with a lost answer: the next write gets a later revision", want: porcupine.Illegal, ops: []op{
			{0, 0, -1, create(0, "a"), unknown},
			{1, 2, 3, get(0), ok(9, "a")},
			{1, 4, 5, create(1, "b"), ok(8, "b")},
		}},
		{name: "delete answers not found while the key exists", want: porcupine.Illegal, ops: []op{
			{0, 0, 1, create(0, "a"), ok(5, "a")},
			{1, 2, 3, del(0, 0), notFound},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var history []porcupine.Operation
			for _, o := range tc.ops {
				ret := o.ret
				if ret < 0 {
					ret = math.MaxInt64
				}
				history = append(history, porcupine.Operation{ClientId: o.client, Call: o.call, Return: ret, Input: o.in, Output: o.out})
			}
			if got := porcupine.CheckOperations(kvModel, history); got != (tc.want == porcupine.Ok) {
				t.Errorf("linearizable = %v, want %v", got, tc.want == porcupine.Ok)
			}
		})
	}
}

// TestWatchCheck shows that the watch check finds a missing, an extra, a
// reordered or a duplicated event.
func TestWatchCheck(t *testing.T) {
	ref := []event{
		{typ: watch.Added, name: "k0", rv: 5, value: "a"},
		{typ: watch.Modified, name: "k0", rv: 6, value: "b"},
		{typ: watch.Added, name: "k1", rv: 8, value: "c"},
		{typ: watch.Deleted, name: "k0", rv: 9},
	}
	plain := between(ref, 0, 100)
	for _, tc := range []struct {
		name    string
		got     []event
		from    int64
		wantErr string
	}{
		{name: "all", got: plain},
		{name: "from a resourceVersion", got: plain[2:], from: 6},
		{name: "missing", got: []event{plain[0], plain[2], plain[3]}, wantErr: "got ADDED k1@8, want MODIFIED k0@6"},
		{name: "missing at the end", got: plain[:3], wantErr: "missing DELETED k0@9"},
		{name: "extra", got: append(append([]event(nil), plain...), event{typ: watch.Added, name: "k2", rv: 10}), wantErr: "extra ADDED k2@10"},
		{name: "reordered", got: []event{plain[1], plain[0], plain[2], plain[3]}, wantErr: "event 0"},
		{name: "duplicated", got: []event{plain[0], plain[1], plain[1], plain[2], plain[3]}, wantErr: "event 2"},
		{name: "wrong type", got: []event{plain[0], {typ: watch.Added, name: "k0", rv: 6}, plain[2], plain[3]}, wantErr: "event 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := sameEvents(tc.got, between(ref, tc.from, 100))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one with %q", err, tc.wantErr)
			}
		})
	}
	// A bookmark promises every event up to it: a segment whose bookmark
	// went past a missing event fails.
	w := &watcher{id: 1, segments: []*segment{{start: 0, upTo: 9, events: plain[:3]}}}
	if errs := w.check(ref); len(errs) != 1 || !strings.Contains(errs[0].Error(), "missing DELETED k0@9") {
		t.Errorf("check of a segment whose bookmark passed a missing event: %v", errs)
	}
}

// TestResolveUnknown: writes whose answer was lost are settled from etcd's
// history, and left unknown only where it cannot tell.
func TestResolveUnknown(t *testing.T) {
	ref := []event{
		{typ: watch.Added, name: "k0", rv: 5, value: "a", seen: 20},
		{typ: watch.Modified, name: "k0", rv: 6, value: "b", seen: 21},
		{typ: watch.Deleted, name: "k0", rv: 7, prevRV: 6, seen: 22},
		{typ: watch.Added, name: "k1", rv: 8, value: "c", seen: 23},
		{typ: watch.Deleted, name: "k1", rv: 9, prevRV: 8, seen: 24},
	}
	unknown := output{kind: outUnknown}
	history := []porcupine.Operation{
		{ClientId: 0, Call: 1, Return: math.MaxInt64, Input: input{kind: opCreate, key: 0, value: "a"}, Output: unknown},
		{ClientId: 1, Call: 2, Return: math.MaxInt64, Input: input{kind: opUpdate, key: 0, value: "x"}, Output: unknown},
		{ClientId: 2, Call: 3, Return: math.MaxInt64, Input: input{kind: opDelete, key: 0, precondition: 6}, Output: unknown},
		{ClientId: 3, Call: 4, Return: math.MaxInt64, Input: input{kind: opDelete, key: 0, precondition: 5}, Output: unknown},
		{ClientId: 4, Call: 5, Return: math.MaxInt64, Input: input{kind: opDelete, key: 1, precondition: 8}, Output: unknown},
		{ClientId: 5, Call: 6, Return: math.MaxInt64, Input: input{kind: opDelete, key: 1, precondition: 8}, Output: unknown},
		{ClientId: 6, Call: 30, Return: math.MaxInt64, Input: input{kind: opUpdate, key: 1, value: "c"}, Output: unknown},
	}
	var n counters
	got := resolveUnknown(history, ref, &n)
	type summary struct {
		Client int
		Kind   outKind
		RV     int64
		Return int64
	}
	var sums []summary
	for _, op := range got {
		o := op.Output.(output)
		sums = append(sums, summary{op.ClientId, o.kind, o.rv, op.Return})
	}
	want := []summary{
		{0, outOK, 5, 20},                 // its value is in etcd: it happened at 5
		{2, outOK, 0, 22},                 // the delete of version 6 happened
		{4, outUnknown, 0, math.MaxInt64}, // two candidates for one delete
		{5, outUnknown, 0, math.MaxInt64},
	}
	// Dropped: client 1 (its value never reached etcd), client 3 (no delete
	// of version 5), client 6 (etcd saw its value before it was sent).
	if diff := cmp.Diff(want, sums); diff != "" {
		t.Errorf("resolved history (-want +got):\n%s", diff)
	}
	if n.resolved.Load() != 2 || n.dropped.Load() != 3 {
		t.Errorf("resolved %d, dropped %d; want 2 and 3", n.resolved.Load(), n.dropped.Load())
	}
}
