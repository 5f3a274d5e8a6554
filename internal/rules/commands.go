package rules

import (
	"fmt"
	"strings"
)

// isRuleCommand reports whether s is a command that adds, inserts, deletes
// or replaces a rule: -A, -I, -D, -R (and their long forms).
func isRuleCommand(s string) bool {
	switch s {
	case "-A", "--append", "-I", "--insert", "-D", "--delete", "-R", "--replace":
		return true
	}
	return false
}

// command applies one -A, -I, -D or -R line (toks: the command, the chain,
// then a rule number and the rule) to the rules read so far, as
// iptables-restore does while it reads:
//
//	-A CHAIN rule          appends
//	-I CHAIN [N] rule      inserts before the Nth rule of CHAIN (default 1;
//	                       N = rules + 1 appends)
//	-D CHAIN N | rule      deletes the Nth rule, or the first whose text is
//	                       the rule's (as iptables-save prints it)
//	-R CHAIN N rule        replaces the Nth rule
//
// A number past the chain's rules, or a -D rule no rule is, is an error, as
// in iptables-restore ("Index of insertion too big", "Bad rule (does a
// matching rule exist in that chain?)").
func (p *fileParser) command(n int, toks []token) *Error {
	cmd := toks[0]
	start := p.at(n, cmd)
	c, user, err := parseRuleChain(start, toks[1], p.opt.nat)
	if err == nil && c == ChainUser && !p.known(user) {
		err = &Error{Pos: p.at(n, toks[1]), Token: user, Msg: "no chain " + user,
			Hint: "declare it before its rules: -N " + user + " (or :" + user + " - [0:0] in an iptables-save file)"}
		switch {
		case p.opt.nat && user == "FORWARD":
			err.Msg, err.Hint = "chain FORWARD is not in the nat table", "the nat table has PREROUTING, INPUT, OUTPUT and POSTROUTING"
		case !p.opt.nat && (user == "PREROUTING" || user == "POSTROUTING"):
			err.Msg, err.Hint = "chain "+user+" is not in the filter table", notFilterHint
		}
	}
	if err != nil {
		return err
	}
	cn := toks[1].text // the chain's name, for messages
	name := cmd.text
	switch name {
	case "--append":
		name = "-A"
	case "--insert":
		name = "-I"
	case "--delete":
		name = "-D"
	case "--replace":
		name = "-R"
	}
	rest := toks[2:]
	num := 0
	var numTok token
	if name != "-A" && len(rest) > 0 && !rest[0].quoted && isDigits(rest[0].text) {
		numTok, rest = rest[0], rest[1:]
		v, ok := parseUint(numTok.text, 1<<31-1)
		if !ok || v == 0 {
			return &Error{Pos: p.at(n, numTok), Token: numTok.text, Msg: "invalid rule number", Hint: "rules are numbered from 1, as xdpfw list shows them"}
		}
		num = v
	}
	switch {
	case name == "-R" && num == 0:
		return &Error{Pos: start, Msg: "-R needs a rule number", Hint: "write -R " + cn + " N ... -j ACCEPT"}
	case name == "-D" && num == 0 && len(rest) == 0:
		return &Error{Pos: start, Msg: "-D needs a rule number or a rule", Hint: "write -D " + cn + " N, or -D " + cn + " followed by the rule"}
	case name == "-D" && num > 0:
		// -D CHAIN N: nothing else but a family, which says for which
		// restore the line is
		for _, t := range rest {
			f, ok := parseFamilyFlag(t.text)
			if !ok {
				return &Error{Pos: p.at(n, t), Token: t.text, Msg: "-D " + cn + " N takes no rule after the number",
					Hint: "delete by number (-D " + cn + " " + numTok.text + ") or by the rule (-D " + cn + " -p tcp ... -j ACCEPT), not both"}
			}
			if p.opt.Family != FamilyAny && f != p.opt.Family {
				return nil // for the other family's restore
			}
		}
		return p.deleteAt(c, user, num, numTok, n)
	}
	r, err := parseRule(start, c, user, rest, p.opt)
	if err == nil {
		err = p.checkTarget(n, toks, &r)
	}
	if err != nil {
		return err
	}
	if p.opt.Family != FamilyAny && r.Match.Family != p.opt.Family {
		return nil // a line for the other family's restore
	}
	if name == "-A" { // the common case: no index of the chain's rules (a file of N -A lines is O(N))
		p.rs.Rules = append(p.rs.Rules, r)
		return nil
	}
	at := p.chainRules(c, user)
	switch name {
	case "-I":
		if num == 0 {
			num = 1
		}
		if num > len(at)+1 {
			return &Error{Pos: p.at(n, numTok), Token: numTok.text,
				Msg:  fmt.Sprintf("index of insertion too big: %s has %d rules at this line", cn, len(at)),
				Hint: fmt.Sprintf("-I %s N inserts before rule N: 1 to %d (%d appends)", cn, len(at)+1, len(at)+1)}
		}
		i := len(p.rs.Rules)
		if num <= len(at) {
			i = at[num-1]
		}
		p.rs.Rules = append(p.rs.Rules[:i], append([]Rule{r}, p.rs.Rules[i:]...)...)
	case "-R":
		if num > len(at) {
			return &Error{Pos: p.at(n, numTok), Token: numTok.text,
				Msg:  fmt.Sprintf("index of replacement too big: %s has %d rules at this line", cn, len(at)),
				Hint: "-R " + cn + " N replaces rule N"}
		}
		p.rs.Rules[at[num-1]] = r
	case "-D":
		for _, i := range at {
			if o := p.rs.Rules[i]; o.Text == r.Text && o.Match.Family == r.Match.Family {
				p.rs.Rules = append(p.rs.Rules[:i], p.rs.Rules[i+1:]...)
				return nil
			}
		}
		return &Error{Pos: start, Msg: fmt.Sprintf("no rule of %s is %q: nothing to delete", cn, r.Text),
			Hint: "-D deletes the first rule whose text is the same as iptables-save prints it; " +
				"a rule that is not there is an error, as in iptables-restore"}
	}
	return nil
}

