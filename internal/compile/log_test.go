package compile

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestReferenceLogs pins down what the reference matcher says logs a
// packet: the LOG rules it matches before the deciding rule, in rule order
// (the first MaxLogPerPacket), and the deciding rule when it has --log.
func TestReferenceLogs(t *testing.T) {
	rs := parse(t, `-P INPUT DROP
-A INPUT -p tcp --dport 22 -j LOG --log-prefix "ssh: "
-A INPUT -s 10.0.0.0/8 -j LOG
-A INPUT -p tcp --dport 22 -j ACCEPT
-A INPUT -p tcp --dport 80 -j DROP --log
-A INPUT -j LOG --log-prefix "policy: "
-A FORWARD -j LOG
`)
	tcp := func(src string, dport uint16) RefPacket {
		return RefPacket{Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr("192.0.2.1"), Proto: 6, L4: true, DPort: dport}
	}
	fwd := tcp("10.1.1.1", 22)
	fwd.Chain = rules.ChainForward
	for _, c := range []struct {
		name string
		p    RefPacket
		rule int
		logs []int
		log  bool
	}{
		{"two LOG rules, then ACCEPT", tcp("10.1.1.1", 22), 2, []int{0, 1}, false},
		{"one LOG rule, then ACCEPT", tcp("192.0.2.9", 22), 2, []int{0}, false},
		{"LOG, then DROP --log", tcp("10.1.1.1", 80), 3, []int{1}, true},
		{"DROP --log alone", tcp("192.0.2.9", 80), 3, nil, true},
		{"LOG rules before the policy", tcp("10.1.1.1", 443), -1, []int{1, 4}, false},
		{"the catch-all LOG before the policy", tcp("192.0.2.9", 443), -1, []int{4}, false},
		{"other chain: its own LOG rule", fwd, -1, []int{5}, false},
	} {
		d := Decide(rs, c.p)
		if d.Rule != c.rule || !slices.Equal(d.Logs, c.logs) || d.Log != c.log || d.LogOverflow {
			t.Errorf("%s: rule %d logs %v (--log %v, overflow %v), want rule %d logs %v (--log %v)",
				c.name, d.Rule, d.Logs, d.Log, d.LogOverflow, c.rule, c.logs, c.log)
		}
	}

	// More LOG rules than one packet logs: the first MaxLogPerPacket.
	var b strings.Builder
	for i := 0; i < MaxLogPerPacket+2; i++ {
		fmt.Fprintf(&b, "-A INPUT -j LOG --log-prefix %d\n", i)
	}
	b.WriteString("-A INPUT -j ACCEPT\n-A INPUT -j LOG\n")
	d := Decide(parse(t, b.String()), tcp("10.0.0.1", 1))
	if want := []int{0, 1, 2, 3}; !slices.Equal(d.Logs, want) || !d.LogOverflow || d.Rule != MaxLogPerPacket+2 {
		t.Errorf("many LOG rules: rule %d logs %v overflow %v, want rule %d logs %v overflow true", d.Rule, d.Logs, d.LogOverflow, MaxLogPerPacket+2, want)
	}
}

// TestCompileLog checks what LOG rules and --log compile to: LOG entries
// that decide nothing, the log flag on deciding entries and on the fast
// rule, and the rate limits with the defaults filled in.
func TestCompileLog(t *testing.T) {
	rs := parse(t, `-A INPUT -m conntrack --ctstate ESTABLISHED -j LOG
-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT --log --log-rate 5/min
-A INPUT -p tcp -m multiport --dports 22,80 -j LOG --log-burst 3
-A INPUT -j DROP --log --log-rate 2/sec --log-burst 7
-A FORWARD -m conntrack --ctstate ESTABLISHED -j ACCEPT --log
-A OUTPUT -j ACCEPT
`)
	tb, warns, err := Compile(Input{RuleSet: rs, IDs: ids(len(rs.Rules)), LogBurst: 9})
	if err != nil || len(warns) > 0 {
		t.Fatalf("compile: %v %v", err, warns)
	}
	for _, e := range tb.Entries {
		wantAct, wantLog := ActAccept, true
		switch e.RuleID - FirstRuleID {
		case 0, 2:
			wantAct, wantLog = ActLog, false // a LOG entry logs by its action, not the flag
		case 3:
			wantAct = ActDrop
		case 5:
			wantLog = false
		}
		if e.Action != wantAct || e.Log != wantLog {
			t.Errorf("entry %s: want action %s, log %v", e, wantAct, wantLog)
		}
	}
	// The ESTABLISHED LOG rule keeps established INPUT packets off the fast
	// path (it must see them); RELATED ones take it, and log (--log).
	in := tb.Roots[0]
	if in.FastStates != 1<<CTRelated || in.FastRuleID != FirstRuleID+1 || !in.FastLog || in.FastFlags() != EntryLog {
		t.Errorf("INPUT root: fast states %#x rule %d log %v; want RELATED only, rule %d, logged", in.FastStates, in.FastRuleID, in.FastLog, FirstRuleID+1)
	}
	if fw := tb.Roots[2]; fw.FastStates != 1<<CTEstablished || !fw.FastLog {
		t.Errorf("FORWARD root: fast states %#x log %v; want ESTABLISHED, logged", fw.FastStates, fw.FastLog)
	}
	want := []LogLimit{
		{RuleID: FirstRuleID, IntervalNS: 1e8, Burst: 9},
		{RuleID: FirstRuleID + 1, IntervalNS: 12e9, Burst: 9},
		{RuleID: FirstRuleID + 2, IntervalNS: 1e8, Burst: 3},
		{RuleID: FirstRuleID + 3, IntervalNS: 5e8, Burst: 7},
		{RuleID: FirstRuleID + 4, IntervalNS: 1e8, Burst: 9},
	}
	if !slices.Equal(tb.Logs, want) {
		t.Errorf("log limits %+v, want %+v", tb.Logs, want)
	}
	// the built-in defaults: 10/sec, burst 20
	tb, _, _ = Compile(Input{RuleSet: parse(t, "-A INPUT -j LOG"), IDs: ids(1)})
	if w := (LogLimit{RuleID: FirstRuleID, IntervalNS: 1e8, Burst: DefaultLogBurst}); len(tb.Logs) != 1 || tb.Logs[0] != w {
		t.Errorf("default log limit %+v, want %+v", tb.Logs, w)
	}

	var b strings.Builder
	for i := 0; i <= MaxLogRules; i++ {
		fmt.Fprintf(&b, "-A INPUT -s 10.%d.%d.0/24 -j DROP --log\n", i/256, i%256)
	}
	many := parse(t, b.String())
	if _, _, err := Compile(Input{RuleSet: many, IDs: ids(len(many.Rules))}); err == nil || !strings.Contains(err.Error(), "at most 4096") {
		t.Errorf("%d logged rules: got %v, want an error naming the bound", MaxLogRules+1, err)
	}
}
