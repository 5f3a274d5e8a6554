package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/testutil"
)

// udpFromPort opens a UDP socket in ns bound to local port lport
// (SO_REUSEADDR: several sockets share it) and connected to addr.
func udpFromPort(t *testing.T, ns *testutil.NetNS, lport int, addr string) *net.UDPConn {
	t.Helper()
	var c net.Conn
	d := net.Dialer{LocalAddr: &net.UDPAddr{Port: lport}, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	if err := ns.Do(func() (err error) { c, err = d.DialContext(context.Background(), "udp4", addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.UDPConn)
}

// TestNATDNATPortRetryXdpfw: a DNAT to a port range picks, for a
// connection whose tuple another connection holds, the next free port of
// the range, as the kernel does (nf_nat_l4proto_unique_tuple: a
// destination's search starts at the range's first port), checked
// against the kernel's iptables on the same namespaces first. One client
// port of b sends to three ports of the router's WAN address, DNATed to
// the LAN server's 7001-7002: the first connection gets 7001, the second
// (whose answers' tuple 7001 would share with the first's) 7002. With
// xdpfw a third finds the range held: dropped, counted no_port (the
// kernel lets a UDP clash through with the shared tuple, whose answers
// then go to the wrong connection: not compared).
func TestNATDNATPortRetryXdpfw(t *testing.T) {
	testutil.RequireRoot(t)
	x := newRouter(t)
	router, server := x.lb.srv4, x.la.cli4
	seen := map[int]func() []string{}
	for _, p := range []int{7001, 7002} {
		seen[p] = serveUDPEcho(t, x.a, p)
	}
	text := strings.Join([]string{
		"*nat",
		":PREROUTING ACCEPT [0:0]",
		":INPUT ACCEPT [0:0]",
		":OUTPUT ACCEPT [0:0]",
		":POSTROUTING ACCEPT [0:0]",
		"-A PREROUTING -d " + router + "/32 -p udp -m udp --dport 9091:9093 -j DNAT --to-destination " + server + ":7001-7002",
		"COMMIT",
		"*filter",
		":INPUT DROP [0:0]",
		":FORWARD DROP [0:0]",
		":OUTPUT ACCEPT [0:0]",
		"-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-A FORWARD -d " + server + "/32 -p udp -m udp -j ACCEPT",
		"COMMIT",
	}, "\n") + "\n"
	// ask sends from b's port lport to the router's port and says which
	// server port answered ("": none)
	ask := func(lport, port int) string {
		t.Helper()
		u := udpFromPort(t, x.b, lport, hostPort(router, port))
		before := map[int]int{7001: len(seen[7001]()), 7002: len(seen[7002]())}
		msg := []byte(fmt.Sprintf("to %d", port))
		if _, err := u.Write(msg); err != nil {
			t.Fatal(err)
		}
		_ = u.SetReadDeadline(time.Now().Add(time.Second))
		b := make([]byte, 100)
		n, err := u.Read(b)
		if err != nil || string(b[:n]) != string(msg) {
			return ""
		}
		for p, n := range before {
			if len(seen[p]()) > n {
				return fmt.Sprint(p)
			}
		}
		return "?"
	}
	flows := func(what string, lport int) {
		t.Helper()
		for i, want := range []string{"7001", "7002"} {
			if got := ask(lport, 9091+i); got != want {
				t.Errorf("%s: from port %d to the router's %d: the server's port %q answered, want %s", what, lport, 9091+i, got, want)
			}
		}
	}

	f := kernelThenXdpfw(t, x, text, func() { flows("iptables", 40001) })
	flows("xdpfw", 40002)
	if got := ask(40002, 9093); got != "" {
		t.Errorf("xdpfw: a third connection from port 40002, the range held: answered by %s; want it dropped", got)
	}
	if c := f.natStatus().Counters; c["dnat"] != 2 || c["no_port"] != 1 {
		t.Errorf("status: nat counters %v; want dnat 2, no_port 1 (the third connection)", c)
	}
	if t.Failed() {
		t.Logf("status:\n%s", f.mustRun("status", "--json").stdout)
	}
}
