package datapath

import (
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestCheckNATScope: what --nat xdpfw translates and what it refuses, at
// the rule with the hint: nat OUTPUT's DNAT is taken (tc egress); its
// REDIRECT (to 127.0.0.1, over lo), also through a user chain OUTPUT
// jumps to, a translating rule with -o lo, and the nat INPUT chain are
// refused.
func TestCheckNATScope(t *testing.T) {
	for _, c := range []struct {
		lines string
		want  string // "" accepted; else in the error, with its position
	}{
		{"-A OUTPUT -d 10.99.0.1/32 -p tcp --dport 80 -j DNAT --to-destination 10.0.0.2:8080", ""},
		{"-A OUTPUT -p udp -j DNAT --to-destination :53", ""},
		{"-A PREROUTING -p tcp --dport 22 -j REDIRECT --to-ports 2222", ""},
		{"-A OUTPUT -p tcp --dport 80 -j REDIRECT --to-ports 3128", "n.rules:6:1: -j REDIRECT in the nat table's OUTPUT chain"},
		{"-N PROXY\n-A PROXY -p tcp -j REDIRECT --to-ports 3128\n-A OUTPUT -p tcp --dport 80 -j PROXY", "n.rules:7:1: -j REDIRECT in the nat table's OUTPUT chain"},
		{"-A OUTPUT -o lo -p tcp -j DNAT --to-destination 10.0.0.2", "n.rules:6:1: -o lo in the nat table's OUTPUT chain"},
		{"-A INPUT -p tcp -j SNAT --to-source 10.0.0.1", "n.rules:6:1: the nat table's INPUT chain"},
	} {
		text := "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" + c.lines + "\nCOMMIT\n"
		rs, err := rules.Parse("n.rules", []byte(text), rules.ParseOptions{NAT: true})
		if err != nil {
			t.Fatalf("%q: %v", c.lines, err)
		}
		err = CheckNATScope(rs.NAT)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: refused: %v", c.lines, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--nat kernel")):
			t.Errorf("%q: %v; want %q with the hint --nat kernel", c.lines, err, c.want)
		}
	}
}
