package compile

import (
	"net/netip"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestOutIfaceInUserChain: -o in a user chain FORWARD jumps to names the
// host's interfaces, as in FORWARD itself, not only the attached ones: a
// packet forwarded out of an interface xdpfw is not attached to (eth1)
// matches `-o eth+` and not `! -o eth+` there. Found by
// TestIptablesDifferential (seed 4, set forward/2): `! -o eth+` in a user
// chain matched packets leaving by eth1, as if eth+ were eth0 alone.
func TestOutIfaceInUserChain(t *testing.T) {
	attached := map[string]uint32{"eth0": 2, "veth0": 3}
	host := map[string]uint32{"lo": 1, "eth0": 2, "veth0": 3, "eth1": 4}
	for _, src := range []string{
		"-N u\n-A u ! -o eth+ -j DROP\n-A FORWARD -j u\n-A FORWARD -o eth1 -j ACCEPT\n",
		"-N u\n-A u -o eth+ -j REJECT\n-A FORWARD -p 47 -j u\n-A FORWARD -j ACCEPT\n",
		"-N u\n-A u -o eth1 -j REJECT\n-A FORWARD -6 -j u\n",
		"-N u\n-N v\n-A v ! -o eth1 -j DROP\n-A u -g v\n-A FORWARD -j u\n",
	} {
		rs, err := rules.Parse("t.rules", []byte(src), rules.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tb, _, err := Compile(Input{RuleSet: rs, IDs: ids(len(rs.Rules)), Ifaces: attached, HostIfaces: host})
		if err != nil {
			t.Fatal(err)
		}
		for _, out := range []string{"eth1", "eth0", "veth0", ""} {
			for _, a := range [][2]string{{"192.0.2.7", "198.51.100.9"}, {"2001:db8:7::7", "2001:db8::1"}} {
				p := RefPacket{Chain: rules.ChainForward, InIface: "eth0", OutIface: out, Src: netip.MustParseAddr(a[0]), Dst: netip.MustParseAddr(a[1]),
					Proto: 47, TTL: 64, MSS: NoMSS}
				want := Decide(rs, p)
				c := tb.Classify(&p, Dev{In: host[p.InIface], Out: host[p.OutIface]})
				got := c.Root.RuleID
				if c.Entry >= 0 {
					got = tb.Entries[c.Entry].RuleID
				}
				wantID := PolicyID(uint8(p.Chain), p.Src.Is6())
				if want.Rule >= 0 {
					wantID = uint32(FirstRuleID + want.Rule)
				}
				if got != wantID {
					t.Errorf("%s-> out %q %s: rule id %d, the reference (chains walked) %d", src, out, p.Src, got, wantID)
				}
			}
		}
	}
}
