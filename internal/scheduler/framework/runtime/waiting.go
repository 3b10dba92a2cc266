package runtime

import (
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// waitingPods holds the pods waiting at Permit.
type waitingPods struct {
	mu   sync.RWMutex
	pods map[types.UID]*waitingPod
}

func (w *waitingPods) add(p *waitingPod) {
	w.mu.Lock()
	w.pods[p.pod.UID] = p
	w.mu.Unlock()
}

func (w *waitingPods) remove(uid types.UID) {
	w.mu.Lock()
	delete(w.pods, uid)
	w.mu.Unlock()
}

func (w *waitingPods) get(uid types.UID) *waitingPod {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.pods[uid]
}

func (w *waitingPods) each(fn func(framework.WaitingPod)) {
	w.mu.RLock()
	list := make([]*waitingPod, 0, len(w.pods))
	for _, p := range w.pods {
		list = append(list, p)
	}
	w.mu.RUnlock()
	for _, p := range list {
		fn(p)
	}
}

// waitingPod is a pod held by one or more Permit plugins, each with its
// own timeout.
type waitingPod struct {
	pod    *v1.Pod
	mu     sync.Mutex
	timers map[string]clock.Timer
	done   chan *framework.Status // buffered, receives exactly one result
	sent   bool
}

var _ framework.WaitingPod = (*waitingPod)(nil)

func newWaitingPod(clk clock.WithDelayedExecution, pod *v1.Pod, timeouts map[string]time.Duration) *waitingPod {
	wp := &waitingPod{pod: pod, timers: map[string]clock.Timer{}, done: make(chan *framework.Status, 1)}
	wp.mu.Lock()
	defer wp.mu.Unlock()
	for name, d := range timeouts {
		wp.timers[name] = clk.AfterFunc(d, func() {
			// Not inline: a fake clock runs this under its own lock, which
			// Reject's Stop of the other timers would take again.
			go wp.Reject(name, fmt.Sprintf("rejected due to timeout after waiting %v at plugin %v", d, name))
		})
	}
	return wp
}

func (w *waitingPod) GetPod() *v1.Pod { return w.pod }

func (w *waitingPod) GetPendingPlugins() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.timers))
	for n := range w.timers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (w *waitingPod) Allow(pluginName string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.timers[pluginName]; ok {
		t.Stop()
		delete(w.timers, pluginName)
	}
	if len(w.timers) == 0 {
		w.send(nil)
	}
}

func (w *waitingPod) Reject(pluginName, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.timers {
		t.Stop()
	}
	w.send(framework.NewStatus(framework.Unschedulable, msg).WithPlugin(pluginName))
}

// send must hold mu.
func (w *waitingPod) send(s *framework.Status) {
	if w.sent {
		return
	}
	w.sent = true
	w.done <- s
}
