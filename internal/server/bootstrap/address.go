package bootstrap

import (
	"bufio"
	"io"
	"net"
	"os"
	"strings"
)

// AdvertiseAddress is the address to write into the kubernetes Endpoints and
// EndpointSlice for an API server bound to bindAddress: the bind address
// itself when it is a specific, non-loopback IP, otherwise the host's
// primary address (that of the default route's interface, else the first
// global unicast address of any interface that is up). The API rejects
// loopback endpoint addresses, as upstream does, so it returns "" when the
// host has no other address.
func AdvertiseAddress(bindAddress string) string {
	if ip := net.ParseIP(bindAddress); usable(ip) {
		return ip.String()
	}
	return hostAddress(defaultRouteInterface(), systemInterfaces())
}

// iface is the part of a network interface that address selection reads.
type iface struct {
	name  string
	up    bool
	addrs []net.IP
}

// hostAddress picks the primary address among ifaces: IPv4 before IPv6, the
// default route's interface before the others.
func hostAddress(defaultIface string, ifaces []iface) string {
	for _, wantV4 := range []bool{true, false} {
		for _, onlyDefault := range []bool{true, false} {
			for _, ifc := range ifaces {
				if !ifc.up || (onlyDefault && ifc.name != defaultIface) {
					continue
				}
				for _, ip := range ifc.addrs {
					if usable(ip) && (ip.To4() != nil) == wantV4 {
						return ip.String()
					}
				}
			}
		}
	}
	return ""
}

func usable(ip net.IP) bool {
	return ip != nil && ip.IsGlobalUnicast() && !ip.IsLoopback()
}

func systemInterfaces() []iface {
	list, err := net.Interfaces()
	if err != nil {
		return nil
	}
	out := make([]iface, 0, len(list))
	for _, l := range list {
		ifc := iface{name: l.Name, up: l.Flags&net.FlagUp != 0 && l.Flags&net.FlagLoopback == 0}
		addrs, err := l.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				ifc.addrs = append(ifc.addrs, n.IP)
			}
		}
		out = append(out, ifc)
	}
	return out
}

func defaultRouteInterface() string {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return ""
	}
	defer f.Close()
	return parseDefaultRoute(f)
}

// parseDefaultRoute returns the interface of the IPv4 default route in the
// /proc/net/route format, or "".
func parseDefaultRoute(r io.Reader) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 8 && f[1] == "00000000" && f[7] == "00000000" {
			return f[0]
		}
	}
	return ""
}
