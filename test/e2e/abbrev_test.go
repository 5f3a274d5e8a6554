package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
	"github.com/xdpfw/xdpfw/testutil"
)

// TestOptionsReadAsIptablesReadsThem: long options abbreviated, and
// options whose meaning depends on the extensions loaded before them
// (`-m multiport --dport` is multiport's --dports), are read by xdpfw as by
// iptables: each rule is given to iptables-legacy in a namespace and to
// xdpfw's parser; both take it or both refuse it, and when taken, xdpfw
// reads it as the canonical rule given (checked by hand against what
// iptables -S lists, which the failure message shows).
func TestOptionsReadAsIptablesReadsThem(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetNS(t)
	ipt := func(line string) (string, bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
		defer cancel()
		if out, err := ns.Exec(ctx, "sh", "-c", "iptables-legacy -F INPUT && iptables-legacy -A INPUT "+line); err != nil {
			return strings.TrimSpace(string(out)), false
		}
		out, err := ns.Exec(ctx, "iptables-legacy", "-S", "INPUT")
		if err != nil {
			t.Fatalf("iptables-legacy -S: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out)), true
	}
	const refused = ""
	for _, c := range []struct{ line, want string }{
		{"-p tcp -m multiport --dport 80,443 -j ACCEPT", "-4 -p tcp -m multiport --dports 80,443 -j ACCEPT"},
		{"-p udp -m multiport --sport 53,5353 -j ACCEPT", "-4 -p udp -m multiport --sports 53,5353 -j ACCEPT"},
		{"-p tcp --dport 22 -m multiport --sports 1,2 -j ACCEPT", "-4 -p tcp --dport 22 -m multiport --sports 1,2 -j ACCEPT"},
		{"-p tcp -m multiport --dports 80,443 -m tcp --dport 1:100 -j DROP", "-4 -p tcp --dport 80 -j DROP"},
		{"-p tcp -m multiport --dports 20:30,80 --dport 25:90 -j DROP", refused}, // both multiport's
		{"-p tcp -m multiport --sports 1,2 --dport 3 -j DROP", refused},          // one multiport, two options
		{"-p tcp -m tcp --sport 5 -m multiport --dport 80 -j DROP", refused},     // tcp's --dport: multiport has none
		{"-p tcp -m multiport --sports 1,2 -m multiport --dport 3 -j DROP", "-4 -p tcp --dport 3 -m multiport --sports 1,2 -j DROP"},
		{"-p tcp --dp 80 -j ACCEPT", "-4 -p tcp --dport 80 -j ACCEPT"},
		{"-p tcp --destination-p 80 -j ACCEPT", "-4 -p tcp --dport 80 -j ACCEPT"},
		{"--proto udp --dport 53 -j ACCEPT", "-4 -p udp --dport 53 -j ACCEPT"},
		{"--sou 10.0.0.0/8 -j DROP", "-s 10.0.0.0/8 -j DROP"},
		{"-p tcp --sou 10.0.0.0/8 -j DROP", "-s 10.0.0.0/8 -p tcp -j DROP"}, // tcp's --source-port is not loaded yet
		{"-p tcp --s 10.0.0.1 -j DROP", refused},
		{"--in eth0 -j DROP", refused}, // --in-interface or --insert
		{"--in-i eth0 -j DROP", "-4 -i eth0 -j DROP"},
		{"-m state --sta NEW -j ACCEPT", "-4 -m conntrack --ctstate NEW -j ACCEPT"},
		{"-m conntrack --ctst NEW -j ACCEPT", refused},     // --ctstate or --ctstatus
		{"-p tcp -m multiport --po 80 -j ACCEPT", refused}, // --ports or --policy
		{"-p tcp -m multiport --por 80 -j ACCEPT", "-4 -p tcp -m multiport --ports 80 -j ACCEPT"},
		{"-p tcp -j REJECT --reject tcp-reset", "-4 -p tcp -j REJECT --reject-with tcp-reset"},
		{"--reject-with tcp-reset -p tcp -j REJECT", refused}, // before -j: not an option yet
		{"-j LOG --log-pref x --log-lev 4", "-4 -j LOG --log-prefix x"},
		{"-m comment --comm x -j ACCEPT", "-4 -m comment --comment x -j ACCEPT"},
		{"-p icmp --icmp 8 -j ACCEPT", "-p icmp --icmp-type 8 -j ACCEPT"},
		{"-p tcp --sy -j DROP", "-4 -p tcp --syn -j DROP"},
		{"-m addrtype --dst BROADCAST -j DROP", refused}, // --dst is iptables' own: not an address
		{"-m addrtype --dst-t BROADCAST -j DROP", "-m addrtype --dst-type BROADCAST -j DROP"},
		{"-m iprange --src-r 10.0.0.1-10.0.0.9 -j DROP", "-m iprange --src-range 10.0.0.1-10.0.0.9 -j DROP"},
		{"-m limit --limit 3/min --limit-b 7 -j ACCEPT", "-4 -m limit --limit 3/min --limit-burst 7 -j ACCEPT"},
		{"-m length --len 100:200 -j DROP", "-4 -m length --length 100:200 -j DROP"},
		{"-m ttl --ttl-e 64 -j DROP", "-m ttl --ttl-eq 64 -j DROP"},
		{"-m ttl --ttl 64 -j DROP", "-m ttl --ttl-eq 64 -j DROP"}, // the old name
		{"-m hashlimit --hashlimit 7/hour --hashlimit-n y -j ACCEPT", "-4 -m hashlimit --hashlimit-upto 7/hour --hashlimit-burst 5 --hashlimit-name y -j ACCEPT"},
	} {
		iptOut, iptOK := ipt(c.line)
		r, err := rules.ParseRuleArgs("INPUT", strings.Fields(c.line), rules.ParseOptions{Family: rules.FamilyIPv4})
		if (err == nil) != iptOK || iptOK != (c.want != refused) {
			t.Errorf("%q: xdpfw error %v; iptables takes it: %v (%s); the test expects %q", c.line, err, iptOK, iptOut, c.want)
			continue
		}
		if iptOK && r.Spec() != c.want {
			t.Errorf("%q: xdpfw reads it as %q, want %q (iptables -S:\n%s)", c.line, r.Spec(), c.want, iptOut)
		}
	}
}
