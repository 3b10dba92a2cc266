package robustness

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// numKeys is how many ConfigMaps the clients fight over: few, so that
// writes conflict often.
const numKeys = 4

// opKind is what a client asked for.
type opKind int

const (
	opCreate opKind = iota
	opUpdate
	opDelete
	opGet
	opList
)

func (k opKind) String() string {
	return [...]string{"create", "update", "delete", "get", "list"}[k]
}

// input is one request: key is an index below numKeys; precondition is
// the resourceVersion an update or a delete requires (0: none, an
// unconditional write).
type input struct {
	kind         opKind
	key          int
	value        string
	precondition int64
}

// outKind is how the server answered.
type outKind int

const (
	outOK outKind = iota
	outNotFound
	outConflict // 409: AlreadyExists for a create, Conflict otherwise
	// outUnknown: the request failed without an answer (the connection
	// broke); it may or may not have taken effect. Its return time is
	// infinite.
	outUnknown
)

// output is the answer: rv and value of the object written or read; for a
// list, items and the list's resourceVersion.
type output struct {
	kind   outKind
	rv     int64
	value  string
	items  [numKeys]entry
	listRV int64
}

// entry is one key's state. rv -1 is a write whose answer was lost: any
// resourceVersion of at least minRV matches it until a read pins it.
type entry struct {
	exists bool
	rv     int64
	minRV  int64
	value  string
}

// state is the store the history must be explainable by: the keys and
// the least resourceVersion the next write may get (etcd's revision only
// grows, and every write takes a new one).
type state struct {
	keys    [numKeys]entry
	minNext int64
}

// rvMatches says whether resourceVersion rv can be e's.
func (e entry) rvMatches(rv int64) bool {
	if e.rv == -1 {
		return rv >= e.minRV
	}
	return e.rv == rv
}

// pin fixes an unknown resourceVersion once a read has seen it: it is
// e's, and every later write gets a greater one.
func (s state) pin(key int, rv int64) state {
	s.keys[key].rv, s.keys[key].minRV = rv, 0
	s.minNext = max(s.minNext, rv+1)
	return s
}

// preconditionHolds says whether a write with precondition pre may apply
// to e.
func (e entry) preconditionHolds(pre int64) bool {
	return e.exists && (pre == 0 || e.rvMatches(pre))
}

// preconditionFails says whether a write with precondition pre may be
// refused with 409 by e.
func (e entry) preconditionFails(pre int64) bool {
	return e.exists && pre != 0 && (e.rv == -1 || e.rv != pre)
}

// step is the key-value store with resourceVersions, applied to one state;
// nil means the answer is impossible from s.
func step(s state, in input, out output) []state {
	e := s.keys[in.key]
	applied := func(v entry, rv int64) state {
		n := s
		n.keys[in.key] = v
		if rv > 0 {
			n.minNext = rv + 1
		} else {
			n.minNext++ // a write whose revision the client does not see
		}
		return n
	}
	// unknownWrite is a write whose answer was lost: it happened (with a
	// revision nobody saw yet) or it did not.
	unknownWrite := func(v entry) []state {
		if v.exists {
			v.rv, v.minRV = -1, s.minNext
		}
		return []state{s, applied(v, 0)}
	}
	switch in.kind {
	case opCreate:
		switch out.kind {
		case outOK:
			if !e.exists && out.rv >= s.minNext && out.value == in.value {
				return []state{applied(entry{exists: true, rv: out.rv, value: in.value}, out.rv)}
			}
		case outConflict:
			if e.exists {
				return []state{s}
			}
		case outUnknown:
			if e.exists {
				return []state{s}
			}
			return unknownWrite(entry{exists: true, value: in.value})
		}
	case opUpdate:
		switch out.kind {
		case outOK:
			if e.preconditionHolds(in.precondition) && out.rv >= s.minNext && out.value == in.value {
				return []state{applied(entry{exists: true, rv: out.rv, value: in.value}, out.rv)}
			}
		case outNotFound:
			if !e.exists {
				return []state{s}
			}
		case outConflict:
			if e.preconditionFails(in.precondition) {
				return []state{s}
			}
		case outUnknown:
			if !e.preconditionHolds(in.precondition) {
				return []state{s}
			}
			return unknownWrite(entry{exists: true, value: in.value})
		}
	case opDelete:
		switch out.kind {
		case outOK:
			if e.preconditionHolds(in.precondition) {
				return []state{applied(entry{}, 0)}
			}
		case outNotFound:
			if !e.exists {
				return []state{s}
			}
		case outConflict:
			if e.preconditionFails(in.precondition) {
				return []state{s}
			}
		case outUnknown:
			if !e.preconditionHolds(in.precondition) {
				return []state{s}
			}
			return unknownWrite(entry{})
		}
	case opGet:
		switch out.kind {
		case outOK:
			if e.exists && e.rvMatches(out.rv) && e.value == out.value {
				return []state{s.pin(in.key, out.rv)}
			}
		case outNotFound:
			if !e.exists {
				return []state{s}
			}
		}
	case opList:
		if out.kind != outOK || out.listRV < s.minNext-1 {
			return nil
		}
		n := s
		for i, got := range out.items {
			want := s.keys[i]
			if got.exists != want.exists {
				return nil
			}
			if !got.exists {
				continue
			}
			if !want.rvMatches(got.rv) || want.value != got.value || got.rv > out.listRV {
				return nil
			}
			n = n.pin(i, got.rv)
		}
		// Every later write gets a revision above the list's.
		if out.listRV+1 > n.minNext {
			n.minNext = out.listRV + 1
		}
		return []state{n}
	}
	return nil
}

// kvModel is the porcupine model of the ConfigMap store.
var kvModel = (&porcupine.NondeterministicModel{
	Init: func() []interface{} { return []interface{}{state{minNext: 1}} },
	Step: func(st, in, out interface{}) []interface{} {
		var next []interface{}
		for _, n := range step(st.(state), in.(input), out.(output)) {
			next = append(next, n)
		}
		return next
	},
	Equal: func(a, b interface{}) bool { return a.(state) == b.(state) },
	DescribeOperation: func(in, out interface{}) string {
		i, o := in.(input), out.(output)
		return fmt.Sprintf("%s(k%d, %q, pre=%d) -> %d rv=%d %q list=%v@%d", i.kind, i.key, i.value, i.precondition, o.kind, o.rv, o.value, o.items, o.listRV)
	},
	DescribeState: func(st interface{}) string { return fmt.Sprintf("%+v", st.(state)) },
}).ToModel()
