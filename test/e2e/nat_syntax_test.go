package e2e

import (
	"context"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
	"github.com/xdpfw/xdpfw/testutil"
)

// TestNATSyntaxAgainstIptables: each nat table xdpfw reads
// (rules.ParseOptions.NAT) iptables-legacy-restore loads into a namespace's
// kernel too, and what iptables-save prints back parses to the same rules;
// each one xdpfw refuses as iptables does, iptables refuses too (the
// kernel's checks of a target's chain included).
func TestNATSyntaxAgainstIptables(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("iptables-legacy-restore"); err != nil {
		t.Skip("iptables-legacy is not installed")
	}
	run := nsRunner(t, testutil.NewNetNS(t))
	parse := func(src string) (*rules.RuleSet, error) {
		return rules.Parse("t", []byte(src), rules.ParseOptions{Family: rules.FamilyIPv4, NAT: true})
	}
	good := [][]string{
		{"-A PREROUTING -p tcp -m tcp --dport 80 -j DNAT --to-destination 10.0.0.1:8080"},
		{"-A PREROUTING -p tcp --dport 81 -j DNAT --to-destination 10.0.0.1-10.0.0.3:8080-8090 --random --persistent"},
		{"-A PREROUTING -p tcp -j DNAT --to-destination :8080"},
		{"-A PREROUTING -p icmp -j DNAT --to-destination 10.0.0.9"},
		{"-A PREROUTING -p tcp -j REDIRECT --to-ports 3128 --random"},
		{"-A PREROUTING -i lan0 -p udp -j REDIRECT"},
		{":PF - [0:0]", "-A PREROUTING -j PF", "-A PF -p udp -j DNAT --to 10.1.1.1:domain", "-A PF -j RETURN"},
		{":S - [0:0]", "-A POSTROUTING -o wan0 -g S", "-A S -j SNAT --to-source 10.2.2.2"},
		{"-A INPUT -p tcp -j SNAT --to-source 10.9.9.9"},
		{"-A OUTPUT -p tcp -j DNAT --to-destination 10.0.0.1", "-A OUTPUT -p tcp -j REDIRECT --to-ports 1"},
		{"-A POSTROUTING -o eth0 -j MASQUERADE"},
		{"-A POSTROUTING -o eth0 -p tcp -j MASQUERADE --to-ports 1000-2000 --random --random-fully"},
		{"-A POSTROUTING -p tcp -j SNAT --to-source 10.0.0.1:1024-2000 --random-fully"},
		{"-A POSTROUTING -s 10.0.0.0/8 -m conntrack --ctstate DNAT -j ACCEPT"},
	}
	for _, lines := range good {
		file := "*nat\n" + strings.Join(lines, "\n") + "\nCOMMIT\n"
		ours, err := parse(file)
		if err != nil {
			t.Errorf("xdpfw refuses %q: %v", lines, err)
			continue
		}
		if out, err := run(file, "iptables-legacy-restore"); err != nil {
			t.Errorf("iptables refuses %q: %v: %s", lines, err, out)
			continue
		}
		saved, err := run("", "iptables-legacy-save", "-t", "nat")
		if err != nil {
			t.Fatalf("iptables-save: %v: %s", err, saved)
		}
		theirs, err := parse(saved)
		if err != nil {
			t.Errorf("xdpfw cannot read iptables-save's %q: %v", saved, err)
			continue
		}
		if a, b := ours.String(), theirs.String(); a != b {
			t.Errorf("%q means\n%s\nto xdpfw, but iptables-save prints what xdpfw reads as\n%s", lines, a, b)
		}
	}
	bad := [][]string{
		{"-A PREROUTING -j DNAT --to-destination 10.0.0.1:8080"},
		{"-A POSTROUTING -p tcp -j DNAT --to-destination 10.0.0.1"},
		{"-A PREROUTING -p tcp -j SNAT --to-source 10.0.0.1"},
		{"-A PREROUTING -p tcp -j MASQUERADE"},
		{"-A POSTROUTING -p tcp -j REDIRECT"},
		{"-A POSTROUTING -i eth0 -j MASQUERADE"},
		{"-A PREROUTING -o eth0 -j DNAT --to-destination 1.2.3.4"},
		{"-A PREROUTING -j DROP"},
		{"-A PREROUTING -p udp -j DNAT --to-destination 10.0.0.1:80-70"},
		{"-A PREROUTING -p tcp -j REDIRECT --to-ports 5:6"},
		{"-A PREROUTING -j REDIRECT --to-ports 5"},
		{"-A PREROUTING -p udplite -j DNAT --to-destination 1.2.3.4:80"},
		{"-A FORWARD -j ACCEPT"},
		{"-A POSTROUTING -j SNAT"},
		{"-A POSTROUTING -j SNAT --to-source 1.1.1.1 --to-source 1.1.1.2"},
		{"-A PREROUTING -p tcp -j DNAT --to-destination 1.2.3.4 --to-source 1.1.1.1"},
		{"-A PREROUTING -p tcp -j DNAT --to-destination 1.2.3.4:5 --random-fully"},
		{"-A PREROUTING -p tcp -j DNAT --to-destination 1.2.3.4/24"},
		{"-A PREROUTING -p tcp -j DNAT --to-destination 1.2.3.4:65536"},
		{":X - [0:0]", "-A X -j MASQUERADE", "-A PREROUTING -j X"},
		{"-A POSTROUTING -m mac --mac-source 02:00:00:00:00:01 -j MASQUERADE"},
		{":X - [0:0]", "-A X -m mac --mac-source 02:00:00:00:00:01 -j ACCEPT", "-A OUTPUT -j X"},
		{":X - [0:0]", "-A X -p tcp -j DNAT --to-destination 1.1.1.1", "-A INPUT -j X"},
	}
	for _, lines := range bad {
		file := "*nat\n" + strings.Join(lines, "\n") + "\nCOMMIT\n"
		if _, err := parse(file); err == nil {
			t.Errorf("xdpfw reads %q", lines)
		}
		if out, err := run(file, "iptables-legacy-restore"); err == nil {
			t.Errorf("iptables loads %q, which xdpfw refuses (%s)", lines, out)
		}
	}
}

