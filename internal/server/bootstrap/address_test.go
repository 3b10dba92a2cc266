package bootstrap

import (
	"net"
	"strings"
	"testing"
)

func TestHostAddress(t *testing.T) {
	ip := net.ParseIP
	lo := iface{name: "lo", up: false, addrs: []net.IP{ip("127.0.0.1"), ip("::1")}}
	tests := []struct {
		name   string
		def    string
		ifaces []iface
		want   string
	}{
		{name: "default route interface first", def: "eth1", ifaces: []iface{lo,
			{name: "eth0", up: true, addrs: []net.IP{ip("192.0.2.10")}},
			{name: "eth1", up: true, addrs: []net.IP{ip("fe80::1"), ip("198.51.100.4")}},
		}, want: "198.51.100.4"},
		{name: "any up interface without a default route", ifaces: []iface{lo,
			{name: "eth0", up: false, addrs: []net.IP{ip("192.0.2.10")}},
			{name: "eth1", up: true, addrs: []net.IP{ip("198.51.100.4")}},
		}, want: "198.51.100.4"},
		{name: "ipv4 before ipv6", def: "eth0", ifaces: []iface{
			{name: "eth0", up: true, addrs: []net.IP{ip("2001:db8::2")}},
			{name: "eth1", up: true, addrs: []net.IP{ip("198.51.100.4")}},
		}, want: "198.51.100.4"},
		{name: "ipv6 only", ifaces: []iface{{name: "eth0", up: true, addrs: []net.IP{ip("fe80::2"), ip("2001:db8::2")}}}, want: "2001:db8::2"},
		{name: "loopback only", ifaces: []iface{lo}, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := hostAddress(tc.def, tc.ifaces); got != tc.want {
				t.Errorf("hostAddress = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAdvertiseAddressUsesSpecificBindAddress(t *testing.T) {
	if got := AdvertiseAddress("198.51.100.9"); got != "198.51.100.9" {
		t.Errorf("AdvertiseAddress(198.51.100.9) = %q", got)
	}
	for _, bind := range []string{"127.0.0.1", "0.0.0.0", ""} {
		if got := AdvertiseAddress(bind); got != "" && !usable(net.ParseIP(got)) {
			t.Errorf("AdvertiseAddress(%q) = %q, not a usable endpoint address", bind, got)
		}
	}
}

func TestParseDefaultRoute(t *testing.T) {
	const table = `Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
eth1	000200C0	00000000	0001	0	0	0	00FFFFFF	0	0	0
eth0	00000000	010200C0	0003	0	0	0	00000000	0	0	0
`
	if got := parseDefaultRoute(strings.NewReader(table)); got != "eth0" {
		t.Errorf("parseDefaultRoute = %q, want eth0", got)
	}
	if got := parseDefaultRoute(strings.NewReader("Iface\tDestination\n")); got != "" {
		t.Errorf("parseDefaultRoute without a default route = %q", got)
	}
}
