package datapath_test

import (
	"net/netip"
	"testing"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// rawRules: DNS untracked both ways (the classic raw-table rules of a
// busy resolver), every other packet tracked; the filter accepts what is
// untracked or tracked and valid, and drops the rest.
const rawRules = `*raw
-A PREROUTING -p udp --dport 53 -j NOTRACK
-A OUTPUT -p udp --sport 53 -j CT --notrack
-A PREROUTING -6 -s fd00::1 -p tcp -j NOTRACK
COMMIT
*filter
-A INPUT -m conntrack --ctstate UNTRACKED -j ACCEPT
-A INPUT -m conntrack --ctstate NEW,ESTABLISHED -p udp -j ACCEPT
-A INPUT -j DROP
-A OUTPUT -m conntrack --ctstate UNTRACKED -j ACCEPT
-A OUTPUT -j DROP
COMMIT
`

// TestRawNotrack: a packet a NOTRACK rule of the raw table matches is
// UNTRACKED (so --ctstate UNTRACKED matches it), even where a trace assumes
// another state, and conntrack records nothing for it; other packets are
// tracked. The Go twin and the reference matcher say the same.
func TestRawNotrack(t *testing.T) {
	f := newFixture(t)
	f.installText(rawRules)
	if len(f.rs.Raw) != 3 || len(f.tables.Raw) != 5 {
		t.Fatalf("raw table: %d rules, %d entries", len(f.rs.Raw), len(f.tables.Raw))
	}
	dns := func(src, dst string, sport, dport uint16) *packet.Packet {
		return &packet.Packet{Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst), Proto: packet.ProtoUDP,
			SPort: sport, DPort: dport, Payload: []byte("q")}
	}
	for _, c := range []struct {
		name   string
		pk     *packet.Packet
		assume int
		state  uint8
		rule   int // the deciding rule's index
	}{
		{"DNS query: untracked", dns("10.200.0.1", "10.200.0.2", 5353, 53), datapath.NoCTState, compile.CTUntracked, 0},
		{"DNS query, IPv6", dns("fd00::2", "fd00::1", 5353, 53), datapath.NoCTState, compile.CTUntracked, 0},
		{"DNS query, trace assuming ESTABLISHED: raw first", dns("10.200.0.1", "10.200.0.2", 5353, 53), int(compile.CTEstablished), compile.CTUntracked, 0},
		{"other UDP: tracked", dns("10.200.0.1", "10.200.0.2", 5353, 54), datapath.NoCTState, compile.CTNew, 1},
		{"TCP from fd00::1: untracked", &packet.Packet{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"),
			Proto: packet.ProtoTCP, SPort: 1, DPort: 2, TCPFlags: packet.TCPAck}, datapath.NoCTState, compile.CTUntracked, 0},
		{"TCP from fd00::3: INVALID", &packet.Packet{Src: netip.MustParseAddr("fd00::3"), Dst: netip.MustParseAddr("fd00::2"),
			Proto: packet.ProtoTCP, SPort: 1, DPort: 2, TCPFlags: packet.TCPRst}, datapath.NoCTState, compile.CTInvalid, 2},
	} {
		f.flushCT(t)
		r, err := f.runAssuming(c.pk.Bytes(), "eth0", c.assume)
		if err != nil {
			t.Fatal(err)
		}
		if r.CTState != c.state || r.RuleID != f.ids[c.rule] {
			t.Errorf("%s: state %s, rule id %d; want %s, rule %d (id %d)", c.name, compile.CTStateName(r.CTState), r.RuleID,
				compile.CTStateName(c.state), c.rule, f.ids[c.rule])
		}
		es, err := f.dp.Connections()
		if err != nil {
			t.Fatal(err)
		}
		if tracked := c.state == compile.CTNew; len(es) != map[bool]int{true: 1, false: 0}[tracked] {
			t.Errorf("%s: connections %v", c.name, es)
		}
		// the Go twin and the reference matcher
		rp := compile.RefPacketOf(c.pk, "eth0")
		rp.CTState = compile.CTNew
		if c.assume >= 0 {
			rp.CTState = uint8(c.assume)
		} else if c.state != compile.CTUntracked {
			rp.CTState = c.state
		}
		if got := f.tables.Classify(&rp, compile.Dev{In: f.ifaces["eth0"]}); got.Entry < 0 || f.tables.Entries[got.Entry].RuleID != f.ids[c.rule] {
			t.Errorf("%s: the Go twin decides entry %d", c.name, got.Entry)
		}
		if d := compile.Decide(f.rs, rp); d.Rule != c.rule {
			t.Errorf("%s: the reference decides rule %d", c.name, d.Rule)
		}
	}

	// OUTPUT: the answer this host sends from port 53 is untracked too
	out := dns("10.200.0.2", "10.200.0.1", 53, 5353)
	f.flushCT(t)
	if r := f.egress(out.Bytes()); r.CTState != compile.CTUntracked || r.RuleID != f.ids[3] {
		t.Errorf("OUTPUT: state %s, rule id %d; want UNTRACKED by rule 3", compile.CTStateName(r.CTState), r.RuleID)
	}
	rp := compile.RefPacketOf(out, "")
	rp.Chain = rules.ChainOutput
	if d := compile.Decide(f.rs, rp); d.Rule != 3 {
		t.Errorf("OUTPUT: the reference decides rule %d", d.Rule)
	}
	// without the raw table, the same packets are tracked
	f.installText("-A INPUT -m conntrack --ctstate UNTRACKED -j DROP\n-A INPUT -j ACCEPT\n")
	if r := f.mustRun(dns("10.200.0.1", "10.200.0.2", 5353, 53).Bytes(), "eth0"); r.CTState != compile.CTNew {
		t.Errorf("no raw table: state %s", compile.CTStateName(r.CTState))
	}
}
