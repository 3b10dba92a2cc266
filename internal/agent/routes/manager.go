package routes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/proxy/nft"
)

// Defaults.
var (
	DefaultClusterCIDR  = netip.MustParsePrefix("10.42.0.0/16")
	DefaultResyncPeriod = 30 * time.Second
)

// Options tune a Manager; the zero value means the defaults.
type Options struct {
	// ClusterCIDR is the whole pod network (default 10.42.0.0/16).
	ClusterCIDR netip.Prefix
	// ResyncPeriod: the kernel is checked this often without a change
	// (default 30 s), so a route someone removed comes back.
	ResyncPeriod time.Duration
	// Kernel programs routes and rules (default: netlink and nft in the
	// process's network namespace).
	Kernel Kernel
	Clock  clock.WithTicker
}

// Kernel is what the Manager needs from the host's network stack.
type Kernel interface {
	// Routes lists the routes of this package (protocol Protocol).
	Routes() ([]Route, error)
	Replace(Route) error
	Delete(Route) error
	// Resolve says how the kernel reaches addr.
	Resolve(addr netip.Addr) (Nexthop, error)
	// ApplyNFT runs an nft script as one transaction.
	ApplyNFT(ctx context.Context, script string) error
}

// Manager keeps this node's routes to the other nodes' pods and the
// masquerade rule in place.
type Manager struct {
	client kubernetes.Interface
	self   string
	opts   Options
	ready  chan struct{}
	kick   chan struct{}
}

// New returns a Manager for node self; it does nothing until Start.
func New(client kubernetes.Interface, self string, opts Options) *Manager {
	if !opts.ClusterCIDR.IsValid() {
		opts.ClusterCIDR = DefaultClusterCIDR
	}
	if opts.ResyncPeriod <= 0 {
		opts.ResyncPeriod = DefaultResyncPeriod
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Manager{client: client, self: self, opts: opts, ready: make(chan struct{}), kick: make(chan struct{}, 1)}
}

// Ready closes after the first sync that programmed the masquerade rule
// and the routes to the nodes known then.
func (m *Manager) Ready() <-chan struct{} { return m.ready }

// Start watches Nodes and syncs until ctx ends. Routes and the rule stay
// when it returns, so pods keep their paths across an agent restart.
func (m *Manager) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("routes")
	ctx = klog.NewContext(ctx, logger)
	if m.opts.Kernel == nil {
		k, err := NewNetlinkKernel()
		if err != nil {
			return fmt.Errorf("routes: %w", err)
		}
		defer k.Close()
		m.opts.Kernel = k
	}
	factory := informers.NewSharedInformerFactory(m.client, 0)
	informer := factory.Core().V1().Nodes()
	lister := informer.Lister()
	_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { m.trigger() },
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*corev1.Node), newObj.(*corev1.Node)
			if !slices2Equal(podCIDRs(o), podCIDRs(n)) || !addressesEqual(o, n) {
				m.trigger()
			}
		},
		DeleteFunc: func(any) { m.trigger() },
	})
	if err != nil {
		return fmt.Errorf("routes: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		return nil
	}
	ticker := m.opts.Clock.NewTicker(m.opts.ResyncPeriod)
	defer ticker.Stop()
	full := true
	retry := time.Second
	for {
		nodes, err := lister.List(labels.Everything())
		if err == nil {
			err = m.sync(ctx, nodes, full)
		}
		var wait <-chan time.Time
		if err != nil {
			logger.Error(err, "Pod routes sync failed; retrying", "after", retry)
			wait = m.opts.Clock.After(retry)
			retry = min(2*retry, m.opts.ResyncPeriod)
		} else {
			retry = time.Second
			select {
			case <-m.ready:
			default:
				logger.Info("Pod routes ready", "nodes", len(nodes), "clusterCIDR", m.opts.ClusterCIDR)
				close(m.ready)
			}
		}
		full = err != nil
		select {
		case <-ctx.Done():
			return nil
		case <-m.kick:
		case <-ticker.C():
			full = true
		case <-wait:
		}
	}
}

