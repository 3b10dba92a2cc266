package job

import (
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
)

// expectationsTimeout is how long unmet expectations hold back a sync
// before they are considered lost, as upstream.
const expectationsTimeout = 5 * time.Minute

// expectations count, per Job key, the pod creations and deletions the
// controller asked for and has not yet seen through its informer. A Job
// with unmet expectations is not managed (no creations or deletions), so a
// slow watch never makes it create pods twice.
type expectations struct {
	clock clock.PassiveClock

	mu      sync.Mutex
	records map[string]*expectation
}

type expectation struct {
	adds, dels int64
	at         time.Time
}

func newExpectations(c clock.PassiveClock) *expectations {
	return &expectations{clock: c, records: map[string]*expectation{}}
}

func (e *expectations) satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.records[key]
	if !ok || (r.adds <= 0 && r.dels <= 0) {
		return true
	}
	return e.clock.Since(r.at) > expectationsTimeout
}

func (e *expectations) expect(key string, adds, dels int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.records[key] = &expectation{adds: int64(adds), dels: int64(dels), at: e.clock.Now()}
}

func (e *expectations) creationObserved(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.records[key]; ok {
		r.adds--
	}
}

func (e *expectations) deletionObserved(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.records[key]; ok {
		r.dels--
	}
}

func (e *expectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.records, key)
}

// finalizerExpectations remember, per Job key, the pods whose tracking
// finalizer the controller removed and has not yet seen removed through
// its informer: such a pod was counted already and must not be counted
// again from a stale cache.
type finalizerExpectations struct {
	mu   sync.Mutex
	uids map[string]sets.Set[types.UID]
}

func newFinalizerExpectations() *finalizerExpectations {
	return &finalizerExpectations{uids: map[string]sets.Set[types.UID]{}}
}

func (f *finalizerExpectations) expected(key string) sets.Set[types.UID] {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.uids[key].Clone()
}

func (f *finalizerExpectations) expectRemoved(key string, uids ...types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.uids[key] == nil {
		f.uids[key] = sets.New[types.UID]()
	}
	f.uids[key].Insert(uids...)
}

func (f *finalizerExpectations) observed(key string, uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.uids[key]; s != nil {
		s.Delete(uid)
	}
}

func (f *finalizerExpectations) forget(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.uids, key)
}

func hasTrackingFinalizer(p *corev1.Pod) bool {
	return slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer)
}

// removeFinalizerPatch is the strategic merge patch that drops the tracking
// finalizer, or nil when the pod has none.
func removeFinalizerPatch(p *corev1.Pod) []byte {
	if !hasTrackingFinalizer(p) {
		return nil
	}
	return []byte(`{"metadata":{"$deleteFromPrimitiveList/finalizers":["` + batchv1.JobTrackingFinalizer + `"]}}`)
}
