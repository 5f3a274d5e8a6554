package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/testutil"
)

// portForwardRules is a router's port forwards (nat PREROUTING) and
// filter: the WAN (rb) reaches the LAN server a through the router's WAN
// address (TCP and UDP :9090 to a:8080, ping to a), and the router's own
// service (:2222 REDIRECTed to :8081); the LAN reaches the same port
// forward (hairpin NAT: DNAT back into the LAN, MASQUERADE so that a's
// answers come back through the router). FORWARD and INPUT judge the
// translated destinations.
func portForwardRules(wan, lan, server string) string {
	return strings.Join([]string{
		"*nat",
		":PREROUTING ACCEPT [0:0]",
		":INPUT ACCEPT [0:0]",
		":OUTPUT ACCEPT [0:0]",
		":POSTROUTING ACCEPT [0:0]",
		"-A PREROUTING -d " + wan + "/32 -p tcp -m tcp --dport 9090 -j DNAT --to-destination " + server + ":8080",
		"-A PREROUTING -d " + wan + "/32 -p udp -m udp --dport 9090 -j DNAT --to-destination " + server + ":8080",
		"-A PREROUTING -d " + wan + "/32 -p tcp -m tcp --dport 9080 -j DNAT --to-destination " + server + ":80",
		"-A PREROUTING -i rb -p icmp -j DNAT --to-destination " + server,
		"-A PREROUTING -i rb -p tcp -m tcp --dport 2222 -j REDIRECT --to-ports 8081",
		"-A PREROUTING -i rb -p udp -m udp --dport 2222 -j REDIRECT --to-ports 8081",
		"-A POSTROUTING -s " + lan + " -d " + server + "/32 -o ra -j MASQUERADE",
		"COMMIT",
		"*filter",
		":INPUT DROP [0:0]",
		":FORWARD DROP [0:0]",
		":OUTPUT ACCEPT [0:0]",
		"-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-A INPUT -i rb -p tcp -m tcp --dport 8081 -j ACCEPT",
		"-A INPUT -i rb -p udp -m udp --dport 8081 -j ACCEPT",
		"-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-A FORWARD -d " + server + "/32 -p tcp -m tcp --dport 8080 -j ACCEPT",
		"-A FORWARD -d " + server + "/32 -p udp -m udp --dport 8080 -j ACCEPT",
		"-A FORWARD -d " + server + "/32 -p tcp -m tcp --dport 80 -j ACCEPT",
		"-A FORWARD -d " + server + "/32 -p icmp -j ACCEPT",
		"-A FORWARD -i ra -o rb -j ACCEPT",
		"COMMIT",
	}, "\n") + "\n"
}