func (m *Manager) trigger() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// sync programs the routes for nodes; full also rewrites the masquerade
// table.
func (m *Manager) sync(ctx context.Context, nodes []*corev1.Node, full bool) error {
	logger := klog.FromContext(ctx)
	k := m.opts.Kernel
	if full {
		if err := k.ApplyNFT(ctx, MasqueradeRules(m.opts.ClusterCIDR)); err != nil {
			return fmt.Errorf("masquerade rule: %w", err)
		}
	}
	existing, err := k.Routes()
	if err != nil {
		return fmt.Errorf("list routes: %w", err)
	}
	replace, del, skipped := Plan(Compute(m.self, nodes), existing, k.Resolve)
	for _, err := range skipped {
		logger.V(2).Info("No pod route", "reason", err.Error())
	}
	var errs []error
	for _, r := range del {
		if err := k.Delete(r); err != nil {
			errs = append(errs, fmt.Errorf("delete route %s: %w", r, err))
			continue
		}
		logger.Info("Removed pod route", "route", r.String())
	}
	for _, r := range replace {
		if err := k.Replace(r); err != nil {
			errs = append(errs, fmt.Errorf("route %s: %w", r, err))
			continue
		}
		logger.Info("Programmed pod route", "route", r.String())
	}
	return errors.Join(errs...)
}

func slices2Equal(a, b []netip.Prefix) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func addressesEqual(a, b *corev1.Node) bool {
	ia, oka := internalIPv4(a)
	ib, okb := internalIPv4(b)
	return oka == okb && ia == ib
}

// NetlinkKernel programs the network namespace it was made in.
type NetlinkKernel struct {
	h   *netlink.Handle
	nft nft.Runner
}

var _ Kernel = (*NetlinkKernel)(nil)

// NewNetlinkKernel works on the calling process's network namespace.
func NewNetlinkKernel() (*NetlinkKernel, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	return &NetlinkKernel{h: h, nft: nft.NFT{}}, nil
}

// NewNetlinkKernelWith uses the given handle and nft runner (tests: a
// handle into a test namespace and `ip netns exec NAME nft`).
func NewNetlinkKernelWith(h *netlink.Handle, runner nft.Runner) *NetlinkKernel {
	return &NetlinkKernel{h: h, nft: runner}
}

// Close releases the netlink handle.
func (k *NetlinkKernel) Close() { k.h.Close() }

// Routes lists the main table's IPv4 routes with protocol Protocol.
func (k *NetlinkKernel) Routes() ([]Route, error) {
	rs, err := k.h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: Protocol, Table: unix.RT_TABLE_MAIN},
		netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, err
	}
	var out []Route
	for _, r := range rs {
		if r.Dst == nil {
			continue
		}
		dst, ok := prefixOf(r.Dst)
		if !ok {
			continue
		}
		gw, _ := netip.AddrFromSlice(r.Gw.To4())
		out = append(out, Route{Dst: dst, Gateway: gw, LinkIndex: r.LinkIndex})
	}
	return out, nil
}

func (k *NetlinkKernel) route(r Route) *netlink.Route {
	return &netlink.Route{
		Dst:       &net.IPNet{IP: r.Dst.Addr().AsSlice(), Mask: net.CIDRMask(r.Dst.Bits(), 32)},
		Gw:        r.Gateway.AsSlice(),
		LinkIndex: r.LinkIndex,
		Protocol:  Protocol,
		Table:     unix.RT_TABLE_MAIN,
		Scope:     netlink.SCOPE_UNIVERSE,
	}
}

// Replace adds the route or changes the one to its destination.
func (k *NetlinkKernel) Replace(r Route) error { return k.h.RouteReplace(k.route(r)) }

// Delete removes the route.
func (k *NetlinkKernel) Delete(r Route) error {
	err := k.h.RouteDel(k.route(r))
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// Resolve asks the kernel for its route to addr.
func (k *NetlinkKernel) Resolve(addr netip.Addr) (Nexthop, error) {
	rs, err := k.h.RouteGet(addr.AsSlice())
	if err != nil {
		return Nexthop{}, err
	}
	if len(rs) == 0 {
		return Nexthop{}, errors.New("no route")
	}
	r := rs[0]
	if r.Type == unix.RTN_LOCAL {
		return Nexthop{Local: true}, nil
	}
	hop := Nexthop{LinkIndex: r.LinkIndex}
	if gw, ok := netip.AddrFromSlice(r.Gw.To4()); ok && r.Gw != nil {
		hop.Gateway = gw
	}
	return hop, nil
}

// ApplyNFT runs the script with nft.
func (k *NetlinkKernel) ApplyNFT(ctx context.Context, script string) error {
	return k.nft.Apply(ctx, script)
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	ip, ok := netip.AddrFromSlice(n.IP.To4())
	if !ok {
		return netip.Prefix{}, false
	}
	ones, bits := n.Mask.Size()
	if bits != 32 {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(ip, ones), true
}