// TestNATRandomAgainstIptables: random nat tables (rules.RandomNAT, what
// iptables-restore loads) load into iptables-legacy as into xdpfw, and
// what iptables-save prints back means the same to xdpfw: every target,
// option and match the generator draws is read as iptables reads it.
func TestNATRandomAgainstIptables(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("iptables-legacy-restore"); err != nil {
		t.Skip("iptables-legacy is not installed")
	}
	run := nsRunner(t, testutil.NewNetNS(t))
	opt := rules.ParseOptions{Family: rules.FamilyIPv4, NAT: true}
	r := rand.New(rand.NewPCG(22, 7))
	for set := range 60 {
		nat := rules.RandomNAT(r, 1+r.IntN(25), rules.RandomKnobs{IptablesOnly: true})
		var b strings.Builder
		b.WriteString("*nat\n")
		for _, c := range nat.Chains {
			b.WriteString(":" + c.Name + " - [0:0]\n")
		}
		for _, x := range nat.Rules {
			b.WriteString("-A " + x.ChainName() + " " + x.Spec() + "\n")
		}
		b.WriteString("COMMIT\n")
		file := b.String()
		ours, err := rules.Parse("random", []byte(file), opt)
		if err != nil {
			t.Fatalf("set %d: xdpfw refuses its own random table: %v\n%s", set, err, file)
		}
		if out, err := run(file, "iptables-legacy-restore"); err != nil {
			t.Fatalf("set %d: iptables refuses it: %v: %s\n%s", set, err, out, file)
		}
		saved, err := run("", "iptables-legacy-save", "-t", "nat")
		if err != nil {
			t.Fatalf("iptables-save: %v: %s", err, saved)
		}
		theirs, err := rules.Parse("saved", []byte(saved), opt)
		if err != nil {
			t.Fatalf("set %d: xdpfw cannot read iptables-save's table: %v\n%s", set, err, saved)
		}
		if a, b := byChain(ours.NAT), byChain(theirs.NAT); a != b {
			t.Fatalf("set %d: xdpfw reads\n%s\nbut iptables-save prints what xdpfw reads as\n%s", set, a, b)
		}
	}
}

// byChain prints a nat table's rules chain by chain (iptables-save's
// order: the built-in chains, then the user chains by name), each chain's
// in order, each rule as its chain and target: what the nat table decides
// (the matches are the filter table's, whose meaning the differential test
// against iptables checks; iptables-save rewrites some of them, -d
// 0.0.0.0/0 left out, --dport 0:65535 as -m tcp).
func byChain(nat *rules.RuleSet) string {
	order := map[string]int{"PREROUTING": 0, "INPUT": 1, "OUTPUT": 2, "POSTROUTING": 3}
	rank := func(name string) string {
		if k, ok := order[name]; ok {
			return string(rune('0' + k))
		}
		return "9" + name
	}
	rs := slices.Clone(nat.Rules)
	slices.SortStableFunc(rs, func(a, b rules.Rule) int { return strings.Compare(rank(a.ChainName()), rank(b.ChainName())) })
	var out strings.Builder
	for _, x := range rs {
		x.Match = rules.Match{}
		out.WriteString(x.ChainName() + " " + x.Spec() + "\n")
	}
	return out.String()
}

// nsRunner returns a function that runs a command in ns with stdin, bounded,
// and returns its output.
func nsRunner(t *testing.T, ns *testutil.NetNS) func(stdin string, args ...string) (string, error) {
	return func(stdin string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.Name}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}