// TestNATPortForwardXdpfw: port forwards through a router whose nat table
// and filter are xdpfw's (--nat xdpfw), against the kernel's iptables
// running the same file on the same namespaces first. A WAN client (b)
// reaches the LAN server (a) with TCP, UDP and ping through the router's
// WAN address (DNAT); the server sees the client's own address and port,
// the client's connected sockets take answers only from the address it
// sent to (so every answer was translated back). A TCP and a UDP service
// of the router itself are reached through REDIRECT (its reply leaves
// translated at tc egress). The LAN client reaches the port forward too
// (hairpin: DNAT and MASQUERADE on one connection): the server sees the
// router's LAN address. Each rule of FORWARD and INPUT counts the first
// packets iptables' counts (the chain and the rule chosen on the
// translated destination).
func TestNATPortForwardXdpfw(t *testing.T) {
	testutil.RequireRoot(t)
	x := newRouter(t)
	vethPeerReady(t, x.a, "xa")
	vethPeerReady(t, x.b, "xb")
	servePeer(t, x.a, 8080)
	servePeer(t, x.r, 8081)
	serveEcho(t, x.a, 80)
	wan, server := x.lb.srv4, x.la.cli4
	text := portForwardRules(wan, "10.200.1.0/24", server)

	flows := func(what string) {
		t.Helper()
		for _, c := range []struct {
			from    *testutil.NetNS
			network string
			port    int
			seenBy  string // the address the server sees; "" the client's own, port included
		}{
			{x.b, "tcp4", 9090, ""}, {x.b, "udp4", 9090, ""}, // port forward
			{x.b, "tcp4", 2222, ""}, {x.b, "udp4", 2222, ""}, // REDIRECT
			{x.a, "tcp4", 9090, x.la.srv4}, // hairpin: DNAT + MASQUERADE
		} {
			to := hostPort(wan, c.port)
			local, seen, err := peerSeen(t, c.from, c.network, to)
			if err != nil {
				t.Errorf("%s: %s from %s to %s: %v", what, c.network, c.from, to, err)
				continue
			}
			want := local
			if c.seenBy != "" {
				_, lport, _ := net.SplitHostPort(local)
				want = c.seenBy + ":" + lport
			}
			if seen != want {
				t.Errorf("%s: %s from %s to %s: the server saw %s, want %s", what, c.network, c.from, to, seen, want)
			}
		}
		checkPing(t, what+": ping through the port forward", x.b, wan, true)
		e := dialEcho(t, x.b, hostPort(wan, 9080))
		for i := range 3 {
			if err := e.roundTrip(fmt.Sprintf("line %d", i)); err != nil {
				t.Errorf("%s: echo through the port forward: %v", what, err)
			}
		}
	}

	// The oracle: the kernel's iptables, nat and filter, the same file.
	iptablesRestoreText(t, x.r, text)
	flows("iptables")
	wantFwd, wantIn := iptablesCounts(t, x.r, "FORWARD"), iptablesCounts(t, x.r, "INPUT")
	iptablesRestoreText(t, x.r, "")
	kernelNAT(t, x.r, "-F")
	if t.Failed() {
		t.FailNow()
	}
	if len(wantFwd) != 6 || wantFwd[0] == 0 || len(wantIn) != 3 || wantIn[0] == 0 {
		t.Fatalf("iptables counted FORWARD %v, INPUT %v: the answers uncounted", wantFwd, wantIn)
	}

	f := newFW(t, x.r)
	f.mustRun("load", "-i", "ra", "-i", "rb", "--nat", "xdpfw", "--ipv4-file", writeRules(t, "fwd.rules", text))
	flows("xdpfw")
	l := f.list()
	checkFirstPacketCounts(t, l, map[string][]uint64{"FORWARD": wantFwd, "INPUT": wantIn})
	if t.Failed() {
		t.Logf("list:\n%s\nstatus:\n%s", l.raw, f.mustRun("status", "--json").stdout)
	}

	// conntrack list: each DNATed connection as the filter saw it (to
	// the server), its reply tuple from the server to the client
	var cts []natConn
	f.decode(&cts, "conntrack", "list", "--json")
	kinds := map[string]int{}
	for _, c := range cts {
		if c.NAT == nil {
			continue
		}
		kinds[c.NAT.Kind]++
		// the client sent to the router's WAN address; the answers come
		// from where the filter saw the connection go
		if strings.Contains(c.NAT.Kind, "DNAT") && (!strings.HasPrefix(c.NAT.OrigDst, wan+":") || c.NAT.Src != c.Dst) {
			t.Errorf("conntrack list: %s > %s: %+v; want orig_dst %s:PORT, the reply from %s", c.Src, c.Dst, *c.NAT, wan, c.Dst)
		}
	}
	if kinds["DNAT"] < 6 || kinds["SNAT,DNAT"] < 1 {
		t.Errorf("conntrack list: translations %v; want the port forwards' and REDIRECTs' (DNAT) and the hairpin's (SNAT,DNAT): %+v", kinds, cts)
	}
	if out := f.mustRun("conntrack", "list").stdout; !strings.Contains(out, "[DNAT]") {
		t.Errorf("conntrack list shows no DNAT:\n%s", out)
	}
	st := f.natStatus()
	if c := st.Counters; c["dnat"] < 7 || c["bound"] < 1 || c["no_local"] != 0 {
		t.Errorf("status: nat counters %v; want 7 connections destination-translated (dnat), the hairpin's source too (bound)", c)
	}

	// A DNATed connection whose answers' binding is gone (the LRU's room):
	// the server's answers are dropped, counted, never forwarded with the
	// server's own address (the conntrack entry says xdpfw translates it)
	e := dialEcho(t, x.b, hostPort(wan, 9080))
	if err := e.roundTrip("bound"); err != nil {
		t.Fatalf("echo through the port forward: %v", err)
	}
	// the answers' binding, server to client
	f.unbindLost(t, e, netip.MustParseAddrPort(hostPort(server, 80)), netip.MustParseAddrPort(e.c.LocalAddr().String()))

	// REDIRECT where the device has no IPv4 address: the first packet is
	// dropped, counted, never passed untranslated (b keeps the router's
	// MAC for the address that is gone)
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	mac, err := x.r.Exec(ctx, "cat", "/sys/class/net/rb/address")
	if err != nil {
		t.Fatalf("reading rb's address: %v", err)
	}
	for _, c := range []struct {
		ns   *testutil.NetNS
		args []string
	}{
		{x.b, []string{"ip", "neigh", "replace", wan, "lladdr", strings.TrimSpace(string(mac)), "dev", "xb", "nud", "permanent"}},
		{x.r, []string{"ip", "-4", "addr", "flush", "dev", "rb"}},
		{x.r, []string{"ip", "route", "add", x.lb.cli4 + "/32", "dev", "rb"}},
	} {
		if out, err := c.ns.Exec(ctx, c.args[0], c.args[1:]...); err != nil {
			t.Fatalf("%s in %s: %v\n%s", c.args, c.ns, err, out)
		}
	}
	f.mustRun("load", "-i", "ra", "-i", "rb", "--nat", "xdpfw", "--ipv4-file", writeRules(t, "fwd.rules", text))
	if _, seen, err := peerSeen(t, x.b, "udp4", hostPort(wan, 2222)); err == nil {
		t.Errorf("REDIRECT on a device without an address: answered (the server saw %s)", seen)
	}
	st = f.natStatus()
	if st.Counters["no_local"] == 0 {
		t.Errorf("status: nat counters %v; want the REDIRECT without an address counted (no_local)", st.Counters)
	}
}