// deleteAt deletes the num-th rule of chain c (-D CHAIN N).
func (p *fileParser) deleteAt(c Chain, user string, num int, numTok token, n int) *Error {
	at := p.chainRules(c, user)
	cn := c.String()
	if c == ChainUser {
		cn = user
	}
	if num > len(at) {
		return &Error{Pos: p.at(n, numTok), Token: numTok.text,
			Msg:  fmt.Sprintf("index of deletion too big: %s has %d rules at this line", cn, len(at)),
			Hint: "-D " + cn + " N deletes rule N"}
	}
	i := at[num-1]
	p.rs.Rules = append(p.rs.Rules[:i], p.rs.Rules[i+1:]...)
	return nil
}

// chainRules returns the indexes in rs.Rules of chain c's rules (user:
// the user chain's), in order.
func (p *fileParser) chainRules(c Chain, user string) []int {
	var at []int
	for i, r := range p.rs.Rules {
		if r.Chain == c && r.UserChain == user {
			at = append(at, i)
		}
	}
	return at
}

// otherTable is an open section of a table xdpfw cannot load.
type otherTable struct {
	why   refusal
	raw   bool      // the raw table: its NOTRACK rules load (rawRule)
	lines []Skipped // the lines that would change what packets see
}

// otherLine handles line n (text, toks) inside a table xdpfw cannot load.
// Chain declarations with an ACCEPT policy (or none: "-" for a user chain),
// -N, -X, -F, -Z, -E and COMMIT change nothing a packet sees and are taken
// as they are: a section of them only, as iptables-save prints for a table
// nobody uses, loads. Every other line is left out, as an error or, with
// SkipUnsupported, a skipped line.
func (p *fileParser) otherLine(n int, text string, toks []token) {
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
		p.endOther()
		p.table = ""
		return
	case strings.HasPrefix(first.text, "*"):
		p.tableLine(n, toks) // an error: the table has no COMMIT yet
		return
	case strings.HasPrefix(first.text, ":"):
		if len(toks) < 2 || toks[1].text == "ACCEPT" || toks[1].text == "-" {
			return
		}
	}
	switch first.text {
	case "-N", "--new-chain", "-X", "--delete-chain", "-F", "--flush", "-Z", "--zero", "-E", "--rename-chain":
		return
	}
	if p.other.raw && isRuleCommand(first.text) {
		p.rawRule(n, text, hoistCommand(toks))
		return
	}
	p.other.lines = append(p.other.lines, Skipped{Pos: p.at(n, first), Line: clipTo(strings.TrimSpace(text), maxLine),
		Why: "table " + p.table + " is not supported: " + p.other.why.why, Table: p.table})
}

