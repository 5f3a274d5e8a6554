package rules

import (
	"fmt"
	"strings"
)

// LineResult is what became of one line of a rule file (Report).
type LineResult uint8

// The results of a line.
const (
	// LineTaken: the line means in xdpfw what it means in iptables.
	LineTaken LineResult = iota
	// LineTranslated: the line loads, and xdpfw does what it asks in its
	// own way, which LineReport.Why says (-j NFLOG: the events go to
	// xdpfw's ring buffer, not to a netlink group).
	LineTranslated
	// LineSkipped: xdpfw cannot run the line, and leaving it out changes
	// nothing else the rules decide: load and apply refuse it unless
	// --skip-unsupported, which leaves it out.
	LineSkipped
	// LineRefused: xdpfw cannot load the line: the file is refused.
	LineRefused
)

// String returns "taken", "translated", "skipped" or "refused".
func (r LineResult) String() string {
	switch r {
	case LineTaken:
		return "taken"
	case LineTranslated:
		return "translated"
	case LineSkipped:
		return "skipped"
	}
	return "refused"
}

// LineReport is what became of one line of a rule file.
type LineReport struct {
	Pos    Pos        // the line (the error's column for a refused line)
	Line   string     // the line as written, trimmed (at most 512 bytes)
	Result LineResult //
	// Rule is the rule the line added, in xdpfw's canonical form (what
	// `xdpfw list` will show), for a taken or translated -A, -I or -R line.
	Rule string
	Why  string // translated: how; skipped, refused: why (and the hint)
}

// Report reads a rule file as Parse does with SkipUnsupported and returns
// what became of each line that is not blank or a comment, in line order,
// and the rule set the lines that load make (nil when a line is refused).
// It changes nothing and fails only on bad options.
func Report(name string, src []byte, opt ParseOptions) ([]LineReport, *RuleSet, error) {
	if err := opt.check(); err != nil {
		return nil, nil, err
	}
	opt.SkipUnsupported = true
	var out []LineReport
	p := parseLines(name, src, opt, &out)
	for _, sk := range p.rs.Skipped {
		// the lines of a table xdpfw cannot load, skipped at its COMMIT
		if i := reportAt(out, sk.Pos.Line); i >= 0 && out[i].Result == LineTaken {
			out[i].Result, out[i].Why = LineSkipped, sk.Why
		}
	}
	for _, e := range p.errs {
		// errors found after their line (a table without COMMIT)
		if i := reportAt(out, e.Pos.Line); i >= 0 && out[i].Result != LineRefused {
			out[i].Result, out[i].Why, out[i].Rule = LineRefused, errText(e), ""
		}
	}
	if len(p.errs) > 0 {
		return out, nil, nil
	}
	return out, p.rs, nil
}

// reportAt finds the report of line n.
func reportAt(out []LineReport, n int) int {
	for i := range out {
		if out[i].Pos.Line == n {
			return i
		}
	}
	return -1
}

// errText is an error's message with its hint, on one line.
func errText(e *Error) string {
	s := e.Msg
	if e.Token != "" {
		s = fmt.Sprintf("%q: %s", Clip(e.Token), s)
	}
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// lineReport says what line n (text) became, from the errors it added to
// the parser's (their count before it) and whether it was in a table xdpfw
// cannot load (other). Lines of such a table are skipped at its COMMIT:
// Report finds them by line then.
func (p *fileParser) lineReport(n int, text string, errs int, other bool) (LineReport, bool) {
	line := strings.TrimSpace(text)
	if line == "" || line[0] == '#' {
		return LineReport{}, false
	}
	lr := LineReport{Pos: Pos{File: p.name, Line: n, Col: 1}, Line: clipTo(line, maxLine), Result: LineTaken}
	if len(p.errs) > errs {
		e := p.errs[errs]
		lr.Pos, lr.Result, lr.Why = e.Pos, LineRefused, errText(e)
		return lr, true
	}
	if k := len(p.rs.Skipped); k > 0 && p.rs.Skipped[k-1].Pos.Line == n {
		lr.Result, lr.Why = LineSkipped, p.rs.Skipped[k-1].Why
		return lr, true
	}
	if r := p.lineRaw(n); r != nil {
		lr.Rule = r.String()
		return lr, true
	}
	if other {
		lr.Why = "nothing to load: a declaration of a table xdpfw does not load, which changes nothing a packet sees"
		return lr, true
	}
	toks, _ := lexLine(text, Pos{})
	if len(toks) > 0 && isCounters(toks[0].text) {
		toks = toks[1:]
	}
	toks = hoistCommand(toks)
	cmd := ""
	if len(toks) > 0 {
		cmd = toks[0].text
	}
	switch cmd {
	case "-D", "--delete":
		lr.Why = "deletes a rule read before, as iptables-restore does"
		return lr, true
	}
	r := p.lineRule(n)
	if r == nil {
		return lr, true
	}
	lr.Rule = r.String()
	switch cmd {
	case "-I", "--insert", "-R", "--replace":
		num := 0
		for i := range p.rs.Rules {
			if p.rs.Rules[i].Chain == r.Chain {
				num++
			}
			if &p.rs.Rules[i] == r {
				break
			}
		}
		lr.Why = fmt.Sprintf("rule %d of %s at this line, as iptables-restore puts it", num, r.Chain)
	}
	if g := r.Target.Group; g != nil {
		lr.Result = LineTranslated
		lr.Why = fmt.Sprintf("-j %s: its events go to xdpfw's log ring buffer (xdpfw log shows %s=%d), not to netlink; "+
			"at most the rule's --log-rate (default 10/s, burst 20)", g.Name(), g.Name(), g.Number())
	}
	return lr, true
}

// lineRule finds the rule line n put in the rule set (-A, -I, -R), if any:
// from the end, where -A puts it.
func (p *fileParser) lineRule(n int) *Rule {
	for i := len(p.rs.Rules) - 1; i >= 0; i-- {
		if r := &p.rs.Rules[i]; r.Pos.Line == n && r.Pos.File == p.name {
			return r
		}
	}
	return nil
}

// lineRaw finds the raw-table rule line n added, if any.
func (p *fileParser) lineRaw(n int) *Rule {
	if k := len(p.rs.Raw); k > 0 {
		if r := &p.rs.Raw[k-1]; r.Pos.Line == n && r.Pos.File == p.name {
			return r
		}
	}
	return nil
}