// natRouter is newRouter with both veth peers ready for the forwarding
// fast path.
func natRouter(t *testing.T) *router {
	t.Helper()
	x := newRouter(t)
	vethPeerReady(t, x.a, "xa")
	vethPeerReady(t, x.b, "xb")
	return x
}

// kernelThenXdpfw runs the oracle first: text (a nat and a filter table)
// in the router's kernel, oracle (the traffic, and what the kernel did
// with it) while it is in force; then it clears the kernel's tables (the
// test stops if the oracle failed) and loads text into xdpfw (--nat
// xdpfw) on ra and rb, for the same traffic.
func kernelThenXdpfw(t *testing.T, x *router, text string, oracle func()) *fw {
	t.Helper()
	iptablesRestoreText(t, x.r, text)
	oracle()
	iptablesRestoreText(t, x.r, "")
	kernelNAT(t, x.r, "-F")
	if t.Failed() {
		t.FailNow()
	}
	f := newFW(t, x.r)
	f.mustRun("load", "-i", "ra", "-i", "rb", "--nat", "xdpfw", "--ipv4-file", writeRules(t, "nat.rules", text))
	return f
}

// ctstateNATRules: port forwards (one a DNAT to the address and port the
// packets have already: the kernel then marks nothing), a REDIRECT, a
// MASQUERADE to the WAN and a hairpin; the filter counts each kind of
// packet with --ctstate SNAT and DNAT (rules without a target), and
// accepts the first packets of the port forwards by their DNAT state.
func ctstateNATRules(wan, lan, server string) string {
	return strings.Join([]string{
		"*nat",
		":PREROUTING ACCEPT [0:0]",
		":INPUT ACCEPT [0:0]",
		":OUTPUT ACCEPT [0:0]",
		":POSTROUTING ACCEPT [0:0]",
		"-A PREROUTING -d " + wan + "/32 -p udp -m udp --dport 9090 -j DNAT --to-destination " + server + ":8080",
		"-A PREROUTING -d " + wan + "/32 -i rb -p icmp -j DNAT --to-destination " + server,
		"-A PREROUTING -i rb -p udp -m udp --dport 2222 -j REDIRECT --to-ports 8081",
		"-A PREROUTING -d " + server + "/32 -p udp -m udp --dport 8080 -j DNAT --to-destination " + server + ":8080",
		"-A POSTROUTING -s " + lan + " -o rb -j MASQUERADE",
		"-A POSTROUTING -s " + lan + " -d " + server + "/32 -o ra -j MASQUERADE",
		"COMMIT",
		"*filter",
		":INPUT ACCEPT [0:0]",
		":FORWARD DROP [0:0]",
		":OUTPUT ACCEPT [0:0]",
		"-A INPUT -p udp -m conntrack --ctstate DNAT",
		"-A INPUT -p udp -m conntrack ! --ctstate DNAT",
		"-A FORWARD -m conntrack --ctstate DNAT",
		"-A FORWARD -m conntrack --ctstate SNAT",
		"-A FORWARD -m conntrack ! --ctstate DNAT",
		"-A FORWARD -m conntrack --ctstate NEW,SNAT",
		"-A FORWARD -m conntrack ! --ctstate ESTABLISHED,DNAT",
		"-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-A FORWARD -m conntrack --ctstate DNAT -j ACCEPT",
		"-A FORWARD -i ra -o rb -j ACCEPT",
		"-A FORWARD -d " + server + "/32 -p udp -m udp --dport 8080 -j ACCEPT",
		"COMMIT",
	}, "\n") + "\n"
}