// endOther closes the section of a table xdpfw cannot load: its lines are
// skipped (SkipUnsupported) or one error, at the table's line, says how
// many there are.
func (p *fileParser) endOther() {
	o := p.other
	if o == nil {
		return
	}
	p.other = nil
	if len(o.lines) == 0 {
		return
	}
	if p.opt.SkipUnsupported {
		p.rs.Skipped = append(p.rs.Skipped, o.lines...)
		return
	}
	what := fmt.Sprintf("line %d", o.lines[0].Pos.Line)
	if k := len(o.lines); k > 1 {
		what = fmt.Sprintf("%d lines, from line %d", k, o.lines[0].Pos.Line)
	}
	p.errs = append(p.errs, &Error{Pos: p.tablePos, Unsupported: true,
		Msg: fmt.Sprintf("table %s is not supported: %s (this section has rules: %s)", p.table, o.why.why, what),
		Hint: o.why.hint + "; or --skip-unsupported: load the other tables and list each line left out " +
			"(a section of chain declarations only loads)"})
}

// rawRule handles a line of the raw table (toks: the command, the chain,
// the rule): -A PREROUTING|OUTPUT ... -j NOTRACK (or -j CT --notrack) is
// a rule of RuleSet.Raw; what else the raw table can hold is refused, as
// an Unsupported error (skippable) where leaving it out changes only what
// conntrack tracks.
func (p *fileParser) rawRule(n int, text string, toks []token) {
	cmd := toks[0]
	if len(toks) < 2 {
		p.fail(n, cmd, "", cmd.text+" needs a chain", "write -A PREROUTING ... -j NOTRACK")
		return
	}
	if cmd.text != "-A" && cmd.text != "--append" {
		p.unsupported(n, text, &Error{Pos: p.at(n, cmd), Unsupported: true,
			Msg:  cmd.text + " in the raw table is not supported: xdpfw reads the raw table's rules in order, with -A",
			Hint: "write the raw rules in the order they apply, each with -A"})
		return
	}
	opt := p.opt
	opt.raw = true
	var c Chain
	switch ct := toks[1]; ct.text {
	case "PREROUTING":
		c = ChainPrerouting
	case "OUTPUT":
		c = ChainOutput
	default:
		// read first: what the rule cannot be left out for (a DROP, which
		// decides packets) is refused as in PREROUTING
		if _, err := parseRule(p.at(n, cmd), ChainUser, ct.text, toks[2:], opt); err != nil && !err.Unsupported {
			p.errs = append(p.errs, err)
			return
		}
		p.unsupported(n, text, &Error{Pos: p.at(n, ct), Token: ct.text, Unsupported: true,
			Msg:  "chain " + Clip(ct.text) + " of the raw table is not supported: xdpfw runs the raw table's PREROUTING and OUTPUT",
			Hint: "put the NOTRACK rules in PREROUTING (packets arriving) or OUTPUT (packets this host sends)"})
		return
	}
	r, err := parseRule(p.at(n, cmd), c, "", toks[2:], opt)
	if err != nil {
		p.unsupported(n, text, err)
		return
	}
	if p.opt.Family != FamilyAny && r.Match.Family != p.opt.Family {
		return // a line for the other family's restore
	}
	if r.Target.Verdict != VerdictNotrack { // no -j: the rule only counts (every raw rule here untracks)
		p.unsupported(n, text, &Error{Pos: p.at(n, cmd), Unsupported: true,
			Msg:  "a raw table rule without -j is not supported: in iptables it only counts packets; xdpfw runs -j NOTRACK and -j CT --notrack there",
			Hint: "add -j NOTRACK if the packets should not be tracked, or leave the rule out"})
		return
	}
	p.rs.Raw = append(p.rs.Raw, r)
}
