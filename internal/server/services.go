package server

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/apiserver/authz/bootstrappolicy"
	"github.com/skiff-sh/skiff/internal/dns"
	"github.com/skiff-sh/skiff/internal/pki"
	"github.com/skiff-sh/skiff/internal/proxy/lb"
	"github.com/skiff-sh/skiff/internal/server/lifecycle"
)

// ServicesConfig is what `skiff server` runs for Services besides the
// controllers: cluster DNS and the load-balancer address allocator.
type ServicesConfig struct {
	// DisableDNS turns cluster DNS off.
	DisableDNS bool
	// DNSPort and DNSMetricsPort are where cluster DNS listens on the
	// node's advertise address (defaults 53 and 9153); kube-system/kube-dns
	// (10.43.0.10) points there.
	DNSPort, DNSMetricsPort int
	// LBRange is the pool of load-balancer addresses (a CIDR, first-last,
	// or one address; or an IPv4 and an IPv6 one separated by a comma);
	// empty means the node's advertise address, shared
	// by Services whose ports do not clash (as k3s's servicelb does).
	LBRange string
}

// serviceIdentities gives cluster DNS and the load-balancer allocator
// their own client identities (identities.go; roles in
// bootstrappolicy/services.go).
func serviceIdentities(bundle *pki.Bundle, server string) func(name, user string) (*rest.Config, error) {
	return func(name, user string) (*rest.Config, error) {
		return identityConfig(bundle, server, name, user, nil)
	}
}

// readyzAdder is the API server's AddReadyzCheck.
type readyzAdder interface {
	AddReadyzCheck(name string, check func(context.Context) error)
}

// launchServices starts cluster DNS and the load-balancer allocator, once
// the API server is ready, each under its own identity (system:skiff:cluster-dns,
// system:skiff:service-lb). advertise is the node address pods reach the
// host at ("" when the host has none: DNS is then not started). DNS that
// cannot listen (port 53 taken, e.g. by another local server) is logged
// and left out rather than failing the control plane. DNS serves its
// coredns_* metrics on its own port, as CoreDNS does; once it serves, the
// API server's /readyz gets check "cluster-dns" (a query answered).
func launchServices(ctx context.Context, sc ServicesConfig, identity func(name, user string) (*rest.Config, error), api readyzAdder, advertise string, timeout time.Duration) ([]*lifecycle.Handle, error) {
	logger := klog.FromContext(ctx)
	clientFor := func(name, user string) (kubernetes.Interface, error) {
		rc, err := identity(name, user)
		if err != nil {
			return nil, fmt.Errorf("%s identity: %w", name, err)
		}
		rc = rest.CopyConfig(rc)
		rc.UserAgent = "skiff-server/" + name
		return kubernetes.NewForConfig(rc)
	}
	var handles []*lifecycle.Handle

	lbRange := sc.LBRange
	if lbRange == "" {
		lbRange = advertise
	}
	if lbRange != "" {
		pools, err := lb.ParseRanges(lbRange)
		if err != nil {
			return nil, err
		}
		client, err := clientFor("service-lb", bootstrappolicy.ServiceLBUser)
		if err != nil {
			return nil, err
		}
		h, err := lifecycle.Launch(ctx, "service-lb", lb.New(client, pools...), timeout)
		if err != nil {
			return nil, err
		}
		handles = append(handles, h)
	}

	if sc.DisableDNS || advertise == "" {
		logger.Info("Cluster DNS not started", "disabled", sc.DisableDNS, "advertiseAddress", advertise)
		return handles, nil
	}
	if sc.DNSPort == 0 {
		sc.DNSPort = 53
	}
	if sc.DNSMetricsPort == 0 {
		sc.DNSMetricsPort = 9153
	}
	ip, err := netip.ParseAddr(advertise)
	if err != nil {
		return handles, fmt.Errorf("advertise address %q: %w", advertise, err)
	}
	client, err := clientFor("cluster-dns", bootstrappolicy.ClusterDNSUser)
	if err != nil {
		return handles, err
	}
	d, err := dns.New(client, dns.Options{
		Address:        net.JoinHostPort(ip.String(), strconv.Itoa(sc.DNSPort)),
		MetricsAddress: net.JoinHostPort(ip.String(), strconv.Itoa(sc.DNSMetricsPort)),
		Publish:        &dns.Publish{IP: ip.String(), Port: int32(sc.DNSPort), MetricsPort: int32(sc.DNSMetricsPort)},
	})
	if err != nil {
		return handles, err
	}
	h, err := lifecycle.Launch(ctx, "dns", d, timeout)
	if err != nil {
		logger.Error(err, "Cluster DNS could not start; continuing without it")
		return handles, nil
	}
	if api != nil {
		api.AddReadyzCheck("cluster-dns", d.Probe)
	}
	return append(handles, h), nil
}