// udpRounds sends n datagrams from ns to addr over one socket, each
// answered (servePeer) before the next.
func udpRounds(t *testing.T, ns *testutil.NetNS, addr string, n int) error {
	t.Helper()
	c := udpFrom(t, ns, addr)
	b := make([]byte, 100)
	for i := range n {
		_ = c.SetDeadline(time.Now().Add(connectTimeout))
		if _, err := c.Write([]byte("who")); err != nil {
			return err
		}
		if _, err := c.Read(b); err != nil {
			return fmt.Errorf("datagram %d: %w", i+1, err)
		}
	}
	return nil
}

// TestNATCtStateXdpfw: --ctstate SNAT and DNAT (and negated) mean what
// they mean to the kernel's iptables: one rule file through the kernel's
// iptables (nat and filter), then through xdpfw (--nat xdpfw) on the same
// namespaces, the same UDP exchanges and pings (a port forward, a DNAT
// that changes nothing, a REDIRECT, a MASQUERADE, a hairpin); every
// FORWARD and INPUT rule counts as many packets as iptables' did. So a
// DNATed connection's first packet is DNAT in FORWARD already (FORWARD
// accepts the port forwards by it), SNAT only from its second packet or
// its answer on, both directions, and a translation that changes nothing
// marks nothing.
func TestNATCtStateXdpfw(t *testing.T) {
	testutil.RequireRoot(t)
	x := natRouter(t)
	servePeer(t, x.a, 8080)
	servePeer(t, x.b, 8080)
	servePeer(t, x.r, 8081)
	wan, server, peer := x.lb.srv4, x.la.cli4, x.lb.cli4
	text := ctstateNATRules(wan, "10.200.1.0/24", server)

	flows := func(what string) {
		t.Helper()
		for _, c := range []struct {
			from *testutil.NetNS
			to   string
		}{
			{x.b, hostPort(wan, 9090)},    // port forward: DNAT
			{x.b, hostPort(wan, 2222)},    // REDIRECT: INPUT, DNAT
			{x.b, hostPort(server, 8080)}, // a DNAT to itself: no DNAT state
			{x.a, hostPort(peer, 8080)},   // MASQUERADE: SNAT from the answer on
			{x.a, hostPort(wan, 9090)},    // hairpin: DNAT, then SNAT too
		} {
			if err := udpRounds(t, c.from, c.to, 2); err != nil {
				t.Errorf("%s: UDP from %s to %s: %v", what, c.from, c.to, err)
			}
		}
		checkPing(t, what+": ping through the port forward", x.b, wan, true)
		checkPing(t, what+": ping through the MASQUERADE", x.a, peer, true)
	}

	var want map[string][]uint64
	f := kernelThenXdpfw(t, x, text, func() {
		flows("iptables")
		want = map[string][]uint64{"FORWARD": iptablesCounts(t, x.r, "FORWARD"), "INPUT": iptablesCounts(t, x.r, "INPUT")}
		if w := want["FORWARD"]; len(w) != 9 || w[0] == 0 || w[1] == 0 || w[2] == 0 || len(want["INPUT"]) != 2 || want["INPUT"][0] == 0 {
			t.Fatalf("iptables counted %v: the SNAT and DNAT rules counted nothing", want)
		}
	})
	flows("xdpfw")
	l := f.list()
	got := l.packetsByChain()
	for chain, w := range want {
		if !slices.Equal(got[chain], w) {
			t.Errorf("xdpfw: %s counted %v; iptables %v", chain, got[chain], w)
		}
	}
	// trace --ctstate with DNAT: a port forward's first packet (to the
	// server, as FORWARD sees it) is accepted by the DNAT rule; without
	// it, by the rule of the server's port
	for _, c := range []struct {
		state string
		rule  string
	}{{"NEW,DNAT", "--ctstate DNAT -j ACCEPT"}, {"NEW", "--dport 8080 -j ACCEPT"}} {
		tr, r := f.trace("--in", "rb", "-p", "udp", "--src", peer, "--dst", server, "--dport", "8080", "--ctstate", c.state)
		if len(tr) != 1 || tr[0].Chain != "FORWARD" || !strings.Contains(tr[0].Rule, c.rule) {
			t.Errorf("trace --ctstate %s: %+v (%s); want FORWARD's rule ...%s", c.state, tr, r.stderr, c.rule)
		}
	}
	if t.Failed() {
		t.Logf("list:\n%s\nstatus:\n%s", l.raw, f.mustRun("status", "--json").stdout)
	}
}

