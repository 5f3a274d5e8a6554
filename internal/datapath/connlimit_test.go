package datapath_test

import (
	"fmt"
	"testing"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/packet"
)

// connLimitRules: tor-relay.v4's rule (at most 4 connections a source to
// port 9001, here 2), a rule before it that decides some sources first
// (their SYNs count nothing), and an upto rule that lets 15 connections
// of one address in and the rules after it more, so that its key's 16
// slots fill.
const connLimitRules = `-P INPUT ACCEPT
-A INPUT -s 10.1.0.0/16 -j ACCEPT
-A INPUT -p tcp --syn --dport 9001 -m connlimit --connlimit-above 2 -j DROP
-A INPUT -p tcp --syn --dport 7 -m connlimit --connlimit-upto 15 -j ACCEPT
-A INPUT -p tcp -j ACCEPT
`

// TestConnLimit: -m connlimit through the data plane (conntrack and the
// counts its own), packet by packet against the reference with a model
// of the connections the decisions create: two connections of a source
// get in, the third and later are dropped (and their dropped SYNs leave
// nothing counted); a SYN sent again counts once; a reset connection
// (CLOSE) is not counted, nor expired ones; a source an earlier rule
// accepts counts nothing; a new connection that finds 16 counted is
// dropped and counted in LogStats.ConnLimitFull.
func TestConnLimit(t *testing.T) {
	f := newFixture(t)
	f.installText(connLimitRules)
	st := &compile.State{Now: 1e12, Conns: &compile.Conntrack{Tracked: map[compile.ConnID]bool{}}}
	var seq []string
	send := func(p *packet.Packet) {
		t.Helper()
		r := f.mustRun(p.Bytes(), "eth0")
		rp := compile.RefPacketOf(p, "eth0")
		rp.CTState = r.CTState // as conntrack saw it (NEW, ESTABLISHED, INVALID)
		d := compile.DecideAt(f.rs, rp, st)
		want, what := compile.PolicyID(0, false), fmt.Sprint(d.Rule)
		switch {
		case d.Reason == compile.ReasonCTFull:
			want, what = 0, "full"
		case d.Rule >= 0:
			want = f.ids[d.Rule]
		}
		if r.RuleID != want || (what == "full") != (r.Reason == compile.ReasonCTFull) {
			t.Fatalf("%s: decided by rule id %d (%s), the reference says %d (%s)", p, r.RuleID, r.Reason, want, what)
		}
		// conntrack, as the data plane's: an accepted first packet creates
		// its connection, an accepted RST closes it
		id := compile.ConnOf(&rp)
		if d.Verdict.String() == "ACCEPT" && d.Reason != compile.ReasonCTFull {
			if p.TCPFlags&packet.TCPRst != 0 {
				st.Conns.Tracked[id] = true
			} else if rp.CTState == compile.CTNew {
				st.Conns.Tracked[id] = false
			}
		}
		seq = append(seq, what)
	}
	check := func(what, want string) {
		t.Helper()
		if fmt.Sprint(seq) != want {
			t.Errorf("%s: rules %v, want %v", what, seq, want)
		}
		seq = nil
	}
	syn := func(src string, sport, dport uint16) *packet.Packet {
		return v4pkt(packet.ProtoTCP, src, "10.0.0.1", sport, dport)
	}
	for i := range 3 {
		send(syn("10.1.0.1", uint16(40001+i), 9001))
	}
	check("an address an earlier rule accepts", "[0 0 0]")
	for i := range 5 {
		send(syn("10.2.0.1", uint16(40001+i), 9001))
	}
	send(syn("10.2.0.2", 40001, 9001))
	check("two a source, then dropped; another source apart", "[3 3 1 1 1 3]")
	send(syn("10.2.0.1", 40001, 9001))
	check("the first connection's SYN again: counted once", "[3]")
	rst := syn("10.2.0.1", 40002, 9001)
	rst.TCPFlags = packet.TCPRst | packet.TCPAck
	send(rst)
	send(syn("10.2.0.1", 40010, 9001))
	send(syn("10.2.0.1", 40011, 9001))
	check("a reset connection is not counted: one more gets in", "[3 3 1]")
	if err := f.dp.ExpireConnections(); err != nil {
		t.Fatal(err)
	}
	for id := range st.Conns.Tracked {
		delete(st.Conns.Tracked, id)
	}
	send(syn("10.2.0.1", 40020, 9001))
	send(syn("10.2.0.1", 40021, 9001))
	send(syn("10.2.0.1", 40022, 9001))
	check("expired connections are not counted", "[3 3 1]")
	for i := range 17 {
		send(syn("10.3.0.1", uint16(1000+i), 7))
	}
	check("upto 15, then the next rule; the 17th finds 16 counted",
		"[2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 3 full]")
	if s := f.logStats(); s.ConnLimitFull != 1 {
		t.Errorf("LogStats.ConnLimitFull %d, want 1", s.ConnLimitFull)
	}
}
