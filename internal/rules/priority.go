package rules

import (
	"fmt"
	"strings"
)

// The xdpfw-priority table is xdpfw's own, not the kernel's: its one chain,
// PRIORITY, sorts the packets arriving into two classes before the firewall
// judges them. A packet the first matching rule sends to -j HIGH (or the
// policy, when none matches and it is HIGH) is judged at once on the CPU
// that received it; a BULK one is handed to the bulk CPUs through a cpumap
// and judged there, by the same rules (docs/realtime.md, Priority). The
// class changes where and when a packet is judged, never the verdict.
//
//	*xdpfw-priority
//	:PRIORITY BULK [0:0]
//	-A PRIORITY -p udp --dport 319:320 -j HIGH
//	-A PRIORITY -m dscp --dscp-class EF -j HIGH
//	COMMIT
//
// or, in a native file, "-t xdpfw-priority -A PRIORITY ... -j HIGH" and
// "-t xdpfw-priority -P PRIORITY HIGH". The name is no kernel table's, so
// iptables-restore refuses the section instead of reading it as something
// else, and no kernel target (mangle's CLASSIFY, DSCP, TOS) changes meaning.

// PriorityTable and PriorityChain name the table and its chain.
const (
	PriorityTable = "xdpfw-priority"
	PriorityChain = "PRIORITY"
)

// PriorityOn reports whether rs sorts packets into classes: it has a
// priority rule, or a HIGH priority policy. Without, every packet is
// judged where it arrives, as with no priority table at all.
func (rs *RuleSet) PriorityOn() bool {
	return len(rs.Priority) > 0 || rs.PriorityPolicy == VerdictHigh
}

// PriorityDefault is the class of a packet no priority rule matches.
func (rs *RuleSet) PriorityDefault() Verdict {
	if rs.PriorityPolicy == VerdictHigh {
		return VerdictHigh
	}
	return VerdictBulk
}

