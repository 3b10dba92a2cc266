package daemonset

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// expectationsTimeout is how long unmet expectations block a sync before
// they are taken as lost (a watch event that never came), as upstream.
const expectationsTimeout = 5 * time.Minute

// expectations count, per DaemonSet key, the pod creations and deletions
// asked for and not yet seen through the informer. While some are
// outstanding the DaemonSet's pods are not managed, so a slow watch never
// makes the controller create a second pod on a node.
type expectations struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	m     map[string]*expectation
}

type expectation struct {
	adds, dels int
	at         time.Time
}

func newExpectations(c clock.PassiveClock) *expectations {
	return &expectations{clock: c, m: map[string]*expectation{}}
}

func (e *expectations) satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.m[key]
	return !ok || (x.adds <= 0 && x.dels <= 0) || e.clock.Since(x.at) > expectationsTimeout
}

func (e *expectations) set(key string, adds, dels int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[key] = &expectation{adds: adds, dels: dels, at: e.clock.Now()}
}

func (e *expectations) lower(key string, adds, dels int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.m[key]; ok {
		x.adds -= adds
		x.dels -= dels
	}
}

func (e *expectations) creationObserved(key string) { e.lower(key, 1, 0) }
func (e *expectations) deletionObserved(key string) { e.lower(key, 0, 1) }

func (e *expectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
