package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// TestLargeRuleSet loads 20,000 rules: refused (nothing loaded) when the
// tables are sized for fewer (--max-rules 16384), accepted without
// --max-rules (a first load sizes the tables for the rule file: 32,768),
// and traffic gets the right verdicts at that size — the one accepting
// rule being last.
func TestLargeRuleSet(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	serveTCP(t, l.srv, 22, 8080)
	lines := []string{"-P INPUT DROP", "-A INPUT -p ipv6-icmp -j ACCEPT"}
	for i := 0; i < 20000; i++ {
		lines = append(lines, fmt.Sprintf("-A INPUT -s 198.%d.%d.0/24 -p tcp --dport %d -j DROP", 18+i/50000, (i/200)%250, 1+i%200))
	}
	lines = append(lines, "-A INPUT -p tcp --dport 22 -j ACCEPT")
	file := writeRules(t, "large.rules", lines...)
	f := newFW(t, l.srv)

	r := f.runWant(1, "load", "-i", l.srvIf, "--max-rules", "16384", file)
	if !strings.Contains(r.stderr, "--max-rules") {
		t.Errorf("a rule set beyond the tables asked for: want a message naming --max-rules: %s", r)
	}
	f.wantNothingLoaded(l.srvIf)

	r = f.mustRun("load", "-i", l.srvIf, file)
	if !strings.Contains(r.stdout, "20002 rules in force") {
		t.Errorf("load output: %s", r)
	}
	if st := f.status(); st.Rules != 20002 || st.Limits.Entries != 32768 {
		t.Errorf("status: %d rules in tables for %d entries, want 20002 in 32768", st.Rules, st.Limits.Entries)
	}
	checkTCP(t, "20,002 rules, ssh last", tcpProbe{from: l.cli, addr: hostPort(l.srv4, 22), ok: true},
		tcpProbe{from: l.cli, addr: hostPort(l.srv4, 8080), ok: false},
		tcpProbe{from: l.cli, addr: hostPort(l.srv6, 22), ok: true})
}

// TestTooManyRules: 200,000 rules, beyond the counter slots of the tables
// asked for, are refused with a message naming --max-rules, and nothing is
// loaded; sizes beyond the bounds or the machine are refused before
// anything is created (exit status 2, no pin made).
func TestTooManyRules(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	lines := make([]string, 0, 200000)
	for i := 0; i < 200000; i++ {
		lines = append(lines, fmt.Sprintf("-A INPUT -s 10.%d.%d.%d -j DROP", i>>16, (i>>8)&255, i&255))
	}
	file := writeRules(t, "huge.rules", lines...)
	f := newFW(t, l.srv)
	r := f.runWant(1, "load", "-i", l.srvIf, "--max-rules", "16384", file)
	if !strings.Contains(r.stderr, "--max-rules") {
		t.Errorf("200k rules: want a message naming --max-rules: %s", r)
	}
	f.wantNothingLoaded(l.srvIf)

	small := writeRules(t, "small.rules", "-A INPUT -p tcp --dport 22 -j ACCEPT")
	for _, args := range [][]string{
		{"--max-rules", "99999999999"}, {"--max-rules", "-5"}, {"--ct-max", "99999999999"}, {"--reject-burst", "0"},
	} {
		r := f.runWant(2, append(append([]string{"load", "-i", l.srvIf}, args...), small)...)
		if !strings.Contains(r.stderr, args[0]) {
			t.Errorf("%v: the error does not name %s: %s", args, args[0], r)
		}
		f.wantNothingLoaded(l.srvIf)
	}
}
