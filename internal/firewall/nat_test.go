package firewall

import "testing"

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
