package compile

import (
	"net/netip"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestDecideNAT: the nat table's first match by hook, through user chains,
// RETURN and ACCEPT, as iptables walks it.
func TestDecideNAT(t *testing.T) {
	src := `*nat
:PF - [0:0]
-A PREROUTING -s 10.0.0.66 -j ACCEPT
-A PREROUTING -i wan0 -j PF
-A PREROUTING -p tcp --dport 8080 -j REDIRECT --to-ports 3128
-A PF -p udp -j RETURN
-A PF -p tcp --dport 80 -j DNAT --to-destination 192.168.1.10:8080
-A POSTROUTING -o wan0 -j MASQUERADE
COMMIT
`
	rs, err := rules.Parse("f", []byte(src), rules.ParseOptions{Family: rules.FamilyIPv4, NAT: true})
	if err != nil {
		t.Fatal(err)
	}
	pkt := func(in, out, s string, proto uint8, dport uint16) RefPacket {
		return RefPacket{InIface: in, OutIface: out, Src: netip.MustParseAddr(s), Dst: netip.MustParseAddr("10.0.0.1"),
			Proto: proto, L4: true, SPort: 40000, DPort: dport, CTState: CTNew}
	}
	for _, c := range []struct {
		hook rules.Chain
		p    RefPacket
		rule int
		kind rules.NATKind
	}{
		{rules.ChainPrerouting, pkt("wan0", "", "10.0.0.5", 6, 80), 4, rules.NATDNAT},
		{rules.ChainPrerouting, pkt("wan0", "", "10.0.0.66", 6, 80), 0, 0},  // ACCEPT: no translation
		{rules.ChainPrerouting, pkt("wan0", "", "10.0.0.5", 17, 80), -1, 0}, // PF returns, nothing else matches
		{rules.ChainPrerouting, pkt("lan0", "", "10.0.0.5", 6, 8080), 2, rules.NATRedirect},
		{rules.ChainPrerouting, pkt("lan0", "", "10.0.0.5", 6, 80), -1, 0},
		{rules.ChainPostrouting, pkt("", "wan0", "10.0.0.5", 17, 53), 5, rules.NATMasquerade},
		{rules.ChainPostrouting, pkt("", "lan0", "10.0.0.5", 17, 53), -1, 0},
		{rules.ChainInput, pkt("wan0", "", "10.0.0.5", 6, 80), -1, 0},
	} {
		d := DecideNAT(rs.NAT, c.hook, c.p)
		var kind rules.NATKind
		if d.Target != nil {
			kind = d.Target.Kind
		}
		if d.Rule != c.rule || kind != c.kind {
			t.Errorf("%s %+v: rule %d %v, want rule %d %v", c.hook, c.p, d.Rule, kind, c.rule, c.kind)
		}
	}
	if d := DecideNAT(nil, rules.ChainPrerouting, pkt("wan0", "", "10.0.0.5", 6, 80)); d.Rule != -1 || d.Target != nil {
		t.Errorf("no nat table: %+v", d)
	}
}
