package rules

import (
	"strings"
	"testing"
)

// The xdpfw-priority table parses from an iptables-save section and from
// native lines, prints canonically, and parses back to the same.
func TestPriorityTableSyntax(t *testing.T) {
	save := `*xdpfw-priority
:PRIORITY HIGH [0:0]
-A PRIORITY -p udp -m udp --dport 319:320 -j HIGH
-A PRIORITY -m dscp --dscp-class EF -j HIGH
-A PRIORITY -s 10.0.0.0/8 -j BULK
-A PRIORITY -i eth1 -m vlan --vlan-prio 5 -j HIGH
-A PRIORITY -m set --match-set plc src -j HIGH
COMMIT
*filter
:INPUT DROP [0:0]
-A INPUT -p udp --dport 319 -j ACCEPT
COMMIT
`
	rs, err := Parse("p.rules", []byte(save), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Priority) != 5 || len(rs.Rules) != 1 || rs.PriorityDefault() != VerdictHigh || !rs.PriorityOn() {
		t.Fatalf("parsed %d priority rules, %d rules, default %v", len(rs.Priority), len(rs.Rules), rs.PriorityDefault())
	}
	want := []string{
		"-t xdpfw-priority -A PRIORITY -p udp --dport 319:320 -j HIGH",
		"-t xdpfw-priority -A PRIORITY -m dscp --dscp 0x2e -j HIGH",
		"-t xdpfw-priority -A PRIORITY -s 10.0.0.0/8 -j BULK",
		"-t xdpfw-priority -A PRIORITY -i eth1 -m vlan --vlan-prio 5 -j HIGH",
		"-t xdpfw-priority -A PRIORITY -m set --match-set plc src -j HIGH",
	}
	for i, r := range rs.Priority {
		if r.String() != want[i] || r.Chain != ChainPriority {
			t.Errorf("rule %d: %q (chain %v), want %q", i, r.String(), r.Chain, want[i])
		}
	}
	text := rs.String()
	if !strings.Contains(text, "-t xdpfw-priority -P PRIORITY HIGH\n") {
		t.Errorf("String() lacks the policy:\n%s", text)
	}
	back, err := Parse("back", []byte(text), ParseOptions{})
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if back.String() != text || back.PriorityDefault() != VerdictHigh {
		t.Errorf("round trip:\n%s\nbecame\n%s", text, back.String())
	}
	saved := rs.PrioritySave()
	again, err := Parse("saved", []byte(saved), ParseOptions{})
	if err != nil || again.String() != rs.priorityText() {
		t.Errorf("PrioritySave does not read back (%v):\n%s", err, saved)
	}
	// A native file; a later section replaces an earlier one.
	rs, err = Parse("n.rules", []byte("-t xdpfw-priority -A PRIORITY -s 10.1.0.0/16 -p tcp --dport 502 -j HIGH\n"+
		"*xdpfw-priority\n:PRIORITY BULK [0:0]\n-A PRIORITY -m vlan --vlan-id 7 -j HIGH\nCOMMIT\n"), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Priority) != 1 || rs.PriorityDefault() != VerdictBulk || rs.Priority[0].Match.VLAN == nil {
		t.Errorf("native then section: %q", rs.String())
	}
	if (&RuleSet{}).PriorityOn() || !(&RuleSet{PriorityPolicy: VerdictHigh}).PriorityOn() {
		t.Error("PriorityOn")
	}
}

// What the priority table refuses, each at file:line:col.
func TestPriorityTableErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"*xdpfw-priority\n-A PRIORITY -p tcp -j ACCEPT\nCOMMIT\n", "p:2:23: -j ACCEPT is not a target of the xdpfw-priority table"},
		{"*xdpfw-priority\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n", "p:2:2: no chain PREROUTING in the xdpfw-priority table"},
		{"*xdpfw-priority\n:PRIORITY ACCEPT [0:0]\nCOMMIT\n", "p:2:11: the policy of chain PRIORITY must be HIGH or BULK"},
		{"*xdpfw-priority\n-A PRIORITY -m conntrack --ctstate NEW -j HIGH\nCOMMIT\n", "p:2:1: -m conntrack (or -m state) is not supported in the xdpfw-priority table"},
		{"*xdpfw-priority\n-A PRIORITY -o eth0 -j HIGH\nCOMMIT\n", "p:2:1: -o is not supported"},
		{"*xdpfw-priority\n-A PRIORITY -f -j HIGH\nCOMMIT\n", "p:2:1: -f is not supported"},
		{"*xdpfw-priority\n-A PRIORITY -p udp\nCOMMIT\n", "p:2:1: a priority rule needs -j HIGH or -j BULK"},
		{"*xdpfw-priority\n-I PRIORITY -p udp -j HIGH\nCOMMIT\n", "p:2:1: -I is not supported in the xdpfw-priority table"},
		{"*xdpfw-priority\n-A INPUT -j HIGH\nCOMMIT\n", "p:2:4: no chain INPUT in the xdpfw-priority table"},
		{"*xdpfw-priority\n-A PRIORITY -j HIGH\n", "p:1:1: table xdpfw-priority has no COMMIT"},
		{"-A INPUT -p udp -j HIGH\n", "p:1:20: no chain or target HIGH"},
		{"-t xdpfw-priority -P PRIORITY DROP\n", "p:1:31: the policy of chain PRIORITY must be HIGH or BULK"},
	} {
		_, err := Parse("p", []byte(c.src), ParseOptions{})
		pos, msg, _ := strings.Cut(c.want, ": ")
		if err == nil || !strings.HasPrefix(err.Error(), pos+":") || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: got %v, want %q", c.src, err, c.want)
		}
	}
	// -j HIGH in the filter table says where it belongs.
	_, err := Parse("p", []byte("-A INPUT -j HIGH\n"), ParseOptions{})
	if err == nil || !strings.Contains(err.Error(), "xdpfw-priority table only") {
		t.Errorf("-j HIGH in INPUT: %v", err)
	}
	// A command line cannot name the table.
	if _, err := ParseRuleArgs("INPUT", []string{"-t", "xdpfw-priority", "-j", "ACCEPT"}, ParseOptions{}); err == nil ||
		!strings.Contains(err.Error(), "rule files only") {
		t.Errorf("command line: %v", err)
	}
}
