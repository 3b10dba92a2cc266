package replicaset

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// ExpectationsTimeout is how long unmet expectations block a sync before
// they are considered lost (a watch event that never came), as upstream.
const ExpectationsTimeout = 5 * time.Minute

// Expectations remember, per controller key, how many pod creations and
// which pod deletions the controller has asked for and not yet seen through
// its informer. A key with unmet expectations is not re-synced for
// replicas, so a slow watch never causes a second round of creations.
type Expectations struct {
	clock clock.PassiveClock

	mu      sync.Mutex
	records map[string]*expectation
}

type expectation struct {
	adds      int64
	deletes   map[string]bool // pod keys whose deletion is expected
	timestamp time.Time
}

// NewExpectations returns empty expectations.
func NewExpectations(c clock.PassiveClock) *Expectations {
	return &Expectations{clock: c, records: map[string]*expectation{}}
}

// Satisfied reports whether key may be synced: it has no record, every
// expectation was observed, or the record expired.
func (e *Expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.records[key]
	if !ok {
		return true
	}
	if r.adds <= 0 && len(r.deletes) == 0 {
		return true
	}
	return e.clock.Since(r.timestamp) > ExpectationsTimeout
}

// ExpectCreations records that n pods are about to be created for key.
func (e *Expectations) ExpectCreations(key string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.records[key] = &expectation{adds: int64(n), deletes: map[string]bool{}, timestamp: e.clock.Now()}
}

// ExpectDeletions records that the pods podKeys are about to be deleted.
func (e *Expectations) ExpectDeletions(key string, podKeys []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := &expectation{deletes: map[string]bool{}, timestamp: e.clock.Now()}
	for _, k := range podKeys {
		r.deletes[k] = true
	}
	e.records[key] = r
}

// CreationObserved lowers the expected creations of key by one.
func (e *Expectations) CreationObserved(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.records[key]; ok && r.adds > 0 {
		r.adds--
	}
}

// DeletionObserved records that the pod podKey of key is gone (or going);
// observing the same pod twice counts once.
func (e *Expectations) DeletionObserved(key, podKey string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.records[key]; ok {
		delete(r.deletes, podKey)
	}
}

// Delete forgets key (its controller object is gone).
func (e *Expectations) Delete(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.records, key)
}

// Pending returns the creations and deletions still expected for key.
func (e *Expectations) Pending(key string) (adds int64, deletes int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.records[key]; ok {
		return r.adds, len(r.deletes)
	}
	return 0, 0
}
