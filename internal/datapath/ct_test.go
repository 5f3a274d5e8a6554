package datapath_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/conntrack"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/testutil"
)

// ctRules accepts everything conntrack does not call INVALID, so every
// valid packet advances its connection and the trace shows its state.
const ctRules = `
-A INPUT -m conntrack --ctstate INVALID -j DROP
-A INPUT -j ACCEPT
`

// A client and a server, both ways through the XDP program: conntrack is
// one table whatever the direction, so a test plays both sides.
type ctPeer struct{ cli, srv netip.Addr }

var (
	ct4 = ctPeer{netip.MustParseAddr("10.200.0.1"), netip.MustParseAddr("10.200.0.2")}
	ct6 = ctPeer{netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")}
)

// step is one packet of a sequence and what it must be.
type step struct {
	fromSrv bool  // server -> client (else client -> server)
	flags   uint8 // TCP flags
	want    uint8 // compile.CT* the packet is classified in
	conn    conntrack.State
}

func tcpPkt(p ctPeer, fromSrv bool, flags uint8) *packet.Packet {
	pk := &packet.Packet{Src: p.cli, Dst: p.srv, Proto: packet.ProtoTCP, SPort: 40000, DPort: 22, TCPFlags: flags}
	if fromSrv {
		pk.Src, pk.Dst, pk.SPort, pk.DPort = p.srv, p.cli, 22, 40000
	}
	return pk
}

// conn returns the one connection between the peers (fails if not one).
func (f *fixture) conn(t *testing.T, proto uint8) conntrack.Entry {
	t.Helper()
	es, err := f.dp.Connections()
	if err != nil {
		t.Fatal(err)
	}
	var found []conntrack.Entry
	for _, e := range es {
		if e.Proto == proto {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want 1 %s connection, have %v", conntrack.ProtoName(proto), es)
	}
	return found[0]
}

func (f *fixture) flushCT(t *testing.T) {
	t.Helper()
	if _, err := f.dp.CTFlush(); err != nil {
		t.Fatal(err)
	}
}

// TestConntrackTCP plays TCP exchanges through the program and checks the
// state every packet is classified in and the connection's state after it.
func TestConntrackTCP(t *testing.T) {
	const (
		syn, ack, fin, rst, psh = packet.TCPSyn, packet.TCPAck, packet.TCPFin, packet.TCPRst, packet.TCPPsh
	)
	est, nw, inv := compile.CTEstablished, compile.CTNew, compile.CTInvalid
	tests := []struct {
		name  string
		steps []step
	}{
		{"handshake, data, close, reuse", []step{
			{false, syn, nw, conntrack.StateSynSent},
			{false, syn, nw, conntrack.StateSynSent}, // retransmitted SYN: still no reply
			{true, syn | ack, est, conntrack.StateSynRecv},
			{false, ack, est, conntrack.StateEstablished},
			{false, psh | ack, est, conntrack.StateEstablished},
			{true, psh | ack, est, conntrack.StateEstablished},
			{false, fin | ack, est, conntrack.StateFinWait},
			{true, ack, est, conntrack.StateFinWait},
			{true, fin | ack, est, conntrack.StateLastAck},
			{false, ack, est, conntrack.StateTimeWait},
			{false, syn, nw, conntrack.StateSynSent}, // a new connection on the old tuple
		}},
		{"simultaneous open", []step{
			{false, syn, nw, conntrack.StateSynSent},
			{true, syn, est, conntrack.StateSynSent2},
			{false, syn | ack, est, conntrack.StateSynRecv},
			{true, syn | ack, est, conntrack.StateSynRecv},
			{false, ack, est, conntrack.StateEstablished},
		}},
		{"reset, then nothing more", []step{
			{false, syn, nw, conntrack.StateSynSent},
			{true, syn | ack, est, conntrack.StateSynRecv},
			{false, ack, est, conntrack.StateEstablished},
			{true, rst | ack, est, conntrack.StateClose},
			{false, ack, inv, conntrack.StateClose},
		}},
		{"refused: RST answers the SYN", []step{
			{false, syn, nw, conntrack.StateSynSent},
			{true, rst | ack, est, conntrack.StateClose},
		}},
		{"ACK before the SYN-ACK", []step{
			{false, syn, nw, conntrack.StateSynSent},
			{false, ack, inv, conntrack.StateSynSent},
			{true, ack, inv, conntrack.StateSynSent},
		}},
		{"SYN into an established connection", []step{
			{false, syn, nw, conntrack.StateSynSent},
			{true, syn | ack, est, conntrack.StateSynRecv},
			{false, ack, est, conntrack.StateEstablished},
			{false, syn, inv, conntrack.StateEstablished},
		}},
	}
	f := newFixture(t)
	f.installText(ctRules)
	for _, fam := range []ctPeer{ct4, ct6} {
		for _, tt := range tests {
			f.flushCT(t)
			for i, s := range tt.steps {
				pk := tcpPkt(fam, s.fromSrv, s.flags)
				r := f.mustRun(pk.Bytes(), "eth0")
				wantAct := uint32(datapath.XDPPass)
				if s.want == compile.CTInvalid {
					wantAct = datapath.XDPDrop
				}
				if r.CTState != s.want || r.XDPAction != wantAct {
					t.Fatalf("%s (%s) step %d %s: state %s action %d, want %s action %d", tt.name, fam.cli, i, pk,
						compile.CTStateName(r.CTState), r.XDPAction, compile.CTStateName(s.want), wantAct)
				}
				if c := f.conn(t, packet.ProtoTCP); c.State != s.conn || c.Src.Addr() != fam.cli {
					t.Fatalf("%s (%s) step %d %s: connection %s, want %s from %s", tt.name, fam.cli, i, pk, c, s.conn, fam.cli)
				}
			}
		}
	}

	// Packets that can start nothing: no entry appears. A bare ACK starts
	// nothing with strict pickup only (TestConntrackPickup).
	if err := f.dp.SetConfig(datapath.Config{CTTCPStrict: true}); err != nil {
		t.Fatal(err)
	}
	for _, flags := range []uint8{ack, psh | ack, syn | ack, fin | ack, rst, syn | fin, syn | rst, 0, fin} {
		f.flushCT(t)
		pk := tcpPkt(ct4, false, flags)
		r := f.mustRun(pk.Bytes(), "eth0")
		if r.CTState != inv || r.XDPAction != datapath.XDPDrop {
			t.Errorf("%s with no connection: %s action %d, want INVALID, dropped", pk, compile.CTStateName(r.CTState), r.XDPAction)
		}
		if es, _ := f.dp.Connections(); len(es) != 0 {
			t.Errorf("%s created %v", pk, es)
		}
	}
}

// TestConntrackPickup: by default a TCP connection the table does not know
// (it predates the rules, or the table was flushed) is picked up by its
// next bare ACK, which is NEW as in Linux (nf_conntrack_tcp_loose=1), so
// the rules for new connections decide it; the answer makes it ESTABLISHED
// and assured. SYN-ACK, FIN, RST and odd flags pick up nothing. Strict
// pickup makes the ACK INVALID.
func TestConntrackPickup(t *testing.T) {
	const ack, psh, syn, fin, rst = packet.TCPAck, packet.TCPPsh, packet.TCPSyn, packet.TCPFin, packet.TCPRst
	f := newFixture(t)
	f.installText(`
-P INPUT DROP
-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT
-A INPUT -m conntrack --ctstate INVALID -j DROP
-A INPUT -p tcp --dport 22 -m conntrack --ctstate NEW -j ACCEPT
-A INPUT -p tcp --sport 22 -m conntrack --ctstate NEW -j ACCEPT
`)
	for _, fam := range []ctPeer{ct4, ct6} {
		f.flushCT(t)
		// The ssh session the operator loads the rules from: mid-stream.
		r := f.mustRun(tcpPkt(fam, false, psh|ack).Bytes(), "eth0")
		if r.XDPAction != datapath.XDPPass || r.CTState != compile.CTNew {
			t.Fatalf("%s: mid-stream ACK: action %d state %s, want passed as NEW", fam.cli, r.XDPAction, compile.CTStateName(r.CTState))
		}
		c := f.conn(t, packet.ProtoTCP)
		if c.State != conntrack.StateEstablished || !c.PickedUp || c.Assured || c.Replied || c.Src.Addr() != fam.cli {
			t.Fatalf("%s: picked up as %s, want ESTABLISHED, picked up, not assured, from the client", fam.cli, c)
		}
		if c.Expires > 60*time.Second || c.Expires < 55*time.Second {
			t.Fatalf("%s: unanswered pickup expires in %v, want tcp_syn_recv's 60 s", fam.cli, c.Expires)
		}
		// Another ACK the same way: still NEW (nothing answered yet).
		if r := f.mustRun(tcpPkt(fam, false, ack).Bytes(), "eth0"); r.CTState != compile.CTNew {
			t.Fatalf("%s: second ACK before an answer: %s, want NEW", fam.cli, compile.CTStateName(r.CTState))
		}
		for i, fromSrv := range []bool{true, false, true} {
			if r := f.mustRun(tcpPkt(fam, fromSrv, psh|ack).Bytes(), "eth0"); r.XDPAction != datapath.XDPPass || r.CTState != compile.CTEstablished {
				t.Fatalf("%s: packet %d after pickup: action %d state %s, want ESTABLISHED", fam.cli, i, r.XDPAction, compile.CTStateName(r.CTState))
			}
		}
		c = f.conn(t, packet.ProtoTCP)
		if c.State != conntrack.StateEstablished || !c.Assured || !c.Replied || c.Expires < 400000*time.Second {
			t.Fatalf("%s: after the answer %s, want ESTABLISHED, assured, tcp_established's timeout", fam.cli, c)
		}
		// It closes as any connection does.
		f.mustRun(tcpPkt(fam, false, fin|ack).Bytes(), "eth0")
		f.mustRun(tcpPkt(fam, true, fin|ack).Bytes(), "eth0")
		f.mustRun(tcpPkt(fam, false, ack).Bytes(), "eth0")
		if c := f.conn(t, packet.ProtoTCP); c.State != conntrack.StateTimeWait {
			t.Fatalf("%s: after the close %s, want TIME_WAIT", fam.cli, c)
		}
	}
	// A mid-stream ACK the rules do not accept as NEW is dropped and
	// records nothing.
	f.flushCT(t)
	pk := &packet.Packet{Src: ct4.cli, Dst: ct4.srv, Proto: packet.ProtoTCP, SPort: 40000, DPort: 80, TCPFlags: ack}
	if r := f.mustRun(pk.Bytes(), "eth0"); r.XDPAction != datapath.XDPDrop || r.CTState != compile.CTNew {
		t.Fatalf("mid-stream ACK to a closed port: action %d state %s, want dropped as NEW", r.XDPAction, compile.CTStateName(r.CTState))
	}
	if es, _ := f.dp.Connections(); len(es) != 0 {
		t.Fatalf("a dropped pickup created %v", es)
	}
	// Only a bare ACK (with or without data) picks up.
	for _, flags := range []uint8{syn | ack, fin | ack, rst | ack, rst, fin, 0} {
		f.flushCT(t)
		pk := tcpPkt(ct4, false, flags)
		if r := f.mustRun(pk.Bytes(), "eth0"); r.CTState != compile.CTInvalid || r.XDPAction != datapath.XDPDrop {
			t.Errorf("%s with no connection: %s action %d, want INVALID, dropped", pk, compile.CTStateName(r.CTState), r.XDPAction)
		}
		if es, _ := f.dp.Connections(); len(es) != 0 {
			t.Errorf("%s created %v", pk, es)
		}
	}
	// Strict: the ACK is INVALID.
	if err := f.dp.SetConfig(datapath.Config{CTTCPStrict: true}); err != nil {
		t.Fatal(err)
	}
	f.flushCT(t)
	if r := f.mustRun(tcpPkt(ct4, false, psh|ack).Bytes(), "eth0"); r.CTState != compile.CTInvalid || r.XDPAction != datapath.XDPDrop {
		t.Fatalf("strict: mid-stream ACK %s action %d, want INVALID, dropped", compile.CTStateName(r.CTState), r.XDPAction)
	}
	st, err := f.dp.CTStats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Counters["picked_up"] != 2 {
		t.Errorf("counters %v: want 2 picked_up", st.Counters)
	}
}

// TestConntrackUDPICMP: UDP and ICMP queries are NEW until answered;
// answers to nothing are INVALID; ICMP errors about a connection are
// RELATED (and about none INVALID); ND and fragments are UNTRACKED.
func TestConntrackUDPICMP(t *testing.T) {
	f := newFixture(t)
	f.installText(ctRules)
	run := func(pk *packet.Packet, want uint8) {
		t.Helper()
		r := f.mustRun(pk.Bytes(), "eth0")
		if r.CTState != want {
			t.Fatalf("%s: state %s, want %s", pk, compile.CTStateName(r.CTState), compile.CTStateName(want))
		}
	}
	for _, p := range []ctPeer{ct4, ct6} {
		f.flushCT(t)
		q := &packet.Packet{Src: p.cli, Dst: p.srv, Proto: packet.ProtoUDP, SPort: 5353, DPort: 53, Payload: []byte("query")}
		a := &packet.Packet{Src: p.srv, Dst: p.cli, Proto: packet.ProtoUDP, SPort: 53, DPort: 5353, Payload: []byte("answer")}
		run(q, compile.CTNew)
		run(q, compile.CTNew)
		if c := f.conn(t, packet.ProtoUDP); c.State != conntrack.StateUnreplied || c.Packets != [2]uint64{2, 0} {
			t.Fatalf("after 2 queries: %s", c)
		}
		run(a, compile.CTEstablished)
		run(q, compile.CTEstablished)
		if c := f.conn(t, packet.ProtoUDP); c.State != conntrack.StateReplied || c.Packets != [2]uint64{3, 1} || !c.Replied {
			t.Fatalf("after the answer: %s", c)
		}

		// ICMP errors quoting the query are RELATED; quoting another flow, INVALID.
		icmp, unreach := packet.ProtoICMP, uint8(3)
		if p.cli.Is6() {
			icmp, unreach = packet.ProtoICMPv6, 1
		}
		quoted := q.Bytes()[14:]
		errPkt := &packet.Packet{Src: p.srv, Dst: p.cli, Proto: icmp, ICMPType: unreach, ICMPCode: 3, Payload: quoted}
		run(errPkt, compile.CTRelated)
		other := *q
		other.SPort = 9999
		errPkt.Payload = other.Bytes()[14:]
		run(errPkt, compile.CTInvalid)

		// Echo: request NEW, reply ESTABLISHED; a reply to nothing INVALID.
		req, rep := uint8(8), uint8(0)
		if p.cli.Is6() {
			req, rep = 128, 129
		}
		f.flushCT(t)
		echo := &packet.Packet{Src: p.cli, Dst: p.srv, Proto: icmp, ICMPType: req}
		reply := &packet.Packet{Src: p.srv, Dst: p.cli, Proto: icmp, ICMPType: rep}
		run(reply, compile.CTInvalid)
		run(echo, compile.CTNew)
		run(reply, compile.CTEstablished)
		if c := f.conn(t, icmp); c.Src.Port() != packet.ICMPEchoID || !c.Replied {
			t.Fatalf("echo connection %s", c)
		}
		// A port unreachable quoting the echo request is RELATED to it.
		errPkt.Payload = echo.Bytes()[14:]
		run(errPkt, compile.CTRelated)
	}
	// Neighbour discovery and non-first fragments cannot be tracked.
	run(&packet.Packet{Src: ct6.cli, Dst: ct6.srv, Proto: packet.ProtoICMPv6, ICMPType: 135}, compile.CTUntracked)
	run(&packet.Packet{Src: ct4.cli, Dst: ct4.srv, Proto: packet.ProtoUDP, FragOffset: 185, Payload: make([]byte, 16)}, compile.CTUntracked)
}

// TestConntrackTimeouts: a connection's deadline follows its state's
// timeout (configurable), and a connection past it is not ESTABLISHED even
// though no GC has run; GC then removes it.
func TestConntrackTimeouts(t *testing.T) {
	f := newFixture(t)
	f.installText(ctRules)
	var to conntrack.Timeouts
	to[conntrack.TimeoutUDP] = 1
	to[conntrack.TimeoutTCPSynSent] = 77
	if err := f.dp.SetConfig(datapath.Config{CTTimeouts: to}); err != nil {
		t.Fatal(err)
	}
	near := func(e conntrack.Entry, secs int) {
		t.Helper()
		d := time.Duration(secs) * time.Second
		if e.Expires > d || e.Expires < d-5*time.Second {
			t.Fatalf("%s expires in %v, want about %v", e, e.Expires, d)
		}
	}
	f.mustRun(tcpPkt(ct4, false, packet.TCPSyn).Bytes(), "eth0")
	near(f.conn(t, packet.ProtoTCP), 77) // configured
	f.mustRun(tcpPkt(ct4, true, packet.TCPSyn|packet.TCPAck).Bytes(), "eth0")
	near(f.conn(t, packet.ProtoTCP), 60) // default tcp_syn_recv
	f.mustRun(tcpPkt(ct4, false, packet.TCPAck).Bytes(), "eth0")
	near(f.conn(t, packet.ProtoTCP), 432000) // default tcp_established

	q := &packet.Packet{Src: ct4.cli, Dst: ct4.srv, Proto: packet.ProtoUDP, SPort: 5353, DPort: 53}
	a := &packet.Packet{Src: ct4.srv, Dst: ct4.cli, Proto: packet.ProtoUDP, SPort: 53, DPort: 5353}
	f.mustRun(q.Bytes(), "eth0")
	near(f.conn(t, packet.ProtoUDP), 1)
	time.Sleep(1100 * time.Millisecond) // past the 1 s udp timeout
	if r := f.mustRun(a.Bytes(), "eth0"); r.CTState != compile.CTNew {
		t.Fatalf("answer after the timeout: %s, want NEW (the connection expired)", compile.CTStateName(r.CTState))
	}
	// The answer started a connection of its own (server -> client).
	if c := f.conn(t, packet.ProtoUDP); c.Src.Addr() != ct4.srv {
		t.Fatalf("after expiry: %s", c)
	}
	st, err := f.dp.CTStats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Counters["expired_replaced"] != 1 {
		t.Errorf("counters %v: want 1 expired_replaced", st.Counters)
	}
	time.Sleep(1100 * time.Millisecond)
	n, err := f.dp.CTGC()
	if err != nil || n != 1 {
		t.Fatalf("GC removed %d (%v), want the 1 expired UDP connection", n, err)
	}
	if es, _ := f.dp.Connections(); len(es) != 1 || es[0].Proto != packet.ProtoTCP {
		t.Fatalf("after GC: %v, want the TCP connection only", es)
	}
}

// TestConntrackClock: conntrack's clock is CLOCK_MONOTONIC_COARSE, read
// once a tick per CPU and kept for the tick's other packets (lib/ct.h
// fw_ct_now): each packet's deadline is its timeout past the coarse clock
// of its own tick, never of an earlier one (a copy kept too long), at
// most one tick behind it (a reading between the tick's move of jiffies
// and of the clock).
func TestConntrackClock(t *testing.T) {
	f := newFixture(t)
	f.installText(ctRules)
	var to conntrack.Timeouts
	to[conntrack.TimeoutUDP] = 30
	if err := f.dp.SetConfig(datapath.Config{CTTimeouts: to}); err != nil {
		t.Fatal(err)
	}
	var res unix.Timespec
	if err := unix.ClockGetres(unix.CLOCK_MONOTONIC_COARSE, &res); err != nil {
		t.Fatal(err)
	}
	tick := uint64(res.Nano())
	coarse := func() uint64 {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC_COARSE, &ts); err != nil {
			t.Fatal(err)
		}
		return uint64(ts.Nano())
	}
	q := &packet.Packet{Src: ct4.cli, Dst: ct4.srv, Proto: packet.ProtoUDP, SPort: 5353, DPort: 53}
	const timeout = 30 * uint64(time.Second)
	for i := range 6 {
		before := coarse()
		f.mustRun(q.Bytes(), "eth0") // each packet moves the deadline
		after := coarse()
		d, err := f.dp.CTDeadlines()
		if err != nil || len(d) != 1 {
			t.Fatalf("packet %d: deadlines %v (%v), want one", i, d, err)
		}
		if now := d[0] - timeout; now+tick < before || now > after {
			t.Fatalf("packet %d: conntrack's clock %d, want it in [%d - one tick %d, %d] (CLOCK_MONOTONIC_COARSE around the packet)",
				i, now, before, tick, after)
		}
		time.Sleep(time.Duration(3*tick) + time.Duration(i)*time.Millisecond) // a few ticks on
	}
}

// TestConntrackTableFull: a full table makes room by itself, with no GC:
// new connections evict ones that are not assured (early drop), so a
// flood of unanswered flows never locks a real client out, while an
// assured connection is never evicted and keeps passing; only a table
// full of assured connections refuses new ones (dropped and counted, or,
// opted in, passed untracked).
func TestConntrackTableFull(t *testing.T) {
	f := newFixtureLimits(t, datapath.Limits{Conntrack: 64})
	f.installText(ctRules)
	// An assured connection first (handshake done), then a flood of
	// unanswered flows, four times the table.
	f.mustRun(tcpPkt(ct4, false, packet.TCPSyn).Bytes(), "eth0")
	f.mustRun(tcpPkt(ct4, true, packet.TCPSyn|packet.TCPAck).Bytes(), "eth0")
	f.mustRun(tcpPkt(ct4, false, packet.TCPAck).Bytes(), "eth0")
	flood := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			pk := &packet.Packet{Src: netip.AddrFrom4([4]byte{10, 201, byte(i >> 8), byte(i)}), Dst: ct4.srv,
				Proto: packet.ProtoTCP, SPort: uint16(1000 + i), DPort: 22, TCPFlags: packet.TCPSyn}
			if r := f.mustRun(pk.Bytes(), "eth0"); r.XDPAction != datapath.XDPPass {
				t.Fatalf("flood packet %d (%s): action %d reason %s, want passed (room made)", i, pk, r.XDPAction, r.Reason)
			}
		}
	}
	flood(0, 256)
	es, _ := f.dp.Connections()
	if len(es) > 64 {
		t.Fatalf("%d connections in a table of 64", len(es))
	}
	// The assured connection is still there and passes both ways.
	for _, fromSrv := range []bool{false, true, false} {
		if r := f.mustRun(tcpPkt(ct4, fromSrv, packet.TCPAck|packet.TCPPsh).Bytes(), "eth0"); r.XDPAction != datapath.XDPPass || r.CTState != compile.CTEstablished {
			t.Fatalf("assured connection after the flood: action %d state %s", r.XDPAction, compile.CTStateName(r.CTState))
		}
	}
	// A real client gets in during the flood, completes its handshake,
	// and then survives the rest of it.
	cli := ctPeer{netip.MustParseAddr("10.203.0.1"), ct4.srv}
	for _, s := range []step{
		{false, packet.TCPSyn, compile.CTNew, 0},
		{true, packet.TCPSyn | packet.TCPAck, compile.CTEstablished, 0},
		{false, packet.TCPAck, compile.CTEstablished, 0},
	} {
		if r := f.mustRun(tcpPkt(cli, s.fromSrv, s.flags).Bytes(), "eth0"); r.XDPAction != datapath.XDPPass || r.CTState != s.want {
			t.Fatalf("real client during the flood: action %d reason %s state %s, want %s", r.XDPAction, r.Reason,
				compile.CTStateName(r.CTState), compile.CTStateName(s.want))
		}
	}
	flood(256, 256)
	if r := f.mustRun(tcpPkt(cli, false, packet.TCPAck|packet.TCPPsh).Bytes(), "eth0"); r.CTState != compile.CTEstablished {
		t.Fatalf("real client after more flood: %s, want ESTABLISHED", compile.CTStateName(r.CTState))
	}
	st, err := f.dp.CTStats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Counters["early_drop"] < 512-64 || st.Counters["table_full"] != 0 {
		t.Errorf("counters %v: want early_drop >= %d and no table_full", st.Counters, 512-64)
	}

	// A table full of assured connections refuses a new one.
	f.flushCT(t)
	for i := 0; i < 64; i++ {
		q := &packet.Packet{Src: netip.AddrFrom4([4]byte{10, 204, 0, byte(i)}), Dst: ct4.srv, Proto: packet.ProtoUDP, SPort: 5000, DPort: 53}
		a := &packet.Packet{Src: ct4.srv, Dst: q.Src, Proto: packet.ProtoUDP, SPort: 53, DPort: 5000}
		for _, pk := range []*packet.Packet{q, a, q} { // a packet after the answer: assured
			f.mustRun(pk.Bytes(), "eth0")
		}
	}
	pk := &packet.Packet{Src: netip.MustParseAddr("10.202.0.1"), Dst: ct4.srv, Proto: packet.ProtoUDP, SPort: 1, DPort: 53}
	r := f.mustRun(pk.Bytes(), "eth0")
	if r.XDPAction != datapath.XDPDrop || r.Reason != compile.ReasonCTFull {
		t.Fatalf("new flow with a table full of assured connections: action %d reason %s, want dropped, conntrack-full", r.XDPAction, r.Reason)
	}
	st, _ = f.dp.CTStats()
	reasons, _ := f.dp.ReasonCounters()
	if st.Counters["table_full"] != 1 || reasons[compile.ReasonCTFull].Packets != 1 {
		t.Errorf("table_full %d, reason counter %d, want 1", st.Counters["table_full"], reasons[compile.ReasonCTFull].Packets)
	}
	// Opting in to fail open for new connections passes them, untracked.
	if err := f.dp.SetConfig(datapath.Config{CTFullAccept: true}); err != nil {
		t.Fatal(err)
	}
	pk.SPort = 2
	if r := f.mustRun(pk.Bytes(), "eth0"); r.XDPAction != datapath.XDPPass {
		t.Fatalf("with CTFullAccept: action %d", r.XDPAction)
	}
}