// priorityText is the priority table as lines of a native file: its
// policy (when HIGH) and its rules.
func (rs *RuleSet) priorityText() string {
	var b strings.Builder
	if rs.PriorityPolicy == VerdictHigh {
		b.WriteString("-t " + PriorityTable + " -P " + PriorityChain + " HIGH\n")
	}
	for _, r := range rs.Priority {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// PrioritySave is the priority table as an iptables-save section ("" when
// it is off).
func (rs *RuleSet) PrioritySave() string {
	if !rs.PriorityOn() {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%s\n:%s %s [0:0]\n", PriorityTable, PriorityChain, rs.PriorityDefault())
	for _, r := range rs.Priority {
		b.WriteString("-A " + PriorityChain + " " + r.Spec() + "\n")
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// parsePriorityVerdict parses a class: HIGH or BULK.
func parsePriorityVerdict(s string) (Verdict, bool) {
	switch s {
	case "HIGH":
		return VerdictHigh, true
	case "BULK":
		return VerdictBulk, true
	}
	return 0, false
}

const priorityHint = "the " + PriorityTable + " table has one chain, PRIORITY, whose rules end in -j HIGH or -j BULK " +
	"(docs/realtime.md, Priority)"

// openPriority starts a *xdpfw-priority section: it replaces what an
// earlier one said, as iptables-restore flushes a table it reads again.
func (p *fileParser) openPriority(n int, t token) {
	p.table, p.tablePos, p.prio = PriorityTable, p.at(n, t), true
	p.rs.Priority, p.rs.PriorityPolicy = nil, 0
}

// priorityLine handles line n (text, toks) of a *xdpfw-priority section.
func (p *fileParser) priorityLine(n int, text string, toks []token) {
	first := toks[0]
	if isCounters(first.text) && len(toks) > 1 {
		toks = toks[1:]
		first = toks[0]
	}
	switch {
	case first.text == "COMMIT":
		if len(toks) > 1 {
			p.fail(n, toks[1], toks[1].text, "unexpected text after COMMIT", "")
		}
		p.table, p.prio = "", false
	case strings.HasPrefix(first.text, "*"):
		p.tableLine(n, toks) // an error: the table has no COMMIT yet
	case strings.HasPrefix(first.text, ":"):
		name := token{text: strings.TrimPrefix(first.text, ":"), col: first.col + 1}
		if name.text != PriorityChain {
			p.fail(n, name, name.text, "no chain "+Clip(name.text)+" in the "+PriorityTable+" table", priorityHint)
			return
		}
		if len(toks) < 2 {
			p.fail(n, first, "", "chain PRIORITY needs a policy", "write :PRIORITY BULK [0:0]")
			return
		}
		p.priorityPolicy(n, toks[1])
	default:
		p.priorityCommand(n, text, hoistCommand(toks))
	}
}

// priorityPolicy sets the policy of the priority table from t.
func (p *fileParser) priorityPolicy(n int, t token) {
	v, ok := parsePriorityVerdict(t.text)
	if !ok {
		p.fail(n, t, t.text, "the policy of chain PRIORITY must be HIGH or BULK", priorityHint)
		return
	}
	p.rs.PriorityPolicy = v
}

// priorityCommand handles a -A or -P line of the priority table (toks:
// the command, the chain, the rest; a -t option already taken out).
func (p *fileParser) priorityCommand(n int, text string, toks []token) {
	cmd := toks[0]
	if len(toks) < 2 {
		p.fail(n, cmd, "", cmd.text+" needs a chain", "write -A PRIORITY ... -j HIGH")
		return
	}
	if ct := toks[1]; ct.text != PriorityChain {
		p.fail(n, ct, ct.text, "no chain "+Clip(ct.text)+" in the "+PriorityTable+" table", priorityHint)
		return
	}
	switch cmd.text {
	case "-P", "--policy":
		if len(toks) != 3 {
			p.fail(n, cmd, "", "a priority policy line is -P PRIORITY HIGH|BULK", priorityHint)
			return
		}
		p.priorityPolicy(n, toks[2])
		return
	case "-A", "--append":
	default:
		p.fail(n, cmd, cmd.text, cmd.text+" is not supported in the "+PriorityTable+" table: its rules are read in order, with -A",
			"write the priority rules in the order they apply, each with -A")
		return
	}
	opt := p.opt
	opt.prio = true
	r, err := parseRule(p.at(n, cmd), ChainPriority, "", toks[2:], opt)
	if err != nil {
		p.errs = append(p.errs, err)
		return
	}
	if p.opt.Family != FamilyAny && r.Match.Family != p.opt.Family {
		return // a line for the other family's restore
	}
	if r.Target.Verdict != VerdictHigh && r.Target.Verdict != VerdictBulk {
		p.fail(n, cmd, "", "a priority rule needs -j HIGH or -j BULK", priorityHint)
		return
	}
	if err := checkPriorityMatch(&r); err != nil {
		p.errs = append(p.errs, err)
		return
	}
	p.rs.Priority = append(p.rs.Priority, r)
}

// priorityTarget handles -j in the priority table: HIGH or BULK.
func (p *ruleParser) priorityTarget(a token) *Error {
	v, ok := parsePriorityVerdict(a.text)
	if !ok {
		return p.errAt(a, a.text, "-j "+Clip(a.text)+" is not a target of the "+PriorityTable+" table", priorityHint)
	}
	p.r.Target.Verdict = v
	p.target = true
	return nil
}

// checkPriorityMatch refuses what a priority rule cannot test: the class is
// decided as the packet arrives, before conntrack, routing and the rules,
// from the packet's own headers, the interface it came in by (-i) and the
// named sets (-m set).
func checkPriorityMatch(r *Rule) *Error {
	m, t := &r.Match, &r.Target
	bad := ""
	switch {
	case m.UsesConntrack():
		bad = "-m conntrack (or -m state)"
	case m.OutIface != nil:
		bad = "-o"
	case m.Limit != nil:
		bad = "-m limit"
	case m.Recent != nil:
		bad = "-m recent"
	case m.HashLimit != nil:
		bad = "-m hashlimit"
	case m.ConnLimit != nil:
		bad = "-m connlimit"
	case m.MSS != nil:
		bad = "-m tcpmss"
	case m.RT != nil:
		bad = "-m rt"
	case m.Mark != nil:
		bad = "-m mark"
	case m.Fragment != nil:
		bad = "-f"
	case t.Log || t.LogPrefix != "" || t.LogLevel != "" || t.LogFlags != 0 || t.Group != nil:
		bad = "logging"
	default:
		return nil
	}
	return &Error{Pos: r.Pos, Msg: bad + " is not supported in the " + PriorityTable + " table: a packet's class is decided " +
		"as it arrives, from its own headers, before conntrack, routing and the filter rules (fragments are always BULK)",
		Hint: "match the class by -i, addresses, -m set, protocol, ports, ICMP type, -m dscp, -m tos, -m vlan (--vlan-id, --vlan-prio), -m mac, -m length"}
}
