package firewall

import (
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestNFTNATRules: the rules of nftables' nat chains are counted, the
// chains' declarations and other chains' rules are not (what
// --nat xdpfw refuses to run beside).
func TestNFTNATRules(t *testing.T) {
	for _, c := range []struct {
		out  string
		want int
	}{
		{"table ip nat {\n\tchain POSTROUTING {\n\t\ttype nat hook postrouting priority srcnat; policy accept;\n" +
			"\t\toifname \"lo\" counter packets 0 bytes 0 masquerade\n\t}\n}\n", 1},
		{"table ip nat {\n\tchain POSTROUTING {\n\t\ttype nat hook postrouting priority srcnat; policy accept;\n\t}\n}\n", 0},
		{"table inet filter {\n\tchain input {\n\t\ttype filter hook input priority filter; policy drop;\n\t\tct state established accept\n\t}\n" +
			"\tchain DOCKER {\n\t\tiifname \"docker0\" return\n\t}\n}\n" +
			"table ip x {\n\tchain pre {\n\t\ttype nat hook prerouting priority dstnat;\n\t\ttcp dport 80 dnat to 10.0.0.1\n\t\tudp dport 53 dnat to 10.0.0.2\n\t}\n}\n", 2},
		{"", 0},
	} {
		if got := nftNATRules(c.out); got != c.want {
			t.Errorf("nftNATRules(%q) = %d, want %d", c.out, got, c.want)
		}
	}
}

// TestNATWarnings: with --nat xdpfw, each SNAT rule nat POSTROUTING
// reaches (directly or through a user chain) is named, by its place in
// the file, as translating forwarded connections only; MASQUERADE and
// DNAT are not.
func TestNATWarnings(t *testing.T) {
	src := "*nat\n:PREROUTING ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n:snat - [0:0]\n" +
		"-A PREROUTING -p tcp --dport 80 -j DNAT --to-destination 10.0.0.2\n" +
		"-A POSTROUTING -o wan -j MASQUERADE\n" +
		"-A POSTROUTING -s 10.0.0.0/24 -j snat\n" +
		"-A POSTROUTING -o wan2 -j SNAT --to-source 192.0.2.1\n" +
		"-A snat -j SNAT --to-source 192.0.2.2\n" +
		"COMMIT\n*filter\nCOMMIT\n"
	rs, err := rules.Parse("nat.rules", []byte(src), rules.ParseOptions{NAT: true})
	if err != nil {
		t.Fatal(err)
	}
	got := natWarnings(rs.NAT)
	if len(got) != 2 || !strings.HasPrefix(got[0], "nat.rules:8:") || !strings.HasPrefix(got[1], "nat.rules:9:") {
		t.Fatalf("natWarnings = %q, want the SNAT rules of lines 8 and 9", got)
	}
	for _, w := range got {
		if !strings.Contains(w, "forwarded connections only") || !strings.Contains(w, "--nat kernel") {
			t.Errorf("warning %q does not say what is translated and the way out", w)
		}
	}
	if w := natWarnings(nil); w != nil {
		t.Errorf("natWarnings(nil) = %q", w)
	}
}

// TestNATCTAddrs: with --nat xdpfw, --ctorigdst is refused at its rule
// while the nat table translates destinations, --ctrepldst while it
// translates sources (the kernel tests an address no packet the filter
// judges carries), naming both rules; the other tests, and these where
// the nat table leaves that side alone, load.
func TestNATCTAddrs(t *testing.T) {
	const dnat = "-A PREROUTING -d 192.0.2.1/32 -p tcp --dport 80 -j DNAT --to-destination 10.0.0.2\n"
	const masq = "-A POSTROUTING -o wan -j MASQUERADE\n"
	const ct = "-m conntrack --ctstate NEW,ESTABLISHED"
	for _, c := range []struct {
		nat, filter, want string // want: "" loads, else the error's start
	}{
		{dnat, "-A FORWARD " + ct + " --ctorigdst 192.0.2.1", "nat.rules:8:1: --ctorigdst with --nat xdpfw: not supported while the nat table translates (nat.rules:3:1: -j DNAT)"},
		{masq, "-A INPUT " + ct + " ! --ctrepldst 192.0.2.1", "nat.rules:8:1: --ctrepldst with --nat xdpfw: not supported while the nat table translates (nat.rules:3:1: -j MASQUERADE)"},
		{"-A PREROUTING -p udp --dport 53 -j REDIRECT --to-ports 5353\n", "-A OUTPUT " + ct + " --ctorigdst 10.0.0.0/8", "nat.rules:8:1: --ctorigdst"},
		{masq, "-A FORWARD " + ct + " --ctorigdst 192.0.2.1 --ctorigsrc 10.0.0.0/8 --ctreplsrc 192.0.2.9", ""},
		{dnat, "-A FORWARD " + ct + " --ctrepldst 10.0.0.0/8 --ctorigsrc 10.0.0.0/8 --ctreplsrc 10.0.0.2", ""},
		{"", "-A FORWARD " + ct + " --ctorigdst 192.0.2.1 --ctrepldst 10.0.0.1", ""},
		{":idle - [0:0]\n-A idle -j MASQUERADE\n", "-A FORWARD " + ct + " --ctrepldst 10.0.0.1", ""},
		{":pf - [0:0]\n-A PREROUTING -j pf\n-A pf -p tcp -j DNAT --to-destination 10.0.0.2\n", "-A FORWARD " + ct + " --ctorigdst 10.0.0.1", "nat.rules:10:1: --ctorigdst with --nat xdpfw: not supported while the nat table translates (nat.rules:5:1: -j DNAT)"},
	} {
		src := "*nat\n:PREROUTING ACCEPT [0:0]\n" + c.nat + ":POSTROUTING ACCEPT [0:0]\nCOMMIT\n*filter\n:INPUT ACCEPT [0:0]\n" + c.filter + "\nCOMMIT\n"
		if c.nat == "" {
			src = strings.Replace(src, ":POSTROUTING", "#\n:POSTROUTING", 1) // the filter rule on line 8 still
		}
		rs, err := rules.Parse("nat.rules", []byte(src), rules.ParseOptions{NAT: true})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		err = natCTAddrs(rs, rs.NAT)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q with %q: %v; want it loaded", c.filter, c.nat, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want) || !strings.Contains(err.Error(), "--nat kernel")):
			t.Errorf("%q with %q: %v; want %q... and the way out", c.filter, c.nat, err, c.want)
		}
	}
	if err := natCTAddrs(&rules.RuleSet{}, nil); err != nil {
		t.Errorf("natCTAddrs without a nat table: %v", err)
	}
}
