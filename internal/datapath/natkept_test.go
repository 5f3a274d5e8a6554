package datapath_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
	"github.com/xdpfw/xdpfw/testutil"
)

// natRouter is a data plane with --nat xdpfw routing between a LAN
// client (10.200.1.2, behind lan0) and a sink (10.220.0.2, behind out0,
// the router 10.220.0.1): a stateful FORWARD filter and a MASQUERADE of
// UDP to port 5000 out of out0. Frames arrive on lo (BPF_PROG_TEST_RUN's
// ingress), which the filter names.
type natRouter struct {
	f          *fixture
	lan, out   testutil.VethEnd
	cli, sink  netip.Addr
	router     netip.Addr // out0's address: MASQUERADE's
	cliMAC     [6]byte
	routerLANs [6]byte
}

const natRouterFilter = "-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n" +
	"-A FORWARD -i lo -p udp -j ACCEPT\n-A FORWARD -j DROP\n"

const natRouterNAT = "-t nat -A POSTROUTING -o out0 -p udp --dport 5000 -j MASQUERADE\n"

// routerFixture is a data plane loaded with lim, in a namespace that
// routes between a LAN client (10.200.1.2, behind lan0, 10.200.1.1) and
// a sink (10.220.0.2, behind out0, 10.220.0.1), both neighbours known:
// the router's two ends and the client's.
func routerFixture(t testing.TB, lim datapath.Limits) (f *fixture, lanR, outR, cli testutil.VethEnd) {
	t.Helper()
	f = newFixtureLimits(t, lim)
	lan, sink := testutil.NewNetNS(t), testutil.NewNetNS(t)
	lanR, cli = testutil.VethPair(t, f.ns, "lan0", []string{"10.200.1.1/24"}, lan, "cli0", []string{"10.200.1.2/24"})
	outR, _ = testutil.VethPair(t, f.ns, "out0", []string{"10.220.0.1/24"}, sink, "snk0", []string{"10.220.0.2/24"})
	for _, args := range [][]string{
		{"sysctl", "-qw", "net.ipv4.ip_forward=1"},
		{"ip", "neigh", "replace", "10.220.0.2", "lladdr", "02:00:00:00:22:02", "dev", "out0", "nud", "permanent"},
		{"ip", "neigh", "replace", "10.200.1.2", "lladdr", cli.MAC.String(), "dev", "lan0", "nud", "permanent"},
	} {
		if out, err := f.ns.Exec(t.Context(), args[0], args[1:]...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	f.ifaces["lan0"], f.ifaces["out0"] = uint32(lanR.Index), uint32(outR.Index)
	return f, lanR, outR, cli
}

func newNATRouter(t testing.TB) *natRouter {
	t.Helper()
	f, lanR, outR, cli := routerFixture(t, datapath.Limits{NAT: true})
	f.installText(natRouterFilter)
	r := &natRouter{f: f, lan: lanR, out: outR, cli: netip.MustParseAddr("10.200.1.2"),
		sink: netip.MustParseAddr("10.220.0.2"), router: netip.MustParseAddr("10.220.0.1")}
	copy(r.cliMAC[:], cli.MAC)
	copy(r.routerLANs[:], lanR.MAC)
	r.startNAT(t, f.dp)
	return r
}

// startNAT compiles the router's nat table for dp (f's interfaces) and
// starts dp's nat stage with it.
func (r *natRouter) startNAT(t testing.TB, dp *datapath.Datapath) {
	t.Helper()
	nat, err := rules.Parse("nat", []byte(natRouterNAT), rules.ParseOptions{NAT: true})
	if err != nil {
		t.Fatal(err)
	}
	lim := dp.Limits()
	nt, _, err := compile.CompileNAT(nat.NAT, compile.Input{Ifaces: r.f.ifaces, HostIfaces: r.f.ifaces,
		MaxEntries: lim.Entries, MaxNodes: lim.Nodes, MaxLeafSlots: lim.LeafSlots})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.f.ns.Do(func() error { return dp.StartNAT(nt, nat.NAT) }); err != nil {
		t.Fatal(err)
	}
}

// query is the client's datagram from port sport to the sink's dport;
// answer the sink's datagram from port sport to to.
func (r *natRouter) query(sport, dport uint16) []byte {
	return udp(r.cliMAC, netip.AddrPortFrom(r.cli, sport), netip.AddrPortFrom(r.sink, dport), 255, queryPayload)
}

func (r *natRouter) answer(sport uint16, to netip.AddrPort) []byte {
	return udp(r.routerLANs, netip.AddrPortFrom(r.sink, sport), to, 64, "answer")
}

const queryPayload = "query-pad-to-64-bytes"

// send runs frame through dp's live program: the XDP action and the
// frame as it leaves.
func (r *natRouter) send(t testing.TB, dp *datapath.Datapath, frame []byte) (uint32, []byte) {
	t.Helper()
	out := make([]byte, len(frame)+256)
	var ret uint32
	err := r.f.ns.Do(func() error {
		opts := &ebpf.RunOptions{Data: frame, DataOut: out}
		var err error
		ret, err = dp.Program().Run(opts)
		out = opts.DataOut
		return err
	})
	if err != nil {
		t.Fatalf("BPF_PROG_TEST_RUN: %v", err)
	}
	return ret, out
}

// udp is the datagram src > dst as a frame with the given MACs and
// payload (checksums computed).
func udp(srcMAC [6]byte, src, dst netip.AddrPort, ttl uint8, payload string) []byte {
	return (&packet.Packet{SrcMAC: srcMAC, Src: src.Addr(), Dst: dst.Addr(), Proto: packet.ProtoUDP,
		SPort: src.Port(), DPort: dst.Port(), TTL: ttl, Payload: []byte(payload)}).Bytes()
}

// TestNATKeptInEntry: a masqueraded connection's original direction is
// translated from its conntrack entry (docs/nat.md "The translation kept
// in the conntrack entry"), its answers from their binding; the entry's
// copy never outlives the entry (conntrack flush, expiry: the next
// datagram is a first packet, bound again); an untranslated connection's
// packets find their entry through the one lookup too (ESTABLISHED).
func TestNATKeptInEntry(t *testing.T) {
	r := newNATRouter(t)
	f, dp := r.f, r.f.dp
	const xdpPass = 2
	// sent: frame leaves as want, from its IP header on (the same
	// datagram translated, its checksums the builder's), passed
	sent := func(what string, frame, want []byte) {
		t.Helper()
		act, out := r.send(t, dp, frame)
		if act != xdpPass {
			t.Fatalf("%s: XDP action %d, want XDP_PASS", what, act)
		}
		if len(out) != len(want) || !bytes.Equal(out[14:], want[14:]) {
			t.Errorf("%s: left as\n%x\nwant\n%x", what, out, want)
		}
	}
	ap := netip.AddrPortFrom
	cli, sink, router := ap(r.cli, 4000), ap(r.sink, 5000), ap(r.router, 4000)
	counters := func() datapath.NATCounters {
		t.Helper()
		c, _, err := dp.NATCounters()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	query := udp(r.cliMAC, router, sink, 255, queryPayload) // translated
	answer := udp(r.routerLANs, sink, cli, 64, "answer")
	sent("first query", r.query(4000, 5000), query)
	sent("answer", r.answer(5000, router), answer)
	sent("second query", r.query(4000, 5000), query)
	if c := counters(); c.Bound.Packets != 1 || c.Lost.Packets != 0 {
		t.Fatalf("nat counters: bound %d, lost %d; want 1 connection bound, nothing lost", c.Bound.Packets, c.Lost.Packets)
	}

	// Its original direction's binding gone (the LRU's room): the entry
	// keeps the translation, and the binding is not asked. Before, the
	// datagram was dropped (lost).
	if err := dp.NATUnbind(packet.ProtoUDP, datapath.NATTuple{Src: r.cli, Dst: r.sink, SrcPort: 4000, DstPort: 5000}); err != nil {
		t.Fatal(err)
	}
	sent("query, its binding gone", r.query(4000, 5000), query)
	sent("answer, the query's binding gone", r.answer(5000, router), answer)
	if c := counters(); c.Bound.Packets != 1 || c.Lost.Packets != 0 {
		t.Errorf("nat counters: bound %d, lost %d; want the connection still bound, nothing lost", c.Bound.Packets, c.Lost.Packets)
	}
	// conntrack list shows the translation packets get
	conns, err := dp.Connections()
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, c := range conns {
		if c.Src == cli && c.Dst == sink {
			listed = c.NAT != nil && c.NAT.Src == sink && c.NAT.Dst == router && c.NAT.Kind == "SNAT"
			if !listed {
				t.Errorf("conntrack list: %s > %s: reply %+v, want from %s to %s, SNAT", c.Src, c.Dst, c.NAT, sink, router)
			}
		}
	}
	if !listed {
		t.Errorf("conntrack list: no %s > %s: %+v", cli, sink, conns)
	}

	// conntrack flush: the entry goes, then its bindings; the next
	// datagram is a new connection's first, bound again
	if err := f.ns.Do(func() error { _, err := dp.CTFlush(); return err }); err != nil {
		t.Fatal(err)
	}
	sent("query after conntrack flush", r.query(4000, 5000), query)
	if c := counters(); c.Bound.Packets != 2 || c.Lost.Packets != 0 {
		t.Errorf("after flush: nat counters bound %d, lost %d; want the connection bound again", c.Bound.Packets, c.Lost.Packets)
	}
	// Expired (GC not run yet): the copy is not used; the binding is a
	// dead connection's (stale), the datagram is bound afresh
	if err := dp.ExpireConnections(); err != nil {
		t.Fatal(err)
	}
	sent("query after expiry", r.query(4000, 5000), query)
	if c := counters(); c.Bound.Packets != 3 || c.Stale.Packets != 1 {
		t.Errorf("after expiry: nat counters bound %d, stale %d; want bound again, the old binding stale", c.Bound.Packets, c.Stale.Packets)
	}

	// A connection the nat table leaves alone (port 6000): bound to
	// itself; its answer and next query ESTABLISHED, found by the lookup
	// made before the binding's
	other, otherSink := ap(r.cli, 4001), ap(r.sink, 6000)
	est := f.ruleCounter(compile.FirstRuleID).Packets
	untranslated := r.query(4001, 6000)
	sent("untranslated query", untranslated, untranslated)
	ans := udp(r.routerLANs, otherSink, other, 64, "answer")
	sent("untranslated answer", ans, ans)
	sent("untranslated second query", untranslated, untranslated)
	if n := f.ruleCounter(compile.FirstRuleID).Packets - est; n != 2 {
		t.Errorf("untranslated connection: %d packets ESTABLISHED, want its answer and second query", n)
	}
	if c := counters(); c.Lost.Packets != 0 {
		t.Errorf("nat counters: lost %d", c.Lost.Packets)
	}
}
