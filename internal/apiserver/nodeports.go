package apiserver

import (
	"context"
	"errors"
	"math/big"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/apiserver/allocator"
	"github.com/skiff-sh/skiff/internal/storage"
)

// nodePortsKey is where upstream's kube-apiserver keeps the NodePort
// range's bitmap, a core/v1 RangeAllocation: the range ("30000-32767")
// and the bitmap as a big-endian integer whose bit i is port base+i.
const nodePortsKey = "/registry/services/nodeports"

// portClaimer is allocator.PortClaimer on that RangeAllocation, changed by
// compare-and-swap (GuaranteedUpdate), so every API server sharing the
// store sees every other's NodePorts, as upstream's etcd-backed port
// allocator.
type portClaimer struct {
	store *storage.Store
	ports *allocator.Ports

	// leaks is when the repair first saw each held port that no Service
	// holds.
	mu    sync.Mutex
	leaks map[int]time.Time
}

var _ allocator.PortClaimer = (*portClaimer)(nil)

func newPortClaimer(s *Server, ports *allocator.Ports) *portClaimer {
	gvk := corev1.SchemeGroupVersion.WithKind("RangeAllocation")
	store := storage.NewStore(s.cfg.Etcd, storage.ProtobufCodec{GVK: gvk}, func() runtime.Object { return &corev1.RangeAllocation{} },
		"rangeallocations", storage.StoreOptions{Observer: s.metrics, CallTimeout: s.cfg.EtcdCallTimeout})
	return &portClaimer{store: store, ports: ports, leaks: map[int]time.Time{}}
}

var errNoChange = errors.New("no change")

// update applies change to the stored bitmap (created empty when absent)
// and writes it if change reports a change.
func (c *portClaimer) update(ctx context.Context, change func(bits *big.Int) (bool, error)) error {
	for {
		err := c.store.GuaranteedUpdate(ctx, nodePortsKey, &corev1.RangeAllocation{}, nil, func(cur runtime.Object) (runtime.Object, error) {
			ra := cur.(*corev1.RangeAllocation)
			if ra.Range != c.ports.Range() {
				// Another range (--service-node-port-range changed): start
				// over; the repair marks what Services hold.
				ra.Range, ra.Data = c.ports.Range(), nil
			}
			bits := new(big.Int).SetBytes(ra.Data)
			changed, err := change(bits)
			if err != nil {
				return nil, err
			}
			if !changed {
				return nil, errNoChange
			}
			ra.Data = bits.Bytes()
			return ra, nil
		})
		if !storage.IsNotFound(err) {
			if errors.Is(err, errNoChange) {
				return nil
			}
			return err
		}
		// No bitmap yet: create an empty one, then change it.
		err = c.store.Create(ctx, nodePortsKey, &corev1.RangeAllocation{Range: c.ports.Range()}, &corev1.RangeAllocation{})
		if err != nil && !storage.IsExists(err) {
			return err
		}
	}
}

func (c *portClaimer) offset(port int) (int, bool) {
	lo, size := c.ports.Base(), c.ports.Size()
	return port - lo, port >= lo && port < lo+size
}

// ClaimPort sets port's bit; ErrPortAllocated when it is set.
func (c *portClaimer) ClaimPort(ctx context.Context, port int) error {
	i, ok := c.offset(port)
	if !ok {
		return nil
	}
	return c.update(ctx, func(bits *big.Int) (bool, error) {
		if bits.Bit(i) == 1 {
			return false, allocator.ErrPortAllocated
		}
		bits.SetBit(bits, i, 1)
		return true, nil
	})
}

// ReleasePort clears port's bit.
func (c *portClaimer) ReleasePort(ctx context.Context, port int) {
	i, ok := c.offset(port)
	if !ok {
		return
	}
	err := c.update(ctx, func(bits *big.Int) (bool, error) {
		if bits.Bit(i) == 0 {
			return false, nil
		}
		bits.SetBit(bits, i, 0)
		return true, nil
	})
	if err != nil {
		klog.FromContext(ctx).V(2).Info("release node port", "port", port, "err", err)
	}
}

// MarkPorts sets the bits of ports.
func (c *portClaimer) MarkPorts(ctx context.Context, ports []int) error {
	return c.update(ctx, func(bits *big.Int) (bool, error) {
		changed := false
		for _, p := range ports {
			if i, ok := c.offset(p); ok && bits.Bit(i) == 0 {
				bits.SetBit(bits, i, 1)
				changed = true
			}
		}
		return changed, nil
	})
}

// ClaimedPorts reads the bitmap from etcd.
func (c *portClaimer) ClaimedPorts(ctx context.Context) map[int]bool {
	ra := &corev1.RangeAllocation{}
	err := c.store.Get(ctx, nodePortsKey, ra)
	out := map[int]bool{}
	switch {
	case storage.IsNotFound(err):
		return out
	case err != nil:
		klog.FromContext(ctx).V(2).Info("read the node port range", "err", err)
		return nil
	case ra.Range != c.ports.Range():
		return out
	}
	bits := new(big.Int).SetBytes(ra.Data)
	for i := 0; i < bits.BitLen(); i++ {
		if bits.Bit(i) == 1 {
			out[c.ports.Base()+i] = true
		}
	}
	return out
}

// repair is upstream's node port repair, run with the ClusterIP repair:
// a Service's NodePort not marked is marked; a marked port that no Service
// holds for longer than grace (a write that failed after its claim, a
// crash between the two) is cleared.
func (c *portClaimer) repair(ctx context.Context, svcs []*corev1.Service, now time.Time, grace time.Duration) {
	used := map[int]bool{}
	var mark []int
	for _, svc := range svcs {
		for _, p := range allocator.ClaimsOf(svc).Ports {
			used[p] = true
			mark = append(mark, p)
		}
	}
	claimed := c.ClaimedPorts(ctx)
	if claimed == nil {
		return
	}
	logger := klog.FromContext(ctx)
	var missing []int
	for _, p := range mark {
		if !claimed[p] {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		if err := c.MarkPorts(ctx, missing); err == nil {
			logger.Info("NodePorts were not allocated: repaired", "ports", missing)
		}
	}
	c.mu.Lock()
	var leaked []int
	for p := range claimed {
		if used[p] {
			delete(c.leaks, p)
			continue
		}
		first, seen := c.leaks[p]
		if !seen {
			c.leaks[p] = now
			continue
		}
		if now.Sub(first) >= grace {
			leaked = append(leaked, p)
			delete(c.leaks, p)
		}
	}
	for p := range c.leaks {
		if !claimed[p] {
			delete(c.leaks, p)
		}
	}
	c.mu.Unlock()
	for _, p := range leaked {
		c.ReleasePort(ctx, p)
		c.ports.Release(p)
		logger.Info("NodePort appears to have leaked: cleaning up", "port", p)
	}
}