// TestConntrackReclaimExpired: expired entries take no room a new
// connection needs, with no GC run: a table full of connections past their
// deadline (the clock driven by setting the deadlines, no waiting) takes
// new ones, which remove the expired entries, even assured ones.
func TestConntrackReclaimExpired(t *testing.T) {
	f := newFixtureLimits(t, datapath.Limits{Conntrack: 64})
	f.installText(ctRules)
	for i := 0; i < 64; i++ {
		q := &packet.Packet{Src: netip.AddrFrom4([4]byte{10, 204, 0, byte(i)}), Dst: ct4.srv, Proto: packet.ProtoUDP, SPort: 5000, DPort: 53}
		a := &packet.Packet{Src: ct4.srv, Dst: q.Src, Proto: packet.ProtoUDP, SPort: 53, DPort: 5000}
		for _, pk := range []*packet.Packet{q, a, q} {
			f.mustRun(pk.Bytes(), "eth0")
		}
	}
	if err := f.dp.ExpireConnections(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 64; i++ {
		pk := tcpPkt(ctPeer{netip.AddrFrom4([4]byte{10, 205, 0, byte(i)}), ct4.srv}, false, packet.TCPSyn)
		if r := f.mustRun(pk.Bytes(), "eth0"); r.XDPAction != datapath.XDPPass || r.CTState != compile.CTNew {
			t.Fatalf("new connection %d into a table of expired ones: action %d reason %s", i, r.XDPAction, r.Reason)
		}
	}
	es, _ := f.dp.Connections()
	for _, e := range es {
		if e.Proto != packet.ProtoTCP {
			t.Fatalf("left after 64 new connections: %s (every expired entry should have made room)", e)
		}
	}
	st, _ := f.dp.CTStats()
	if st.Counters["expired_replaced"] != 64 || st.Counters["early_drop"] != 0 || st.Counters["table_full"] != 0 {
		t.Errorf("counters %v: want 64 expired_replaced, no early_drop, no table_full", st.Counters)
	}
}

// TestConntrackFastRule: with the classic policy, established packets are
// decided by the ESTABLISHED,RELATED rule right after the lookup (the root's
// fast rule), and the compiled root says so.
func TestConntrackFastRule(t *testing.T) {
	f := newFixture(t)
	f.installText(`-P INPUT DROP
-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT
-A INPUT -m conntrack --ctstate INVALID -j DROP
-A INPUT -p tcp --dport 22 -m conntrack --ctstate NEW -j ACCEPT
`)
	tb, _, err := compile.Compile(compile.Input{RuleSet: f.rs, IDs: f.ids, Ifaces: f.ifaces})
	if err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 2; r++ { // INPUT v4, v6
		root := tb.Roots[r]
		if root.Flags&compile.RootCT == 0 || root.FastStates != 1<<compile.CTEstablished|1<<compile.CTRelated || root.FastRuleID != f.ids[0] {
			t.Fatalf("root %d: %+v, want the fast rule %d for ESTABLISHED,RELATED", r, root, f.ids[0])
		}
	}
	for _, fam := range []ctPeer{ct4, ct6} {
		f.flushCT(t)
		for i, s := range []struct {
			fromSrv bool
			flags   uint8
			rule    uint32
			act     uint32
		}{
			{false, packet.TCPSyn, f.ids[2], datapath.XDPPass},
			{true, packet.TCPSyn | packet.TCPAck, f.ids[0], datapath.XDPPass},
			{false, packet.TCPAck, f.ids[0], datapath.XDPPass},
			{true, packet.TCPAck, f.ids[0], datapath.XDPPass},
			{false, packet.TCPSyn, f.ids[1], datapath.XDPDrop},                 // INVALID in an established connection
			{true, packet.TCPAck | packet.TCPPsh, f.ids[0], datapath.XDPPass},  // still established
			{false, packet.TCPFin | packet.TCPAck, f.ids[0], datapath.XDPPass}, // closing
			{false, packet.TCPSyn | packet.TCPAck, f.ids[1], datapath.XDPDrop}, // nonsense
			{true, packet.TCPRst, f.ids[0], datapath.XDPPass},                  // reset
			{true, packet.TCPAck, f.ids[1], datapath.XDPDrop},                  // after the reset
			{false, packet.TCPSyn, f.ids[2], datapath.XDPPass},                 // reconnect
			{true, packet.TCPAck, f.ids[1], datapath.XDPDrop},                  // not the SYN-ACK
			{true, packet.TCPSyn | packet.TCPAck, f.ids[0], datapath.XDPPass},  // the SYN-ACK
			{false, packet.TCPAck, f.ids[0], datapath.XDPPass},                 // established again
		} {
			pk := tcpPkt(fam, s.fromSrv, s.flags)
			r := f.mustRun(pk.Bytes(), "eth0")
			if r.RuleID != s.rule || r.XDPAction != s.act {
				t.Fatalf("%s step %d %s: rule %d action %d (state %s), want rule %d action %d", fam.cli, i, pk,
					r.RuleID, r.XDPAction, compile.CTStateName(r.CTState), s.rule, s.act)
			}
		}
	}
}

// TestConntrackClassified: packets of a live connection that no fast rule
// decides go to the XDP program's classify stage, which gets the
// connection through the hand-over without its entry pointer and must find
// the entry again to advance it: counters and the replied state prove it
// did.
func TestConntrackClassified(t *testing.T) {
	f := newFixture(t)
	f.installText(`-P INPUT DROP
-A INPUT -p udp --dport 53 -j ACCEPT
-A INPUT -m conntrack --ctstate ESTABLISHED -j ACCEPT
`)
	tb, _, err := compile.Compile(compile.Input{RuleSet: f.rs, IDs: f.ids, Ifaces: f.ifaces})
	if err != nil {
		t.Fatal(err)
	}
	if root := tb.Roots[0]; root.Flags&compile.RootCT == 0 || root.FastStates != 0 {
		t.Fatalf("INPUT v4 root %+v: want conntrack and no fast rule", root)
	}
	for _, p := range []ctPeer{ct4, ct6} {
		f.flushCT(t)
		q := &packet.Packet{Src: p.cli, Dst: p.srv, Proto: packet.ProtoUDP, SPort: 5353, DPort: 53, Payload: []byte("query")}
		a := &packet.Packet{Src: p.srv, Dst: p.cli, Proto: packet.ProtoUDP, SPort: 53, DPort: 5353, Payload: []byte("answer")}
		for i, s := range []struct {
			pk    *packet.Packet
			state uint8
			rule  uint32
			pkts  [2]uint64
		}{
			{q, compile.CTNew, f.ids[0], [2]uint64{1, 0}},         // creates
			{q, compile.CTNew, f.ids[0], [2]uint64{2, 0}},         // advances the live entry
			{a, compile.CTEstablished, f.ids[1], [2]uint64{2, 1}}, // the answer: replied
			{q, compile.CTEstablished, f.ids[0], [2]uint64{3, 1}},
		} {
			r := f.mustRun(s.pk.Bytes(), "eth0")
			if r.RuleID != s.rule || r.XDPAction != datapath.XDPPass || r.CTState != s.state {
				t.Fatalf("%s step %d %s: rule %d action %d state %s, want rule %d, passed, %s", p.cli, i, s.pk,
					r.RuleID, r.XDPAction, compile.CTStateName(r.CTState), s.rule, compile.CTStateName(s.state))
			}
			if c := f.conn(t, packet.ProtoUDP); c.Packets != s.pkts || c.Replied != (s.pkts[1] > 0) {
				t.Fatalf("%s step %d: connection %s, want packets %v", p.cli, i, c, s.pkts)
			}
		}
	}
}

// TestClassifyStage: the XDP classify stage's program array is pinned per
// program from load on; pinning a newer program drops the older ones' pins
// (the older program keeps its stage while a handle holds it); and a
// program whose stage is gone fails closed.
func TestClassifyStage(t *testing.T) {
	f := newFixture(t)
	f.installText(`-P INPUT ACCEPT
-A INPUT -p udp --dport 53 -j DROP
`)
	q := &packet.Packet{Src: ct4.cli, Dst: ct4.srv, Proto: packet.ProtoUDP, SPort: 5353, DPort: 53}
	other := &packet.Packet{Src: ct4.cli, Dst: ct4.srv, Proto: packet.ProtoUDP, SPort: 5353, DPort: 54}
	check := func(what string, pk *packet.Packet, act uint32, reason compile.Reason) {
		t.Helper()
		r := f.mustRun(pk.Bytes(), "eth0")
		if r.XDPAction != act || r.Reason != reason {
			t.Fatalf("%s: %s action %d reason %s, want %d %s", what, pk, r.XDPAction, r.Reason, act, reason)
		}
	}
	check("classified", q, datapath.XDPDrop, compile.ReasonRuleDrop)
	check("classified", other, datapath.XDPPass, compile.ReasonPolicyAccept)

	dir := f.dp.Dir()
	first := f.dp.StagesPin()
	if got := datapath.StagesPins(dir); len(got) != 1 || got[0] != first || first == "" {
		t.Fatalf("stage pins after load: %v, want [%s]", got, first)
	}
	if err := f.dp.PinProgram(); err != nil {
		t.Fatal(err)
	}
	dp2, err := datapath.Load(dir, f.dp.Limits())
	if err != nil {
		t.Fatal(err)
	}
	defer dp2.Close()
	if got := datapath.StagesPins(dir); len(got) != 2 {
		t.Fatalf("stage pins with two programs loaded: %v, want 2", got)
	}
	if err := dp2.PinProgram(); err != nil {
		t.Fatal(err)
	}
	if got := datapath.StagesPins(dir); len(got) != 1 || got[0] != dp2.StagesPin() || got[0] == first {
		t.Fatalf("stage pins after pinning the newer program: %v, want [%s]", got, dp2.StagesPin())
	}
	check("older program, still held", q, datapath.XDPDrop, compile.ReasonRuleDrop)

	if err := f.dp.DropClassifyStage(); err != nil {
		t.Fatal(err)
	}
	// The live program itself (a trace instance has its own stage):
	// dropped, and counted as no-ruleset.
	for _, pk := range []*packet.Packet{q, other} {
		before, _ := f.dp.ReasonCounters()
		var r datapath.TraceResult
		if err := f.ns.Do(func() (err error) {
			r, err = f.dp.TraceLive(pk.Bytes(), f.ifaces["eth0"], datapath.NoCTState)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		after, _ := f.dp.ReasonCounters()
		if r.XDPAction != datapath.XDPDrop || after[compile.ReasonNoRuleset].Packets != before[compile.ReasonNoRuleset].Packets+1 {
			t.Fatalf("stage gone: %s action %d, no-ruleset %d -> %d; want dropped and counted", pk, r.XDPAction,
				before[compile.ReasonNoRuleset].Packets, after[compile.ReasonNoRuleset].Packets)
		}
	}
}

// TestEgressOutputChain: the tc program runs the OUTPUT rules on packets
// the host sends, and the connections it records let the replies in.
func TestEgressOutputChain(t *testing.T) {
	f := newFixture(t)
	f.installText(`-P INPUT DROP
-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT
-A OUTPUT -p tcp --dport 25 -j DROP
-A OUTPUT -j ACCEPT
`)
	out := tcpPkt(ct4, true, packet.TCPSyn) // the host (srv side) connects out
	var r datapath.TraceResult
	err := f.ns.Do(func() error {
		var err error
		r, err = f.dp.RecordEgress(out.Bytes(), datapath.NoCTState)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.XDPAction != datapath.TCActOK || r.RuleID != f.ids[2] || r.Chain != 2 || r.CTState != compile.CTNew {
		t.Fatalf("egress SYN: %+v, want TC_ACT_OK by rule %d in OUTPUT, NEW", r, f.ids[2])
	}
	// The reply comes in through XDP: ESTABLISHED, accepted by rule 0.
	if r := f.mustRun(tcpPkt(ct4, false, packet.TCPSyn|packet.TCPAck).Bytes(), "eth0"); r.XDPAction != datapath.XDPPass || r.RuleID != f.ids[0] {
		t.Fatalf("reply to an outgoing connection: %+v", r)
	}
	// An unsolicited SYN to the host falls to the INPUT policy.
	f.flushCT(t)
	if r := f.mustRun(tcpPkt(ct4, false, packet.TCPSyn).Bytes(), "eth0"); r.XDPAction != datapath.XDPDrop || r.RuleID != compile.PolicyID(0, false) {
		t.Fatalf("unsolicited SYN: %+v", r)
	}
	smtp := &packet.Packet{Src: ct4.srv, Dst: ct4.cli, Proto: packet.ProtoTCP, SPort: 40001, DPort: 25, TCPFlags: packet.TCPSyn}
	err = f.ns.Do(func() error {
		var err error
		r, err = f.dp.RecordEgress(smtp.Bytes(), datapath.NoCTState)
		return err
	})
	if err != nil || r.XDPAction != datapath.TCActShot || r.RuleID != f.ids[1] {
		t.Fatalf("egress to port 25: %+v %v, want TC_ACT_SHOT by rule %d", r, err, f.ids[1])
	}
}

// TestUpgradeCTStats: an earlier version's pins (fewer conntrack counters,
// none of the maps added since) serve commands, and a load upgrades them: it succeeds (the pinned map
// stays in place until the new program is pinned), and PinProgram puts a
// map of the new size in its place with the old counts carried over.
func TestUpgradeCTStats(t *testing.T) {
	dir := pinnedFresh(t)
	// What an earlier version pinned: four counters, some counted.
	old, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	per := make([]uint64, ebpf.MustPossibleCPU())
	per[0] = 7
	if err := old.Put(uint32(conntrack.StatCreated), per); err != nil {
		t.Fatal(err)
	}
	pin := repin(t, dir, "fw_ct_stats", old)
	// ... and none of the maps added since, which commands do without.
	for _, name := range []string{"fw_ct_evict", "fw_reject_global"} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	od, err := datapath.Open(dir)
	if err != nil {
		t.Fatalf("open an earlier version's pins: %v", err)
	}
	if c, err := od.ConfigInForce(); err != nil || c.RejectGlobalRate != 0 {
		t.Errorf("config in force of an earlier version's program: %+v %v, want no global REJECT budget", c, err)
	}
	if _, err := od.CTFlush(); err != nil {
		t.Errorf("flush with an earlier version's pins: %v", err)
	}
	od.Close()
	dp, err := datapath.Load(dir, datapath.Limits{})
	if err != nil {
		t.Fatalf("load over an earlier version's fw_ct_stats: %v", err)
	}
	defer dp.Close()
	if m, err := ebpf.LoadPinnedMap(pin, nil); err != nil || m.MaxEntries() != 4 {
		t.Fatalf("before PinProgram the pinned map must be the old one: %v", err)
	} else {
		m.Close()
	}
	if err := dp.PinProgram(); err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.LoadPinnedMap(pin, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.MaxEntries() != conntrack.NumStats {
		t.Fatalf("pinned fw_ct_stats has %d counters, want %d", m.MaxEntries(), conntrack.NumStats)
	}
	st, err := dp.CTStats()
	if err != nil || st.Counters["created"] != 7 {
		t.Fatalf("counters %v (%v): want the 7 created carried over", st.Counters, err)
	}
}

// pinnedFresh loads this version's data plane, pins it and closes it: the
// pins an upgrade test then turns into an earlier version's. It returns
// the pin directory.
func pinnedFresh(t *testing.T) string {
	t.Helper()
	dir := testutil.BPFFS(t) + "/xdpfw"
	dp, err := datapath.Load(dir, datapath.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := dp.PinProgram(); err != nil {
		t.Fatal(err)
	}
	dp.Close()
	return dir
}

// repin puts m in the place of the pinned map name in dir (an earlier
// version's layout) and returns the pin's path.
func repin(t *testing.T, dir, name string, m *ebpf.Map) string {
	t.Helper()
	pin := filepath.Join(dir, name)
	if err := os.Remove(pin); err != nil {
		t.Fatal(err)
	}
	if err := m.Pin(pin); err != nil {
		t.Fatal(err)
	}
	return pin
}
