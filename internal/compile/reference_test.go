package compile

import (
	"net/netip"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestReferenceSemantics pins down the iptables semantics the oracle
// encodes (and the data plane must match).
func TestReferenceSemantics(t *testing.T) {
	rs := parse(t, `-P INPUT DROP -6
-A INPUT -p tcp ! --dport 22 -j DROP
-A INPUT -p tcp -j ACCEPT
-A INPUT -j LOG
-A INPUT -m vlan ! --vlan-id 5 -p udp -j REJECT
-A INPUT -f -j ACCEPT
`)
	tcp := func(dport uint16) RefPacket {
		return RefPacket{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: 6, L4: true, DPort: dport}
	}
	frag := tcp(80)
	frag.L4, frag.Fragment = false, true
	udpTagged := RefPacket{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: 17, L4: true, Tagged: true, VLAN: 5}
	udpUntagged := udpTagged
	udpUntagged.Tagged, udpUntagged.VLAN = false, 0
	v6 := RefPacket{Src: netip.MustParseAddr("::1"), Dst: netip.MustParseAddr("::2"), Proto: 47}
	v4 := RefPacket{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: 47}
	cases := []struct {
		name string
		p    RefPacket
		idx  int
		v    rules.Verdict
	}{
		{"negated port", tcp(80), 0, rules.VerdictDrop},
		{"port 22 passes the negation", tcp(22), 1, rules.VerdictAccept},
		{"non-first fragment: port tests fail, even negated ones", frag, 1, rules.VerdictAccept},
		{"LOG does not decide; ! --vlan-id 5 on tag 5", udpTagged, -1, rules.VerdictAccept},
		{"untagged matches ! --vlan-id 5", udpUntagged, 3, rules.VerdictReject},
		{"per-family policy v6", v6, -1, rules.VerdictDrop},
		{"per-family policy v4", v4, -1, rules.VerdictAccept},
	}
	for _, c := range cases {
		idx, v := Evaluate(rs, c.p)
		if idx != c.idx || v != c.v {
			t.Errorf("%s: got rule %d %s, want %d %s", c.name, idx, v, c.idx, c.v)
		}
	}
}