// TestNATRejectXdpfw: a REJECT of a port-forwarded connection answers
// from the address the client sent to, as the kernel's (which attaches
// the connection to its answer and translates it back), against the
// kernel's iptables running the same file on the same namespaces first:
// a TCP connect through the port forward is refused by a RST the client's
// socket takes (from the router's WAN address and the forwarded port),
// a UDP datagram by a port unreachable from the WAN address quoting what
// the client sent (its connected socket gets ECONNREFUSED). Before, the
// answer came from the LAN server's address and port: the client's
// sockets never saw it.
func TestNATRejectXdpfw(t *testing.T) {
	testutil.RequireRoot(t)
	x := natRouter(t)
	xdpPass(t, x.b, "xb") // the answers leave rb by XDP_TX: the peer must run XDP
	wan, server := x.lb.srv4, x.la.cli4
	text := strings.Join([]string{
		"*nat",
		":PREROUTING ACCEPT [0:0]",
		":INPUT ACCEPT [0:0]",
		":OUTPUT ACCEPT [0:0]",
		":POSTROUTING ACCEPT [0:0]",
		"-A PREROUTING -d " + wan + "/32 -p tcp -m tcp --dport 9090 -j DNAT --to-destination " + server + ":8080",
		"-A PREROUTING -d " + wan + "/32 -p udp -m udp --dport 9090 -j DNAT --to-destination " + server + ":8080",
		"COMMIT",
		"*filter",
		":INPUT ACCEPT [0:0]",
		":FORWARD DROP [0:0]",
		":OUTPUT ACCEPT [0:0]",
		"-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"-A FORWARD -d " + server + "/32 -p tcp -m tcp --dport 8080 -j REJECT --reject-with tcp-reset",
		"-A FORWARD -d " + server + "/32 -p udp -m udp --dport 8080 -j REJECT --reject-with icmp-port-unreachable",
		"COMMIT",
	}, "\n") + "\n"
	icmp := icmpListen(t, x.b)
	to := hostPort(wan, 9090)
	probe := func(what string) []icmpMsg {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
		defer cancel()
		if err := dialTCP(ctx, x.b, "", to); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s: TCP connect to %s through a rejecting port forward: %v, want connection refused (the RST from %s)", what, to, err, to)
		}
		icmp(0) // what came before
		if err := udpProbe(t, x.b, wan, 9090, false); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s: UDP to %s through a rejecting port forward: %v, want connection refused (a port unreachable quoting it)", what, to, err)
		}
		return icmp(300 * time.Millisecond)
	}

	var want []icmpMsg
	f := kernelThenXdpfw(t, x, text, func() {
		want = probe("iptables")
		if len(want) != 1 || want[0].from != wan || want[0].qdst != to || !want[0].ok {
			t.Fatalf("iptables: ICMP errors %+v; want one port unreachable from %s quoting the datagram to %s", want, wan, to)
		}
	})
	got := probe("xdpfw")
	if len(got) != 1 || got[0].from != want[0].from || got[0].qdst != want[0].qdst || got[0].typ != want[0].typ ||
		got[0].code != want[0].code || got[0].qproto != want[0].qproto || !got[0].ok {
		t.Errorf("xdpfw: ICMP errors %+v; iptables' %+v", got, want)
	}
	rejected := 0
	for _, r := range f.list().Rules {
		if strings.Contains(r.Rule, "-j REJECT") && r.Counters.Packets > 0 {
			rejected++
		}
	}
	if rejected != 2 {
		t.Errorf("xdpfw: %d REJECT rules counted packets, want both", rejected)
	}
	if t.Failed() {
		t.Logf("status:\n%s", f.mustRun("status").stdout)
	}
}
