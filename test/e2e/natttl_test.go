package e2e

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/testutil"
)

// TestNATKernelErrorsXdpfw: the ICMP errors the router's own kernel
// sends about packets of translated connections quote what their
// receiver knows, as the kernel's NAT translates them
// (nf_nat_icmp_reply_translation): checked against the kernel's iptables
// on the same namespaces first. The server b's answer to a masqueraded
// connection, with TTL 1, runs out at the router: the time exceeded b
// gets quotes the router's address and port, not the client's private
// one. The WAN client b's datagram to a port forward, with TTL 1: the
// time exceeded quotes the router's WAN address and the forwarded port,
// not the LAN server's; so does the one about the first datagram of a new
// connection to the port forward, with TTL 1 (which xdpfw never binds:
// the kernel never forwards it). A datagram to a REDIRECTed port of the router
// with no socket behind: the port unreachable quotes the port b sent to.
// Every error's ICMP checksum is valid.
func TestNATKernelErrorsXdpfw(t *testing.T) {
	testutil.RequireRoot(t)
	x, router, _ := natServedRouter(t)
	var srv *net.UDPConn
	if err := x.b.Do(func() error {
		c, err := net.ListenPacket("udp4", ":8090")
		srv, _ = c.(*net.UDPConn)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	serveUDPEcho(t, x.a, 7001)
	icmpB := icmpListen(t, x.b)
	text := fragRules(router, x.la.cli4) // REDIRECT 2223 to 7002: no socket on the router this time
	server := x.lb.cli4

	check := func(what string) {
		t.Helper()
		// 1. the server's answer to a masqueraded connection, TTL 1
		c := udpFrom(t, x.a, hostPort(server, 8090))
		if _, err := c.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 100)
		_ = srv.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, from, err := srv.ReadFrom(b)
		if err != nil {
			t.Fatalf("%s: the server got nothing: %v", what, err)
		}
		setTTL(t, srv, 1)
		if _, err := srv.WriteTo([]byte("short-lived"), from); err != nil {
			t.Fatal(err)
		}
		setTTL(t, srv, 64)
		ms := icmpB(time.Second)
		if len(ms) != 1 || ms[0].from != router || ms[0].typ != 11 || ms[0].qsrc != hostPort(server, 8090) || ms[0].qdst != from.String() || !ms[0].ok {
			t.Errorf("%s: answer with TTL 1: the server received %+v; want one time exceeded from %s quoting %s:8090 > %s (the router's), checksum valid",
				what, ms, router, server, from)
		}

		// 2. the WAN client's datagram to a port forward, TTL 1
		u := udpFrom(t, x.b, hostPort(router, 9091))
		if _, err := u.Write([]byte("open")); err != nil {
			t.Fatal(err)
		}
		_ = u.SetReadDeadline(time.Now().Add(2 * time.Second))
		if n, err := u.Read(b); err != nil || !bytes.Equal(b[:n], []byte("open")) {
			t.Fatalf("%s: the port forward did not answer: %v", what, err)
		}
		setTTL(t, u, 1)
		if _, err := u.Write([]byte("short-lived")); err != nil {
			t.Fatal(err)
		}
		ms = icmpB(time.Second)
		if len(ms) != 1 || ms[0].from != router || ms[0].typ != 11 || ms[0].qsrc != u.LocalAddr().String() || ms[0].qdst != hostPort(router, 9091) || !ms[0].ok {
			t.Errorf("%s: to the port forward with TTL 1: the client received %+v; want one time exceeded from %s quoting %s > %s:9091, checksum valid",
				what, ms, router, u.LocalAddr(), router)
		}

		// 4. the first datagram of a new connection to the port
		// forward, TTL 1: never bound, as the kernel never confirms
		// its connection; the kernel's error quotes what the client
		// sent all the same
		u = udpFrom(t, x.b, hostPort(router, 9091))
		setTTL(t, u, 1)
		if _, err := u.Write([]byte("first")); err != nil {
			t.Fatal(err)
		}
		ms = icmpB(time.Second)
		if len(ms) != 1 || ms[0].from != router || ms[0].typ != 11 || ms[0].qsrc != u.LocalAddr().String() || ms[0].qdst != hostPort(router, 9091) || !ms[0].ok {
			t.Errorf("%s: a new connection's first datagram to the port forward with TTL 1: the client received %+v; want one time exceeded from %s quoting %s > %s:9091, checksum valid",
				what, ms, router, u.LocalAddr(), router)
		}

		// 3. a REDIRECTed port with no socket behind it
		u = udpFrom(t, x.b, hostPort(router, 2223))
		if _, err := u.Write([]byte("nobody")); err != nil {
			t.Fatal(err)
		}
		ms = icmpB(time.Second)
		if len(ms) != 1 || ms[0].from != router || ms[0].typ != 3 || ms[0].code != 3 || ms[0].qsrc != u.LocalAddr().String() ||
			ms[0].qdst != hostPort(router, 2223) || !ms[0].ok {
			t.Errorf("%s: to a REDIRECTed port without a socket: the client received %+v; want one port unreachable from %s quoting %s > %s:2223, checksum valid",
				what, ms, router, u.LocalAddr(), router)
		}
	}

	f := kernelThenXdpfw(t, x, text, func() { check("iptables") })
	check("xdpfw")
	if c := f.natStatus().Counters; c["icmp_error"] != 4 || c["kernel_icmp"] != 3 {
		t.Errorf("status: nat counters %v; want icmp_error 4 (the four errors translated at tc egress), kernel_icmp 3", c)
	}
	if t.Failed() {
		t.Logf("status:\n%s", f.mustRun("status", "--json").stdout)
	}
}
