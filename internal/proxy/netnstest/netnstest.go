// Package netnstest gives tests throw-away network namespaces: a "node"
// namespace with routed veth links to "pod" namespaces, and a way to run Go
// code (listen, dial) inside one. It is used by the kernel tests of the
// service proxy and the NetworkPolicy enforcer; nothing in the product
// imports it.
package netnstest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Run runs f on a thread inside network namespace name (created with
// `ip netns add`). Sockets f opens stay in that namespace.
func Run(name string, f func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	target, err := os.Open("/var/run/netns/" + name)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", name, err)
	}
	ferr := f()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// Leave the thread locked: it dies with the goroutine instead of
		// running other goroutines in the wrong namespace.
		return fmt.Errorf("setns back: %w", err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// Sh runs a command line (split on spaces) and returns its error with
// output.
func Sh(line string) error {
	f := strings.Fields(line)
	out, err := exec.Command(f[0], f[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", line, err, out)
	}
	return nil
}

// Available says whether the kernel tests can run here: root, ip and nft.
func Available() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("not root")
	}
	for _, bin := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s not found", bin)
		}
	}
	return nil
}

// Topology is a node namespace with pods behind routed veths: pod i
// (from 1) has address 10.42.i.2/24 with its default route through the
// node's 10.42.i.1. The node has 172.31.0.1 on lo as the source of its
// route to the service network 10.43.0.0/16, so it can reach ClusterIPs.
// IPv6 the same way: pod i fd00:42:i::2/64 via the node's fd00:42:i::1,
// the node's fd00:31::1 on lo for its route to fd00:43::/112.
type Topology struct {
	Node string
	Pods []string
}

// NodeIP is the node's address on pod i's link.
func NodeIP(i int) string { return fmt.Sprintf("10.42.%d.1", i) }

// PodIP is pod i's address.
func PodIP(i int) string { return fmt.Sprintf("10.42.%d.2", i) }

// NodeIP6 and PodIP6 are the IPv6 addresses of the node on pod i's link
// and of pod i.
func NodeIP6(i int) string { return fmt.Sprintf("fd00:42:%d::1", i) }

// PodIP6 is pod i's IPv6 address.
func PodIP6(i int) string { return fmt.Sprintf("fd00:42:%d::2", i) }

// New creates the namespaces (prefix keeps concurrent runs apart).
func New(prefix string, pods int) (*Topology, error) {
	t := &Topology{Node: prefix + "-node"}
	cmds := []string{
		"ip netns add " + t.Node,
		"ip -n " + t.Node + " link set lo up",
		"ip netns exec " + t.Node + " sysctl -qw net.ipv4.ip_forward=1",
		"ip netns exec " + t.Node + " sysctl -qw net.ipv6.conf.all.forwarding=1",
		"ip -n " + t.Node + " addr add 172.31.0.1/32 dev lo",
		"ip -n " + t.Node + " addr add fd00:31::1/128 dev lo",
	}
	for i := 1; i <= pods; i++ {
		pod := fmt.Sprintf("%s-pod%d", prefix, i)
		t.Pods = append(t.Pods, pod)
		cmds = append(cmds,
			"ip netns add "+pod,
			"ip -n "+pod+" link set lo up",
			fmt.Sprintf("ip -n %s link add vp%d type veth peer name eth0 netns %s", t.Node, i, pod),
			fmt.Sprintf("ip -n %s addr add %s/24 dev vp%d", t.Node, NodeIP(i), i),
			fmt.Sprintf("ip -n %s link set vp%d up", t.Node, i),
			fmt.Sprintf("ip -n %s addr add %s/24 dev eth0", pod, PodIP(i)),
			fmt.Sprintf("ip -n %s link set eth0 up", pod),
			fmt.Sprintf("ip -n %s route add default via %s", pod, NodeIP(i)),
			fmt.Sprintf("ip -n %s addr add %s/64 dev vp%d nodad", t.Node, NodeIP6(i), i),
			fmt.Sprintf("ip -n %s addr add %s/64 dev eth0 nodad", pod, PodIP6(i)),
			fmt.Sprintf("ip -n %s route add default via %s", pod, NodeIP6(i)),
		)
	}
	if pods > 0 {
		// The service network needs a route for the first lookup; DNAT
		// then reroutes to the endpoint.
		cmds = append(cmds, "ip -n "+t.Node+" route add 10.43.0.0/16 dev vp1 src 172.31.0.1",
			"ip -n "+t.Node+" route add fd00:43::/112 dev vp1 src fd00:31::1")
	}
	for _, c := range cmds {
		if err := Sh(c); err != nil {
			t.Close()
			return nil, err
		}
	}
	return t, nil
}

// Close deletes the namespaces.
func (t *Topology) Close() {
	for _, n := range append([]string{t.Node}, t.Pods...) {
		_ = Sh("ip netns del " + n)
	}
}

// Serve listens on TCP addr inside namespace ns and answers every
// connection with reply, then closes it. It returns the listener.
func Serve(ns, addr, reply string) (net.Listener, error) {
	var ln net.Listener
	err := Run(ns, func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(reply))
			_ = c.Close()
		}
	}()
	return ln, nil
}

// ServeUDP answers every datagram to addr inside namespace ns with reply.
func ServeUDP(ns, addr, reply string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := Run(ns, func() error {
		var err error
		pc, err = net.ListenPacket("udp4", addr)
		return err
	})
	if err != nil {
		return nil, err
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(reply), from)
		}
	}()
	return pc, nil
}
