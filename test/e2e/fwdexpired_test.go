package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestForwardTTLExpiredAsKernel: a forwarded datagram whose TTL runs out
// at the router, as the kernel's iptables and conntrack treat it (checked
// on the same namespaces first): ip_forward answers it with a time
// exceeded before the FORWARD hook, so no FORWARD rule counts it and
// FORWARD's DROP policy does not stop the answer (a datagram to a port
// FORWARD drops gets its time exceeded too); its connection is never
// confirmed, so the server's datagram back on the same ports is NEW, and
// dropped, not let in as an answer; the time exceeded is RELATED in
// OUTPUT. Then a datagram with a normal TTL and its answer count as NEW
// and ESTABLISHED. Per-rule counters must be iptables'.
func TestForwardTTLExpiredAsKernel(t *testing.T) {
	if _, err := exec.LookPath("iptables-restore"); err != nil {
		t.Skip("iptables-restore is not installed: no oracle")
	}
	x := newRouter(t)
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	// every time exceeded sent: the kernel's rate limit out of the way
	if out, err := x.r.Exec(ctx, "sysctl", "-qw", "net.ipv4.icmp_ratelimit=0"); err != nil {
		t.Fatalf("sysctl: %v\n%s", err, out)
	}
	var srv *net.UDPConn
	if err := x.b.Do(func() error {
		c, err := net.ListenPacket("udp4", ":7001")
		srv, _ = c.(*net.UDPConn)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	icmpA := icmpListen(t, x.a)
	text := strings.Join([]string{
		"*filter",
		":INPUT ACCEPT [0:0]",
		":FORWARD DROP [0:0]",
		":OUTPUT ACCEPT [0:0]",
		"-A FORWARD -p udp -m conntrack --ctstate NEW",
		"-A FORWARD -p udp -m conntrack --ctstate ESTABLISHED",
		"-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-A FORWARD -i ra -p udp -m udp --dport 7001 -j ACCEPT",
		"-A OUTPUT -p icmp -m conntrack --ctstate RELATED",
		"-A OUTPUT -p icmp -m conntrack --ctstate INVALID",
		"COMMIT",
	}, "\n") + "\n"
	server := hostPort(x.lb.cli4, 7001)
	lport := 40000

	flows := func(what string) {
		t.Helper()
		lport++
		b := make([]byte, 100)
		// 1. TTL 1 to the server's open port, and to a port FORWARD drops:
		// a time exceeded for each, from the router
		c := udpFromPort(t, x.a, lport, server)
		setTTL(t, c, 1)
		if _, err := c.Write([]byte("short-lived")); err != nil {
			t.Fatal(err)
		}
		d := udpFrom(t, x.a, hostPort(x.lb.cli4, 7002))
		setTTL(t, d, 1)
		if _, err := d.Write([]byte("short-lived")); err != nil {
			t.Fatal(err)
		}
		ms := icmpA(time.Second)
		if len(ms) != 2 || ms[0].typ != 11 || ms[1].typ != 11 || ms[0].from != x.la.srv4 {
			t.Errorf("%s: TTL 1: a received %+v; want two time exceeded from %s (one quoting the port FORWARD drops)", what, ms, x.la.srv4)
		}
		// 2. the server's datagram on the same ports, back: NEW (no
		// connection was confirmed), dropped by FORWARD's policy
		if _, err := srv.WriteTo([]byte("unasked"), c.LocalAddr()); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		if n, err := c.Read(b); err == nil {
			t.Errorf("%s: the server's datagram back to a TTL 1 datagram's ports came through (%q): its connection was recorded", what, b[:n])
		}
		// 3. the same with a normal TTL, answered
		setTTL(t, c, 64)
		if _, err := c.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		_ = srv.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, from, err := srv.ReadFrom(b)
		if err != nil {
			t.Fatalf("%s: the server got nothing: %v", what, err)
		}
		if _, err := srv.WriteTo([]byte("answer"), from); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(b); err != nil {
			t.Errorf("%s: no answer came back: %v", what, err)
		}
	}
	// udp NEW: the server's unasked datagram, then "hello"; ESTABLISHED:
	// the answer; OUTPUT: the two time exceeded, RELATED
	f, l := filterAsKernel(t, x, text, flows, map[string][]uint64{"FORWARD": {2, 1, 1, 1}, "OUTPUT": {2, 0}})
	// the kernel's conntrack has no connection of the TTL 1 datagram to
	// port 7002: neither has xdpfw's
	var cts []natConn
	f.decode(&cts, "conntrack", "list", "--json")
	for _, c := range cts {
		if strings.HasSuffix(c.Dst, ":7002") {
			t.Errorf("conntrack list: %+v, the connection of a datagram whose TTL ran out here", c)
		}
	}
	if c := f.status().Reasons["ttl-expired"]; c.Packets != 2 {
		t.Errorf("status: reason ttl-expired counted %d packets, want 2", c.Packets)
	}
	if t.Failed() {
		t.Logf("list:\n%s\nstatus:\n%s", l.raw, f.mustRun("status", "--json").stdout)
	}
}

// TestForwardBroadcastFrameAsKernel: a routed datagram in a broadcast
// frame (the sender's neighbour entry for its gateway says
// ff:ff:ff:ff:ff:ff), as the kernel treats it (checked on the same
// namespaces first): ip_forward drops a packet whose pkt_type is not
// PACKET_HOST before the FORWARD hook, silently, so no FORWARD rule counts
// it and the server never gets it; xdpfw passes it to the kernel
// unjudged (reason not-unicast) and its fast path must not forward it.
// Then the same datagram in a frame to the router's MAC is forwarded and
// counted.
func TestForwardBroadcastFrameAsKernel(t *testing.T) {
	if _, err := exec.LookPath("iptables-restore"); err != nil {
		t.Skip("iptables-restore is not installed: no oracle")
	}
	x := newRouter(t)
	var srv *net.UDPConn
	if err := x.b.Do(func() error {
		c, err := net.ListenPacket("udp4", ":7003")
		srv, _ = c.(*net.UDPConn)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	text := strings.Join([]string{
		"*filter",
		":INPUT ACCEPT [0:0]",
		":FORWARD ACCEPT [0:0]",
		":OUTPUT ACCEPT [0:0]",
		"-A FORWARD -p udp -m udp --dport 7003",
		"-A FORWARD -p udp -j ACCEPT",
		"COMMIT",
	}, "\n") + "\n"
	neigh := func(args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
		defer cancel()
		if out, err := x.a.Exec(ctx, "ip", append([]string{"neigh"}, args...)...); err != nil {
			t.Fatalf("ip neigh %s: %v\n%s", args, err, out)
		}
	}
	flows := func(what string) {
		t.Helper()
		b := make([]byte, 100)
		neigh("replace", x.la.srv4, "lladdr", "ff:ff:ff:ff:ff:ff", "dev", x.la.cliIf, "nud", "permanent")
		c := udpFrom(t, x.a, hostPort(x.lb.cli4, 7003))
		if _, err := c.Write([]byte("in a broadcast frame")); err != nil {
			t.Fatal(err)
		}
		_ = srv.SetReadDeadline(time.Now().Add(time.Second))
		if n, _, err := srv.ReadFrom(b); err == nil {
			t.Errorf("%s: the server got %q, a routed datagram in a broadcast frame", what, b[:n])
		}
		neigh("del", x.la.srv4, "dev", x.la.cliIf)
		if _, err := c.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		_ = srv.SetReadDeadline(time.Now().Add(2 * time.Second))
		if n, _, err := srv.ReadFrom(b); err != nil || string(b[:n]) != "hello" {
			t.Errorf("%s: the server got %q (%v), want hello", what, b[:n], err)
		}
	}
	// the unicast datagram only
	f, _ := filterAsKernel(t, x, text, flows, map[string][]uint64{"FORWARD": {1, 1}})
	if c := f.status().Reasons["not-unicast"]; c.Packets != 1 {
		t.Errorf("status: reason not-unicast counted %d packets, want 1", c.Packets)
	}
}

// filterAsKernel runs the oracle first: text (a filter table) in the
// router's kernel, flows("iptables") while it is in force, the per-rule
// packet counts of each chain of want checked (the test stops if the
// oracle disagrees); then text loaded into xdpfw on ra and rb, flows("xdpfw"),
// and xdpfw's counts checked against the same want.
func filterAsKernel(t *testing.T, x *router, text string, flows func(what string), want map[string][]uint64) (*fw, *listing) {
	t.Helper()
	iptablesRestoreText(t, x.r, text)
	flows("iptables")
	for chain, w := range want {
		if got := iptablesCounts(t, x.r, chain); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("iptables: %s counts %v, want %v", chain, got, w)
		}
	}
	iptablesRestoreText(t, x.r, "")
	if t.Failed() {
		t.FailNow() // the oracle disagrees with the test's expectations
	}
	f := newFW(t, x.r)
	f.mustRun("load", "-i", "ra", "-i", "rb", writeRules(t, "filter.rules", text))
	flows("xdpfw")
	l := f.list()
	got := l.packetsByChain()
	for chain, w := range want {
		if fmt.Sprint(got[chain]) != fmt.Sprint(w) {
			t.Errorf("xdpfw: %s counts %v, iptables' %v", chain, got[chain], w)
		}
	}
	return f, l
}
