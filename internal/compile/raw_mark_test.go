package compile

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestRawAndMarkAgree: the raw table's NOTRACK rules (which make a packet
// UNTRACKED before the filter sees it) and OUTPUT's -m mark, through the
// compiled tables walked in Go and through the reference matcher, on
// packets from small pools of ports, addresses, states and marks: both
// decide the same rule.
func TestRawAndMarkAgree(t *testing.T) {
	src := `*raw
-A PREROUTING -p udp --dport 53 -j NOTRACK
-A PREROUTING -4 ! -s 10.0.0.0/8 -p tcp -j CT --notrack
-A OUTPUT -p udp --sport 53 -j NOTRACK
COMMIT
-A INPUT -m conntrack --ctstate UNTRACKED -p udp -j ACCEPT
-A INPUT -m conntrack --ctstate UNTRACKED -j DROP
-A INPUT -m conntrack --ctstate NEW -j ACCEPT
-A FORWARD -m conntrack --ctstate UNTRACKED -j REJECT
-A OUTPUT -m mark --mark 0x2a -j DROP
-A OUTPUT -p udp -m mark ! --mark 0x10/0xf0 -j ACCEPT
-A OUTPUT -m conntrack --ctstate UNTRACKED -j DROP
-A OUTPUT -m mark --mark 0x3/0x1 -j REJECT
-P OUTPUT DROP
`
	rs, err := rules.Parse("t", []byte(src), rules.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tb := compileTest(t, rs)
	r := rand.New(rand.NewPCG(7, 7))
	addrs := []string{"10.0.0.1", "192.0.2.1", "2001:db8::1"}
	seen := map[string]bool{}
	for range 20000 {
		src := netip.MustParseAddr(addrs[r.IntN(len(addrs))])
		dst := netip.MustParseAddr("10.9.9.9")
		if src.Is6() {
			dst = netip.MustParseAddr("2001:db8::9")
		}
		p := RefPacket{Chain: rules.Chain(r.IntN(int(rules.NumChains))), InIface: "eth0", Src: src, Dst: dst,
			Proto: []uint8{6, 17, 1}[r.IntN(3)], L4: true, SPort: []uint16{53, 1000}[r.IntN(2)], DPort: []uint16{53, 80}[r.IntN(2)],
			CTState: uint8(r.IntN(5))}
		if p.Chain == rules.ChainOutput {
			p.Mark = []uint32{0, 0x2a, 0x2b, 0x10, 0x1f, 0x3}[r.IntN(6)]
		}
		want := Decide(rs, p)
		c := tb.Classify(&p, testDev(&p))
		wantID, gotID := PolicyID(uint8(p.Chain), p.Src.Is6()), c.Root.RuleID
		if want.Rule >= 0 {
			wantID = uint32(FirstRuleID + want.Rule)
		}
		if c.Entry >= 0 {
			gotID = tb.Entries[c.Entry].RuleID
		}
		if gotID != wantID {
			t.Fatalf("packet %+v: tables decide id %d, the reference id %d", p, gotID, wantID)
		}
		seen[fmt.Sprint(want.Rule)] = true
	}
	for i := -1; i < len(rs.Rules); i++ {
		if i != 7 && !seen[fmt.Sprint(i)] { // rule 7 (--mark 0x3/0x1) never matches
			t.Errorf("no packet was decided by rule %d (%s): the pools miss it", i, func() string {
				if i < 0 {
					return "a policy"
				}
				return rs.Rules[i].String()
			}())
		}
	}
	if seen["7"] {
		t.Error("--mark 0x3/0x1 matched a packet")
	}
}
