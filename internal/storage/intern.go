package storage

import (
	"bytes"
	"hash/maphash"
	goruntime "runtime"
	"sync"
	"unsafe"
	"weak"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// The managed fields of cached objects, shared.
//
// Every object the watch cache holds carries its managedFields, and each
// entry's fieldset (FieldsV1, the serialized set of the fields a manager
// owns) is a fresh byte slice after decoding: about 1.5 KB a pod, 230 MB
// of 2.7 GB of live heap with 150,000 pods (bench/README.md). Pods made
// from one template, and their status written by one kubelet, own the
// same fields, so those bytes repeat from object to object. The cache
// keeps one copy of each distinct fieldset while any object refers to it.
//
// Sharing is safe because nothing writes into a FieldsV1's bytes: the
// field manager decodes a fieldset into a set and encodes a new slice, and
// DeepCopy copies them; the shared slices have no spare capacity, so an
// append makes a copy.

// fieldsets is the process's table of the fieldsets cached objects hold.
var fieldsets = newInterner()

// internManagedFields makes obj's managedFields fieldsets the shared
// copies of their bytes.
func internManagedFields(obj runtime.Object) {
	a, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	mf := a.GetManagedFields() // obj's own slice: its elements are written in place
	for i := range mf {
		if f := mf[i].FieldsV1; f != nil && len(f.Raw) > 0 {
			f.Raw = fieldsets.intern(f.Raw)
		}
	}
}

// interner keeps one copy of each distinct byte string while something
// refers to it. It holds the copies weakly: a copy no object refers to any
// more is collected, and its entry removed.
type interner struct {
	seed maphash.Seed

	mu sync.Mutex
	m  map[uint64]internEntry
}

type internEntry struct {
	first weak.Pointer[byte] // the copy's first byte
	n     int
}

func newInterner() *interner {
	return &interner{seed: maphash.MakeSeed(), m: map[uint64]internEntry{}}
}

// intern returns the table's copy of b if it has one, else b, which becomes
// the copy. b must not be written afterwards.
func (t *interner) intern(b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	h := maphash.Bytes(t.seed, b)
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.m[h]; ok {
		if p := e.first.Value(); p != nil {
			if shared := unsafe.Slice(p, e.n); bytes.Equal(shared, b) {
				return shared[:e.n:e.n]
			}
			return b // another string with this hash: b stays unshared
		}
	}
	b = b[:len(b):len(b)]
	t.m[h] = internEntry{first: weak.Make(&b[0]), n: len(b)}
	goruntime.AddCleanup(&b[0], t.forget, h)
	return b
}

// forget removes h's entry once its copy has been collected (a later copy
// may have taken the entry since).
func (t *interner) forget(h uint64) {
	t.mu.Lock()
	if e, ok := t.m[h]; ok && e.first.Value() == nil {
		delete(t.m, h)
	}
	t.mu.Unlock()
}

// size is the number of copies the table holds.
func (t *interner) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
