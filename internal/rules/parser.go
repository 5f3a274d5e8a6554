package rules

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ParseOptions control how rules are read.
type ParseOptions struct {
	// Family is the default family of every rule and policy: FamilyIPv4 for an
	// iptables-save file, FamilyIPv6 for an ip6tables-save file, FamilyAny for
	// a native xdpfw file. A rule that names the other family is an error,
	// except that in a file a line with -4 or -6 for the other family is
	// skipped, as iptables-restore and ip6tables-restore do (one file can
	// serve both).
	Family Family

	// SkipUnsupported leaves out the lines xdpfw understands but cannot
	// run and whose leaving out changes nothing else the rules decide:
	// the rules of the nat, mangle and security tables, those of the raw
	// table but NOTRACK (RuleSet.Raw), and rules
	// whose target only rewrites, marks or reports packets (-j TCPMSS,
	// -j MARK...). Each skipped line is in RuleSet.Skipped, with the
	// reason; without it such a line is an error. A terminating target
	// xdpfw cannot run (-j NFQUEUE) is an error either way.
	SkipUnsupported bool
	// Chains are user chains taken as declared before the text (for a rule
	// read alone whose chains exist in the rule set it belongs to). They
	// are not part of the parsed RuleSet.
	Chains []ChainDecl

	// NAT reads the nat table (a *nat section, -t nat lines) into
	// RuleSet.NAT, for xdpfw to translate (docs/nat.md). Without it the
	// nat table is left to the kernel: its rules are refused or, with
	// SkipUnsupported, skipped (KernelNATNote).
	NAT bool

	restore bool // reading a file (set by Parse), not a command line
	raw     bool // reading a rule of the raw table
	prio    bool // reading a rule of the xdpfw-priority table
	nat     bool // reading a rule of the nat table
}

// commandLine is the file name of the errors of ParseRuleArgs.
const commandLine = "<command line>"

// Parse parses a rule file: -A and -P lines, or iptables-save /
// ip6tables-save output, as iptables-restore reads them: -I, -D and -R lines
// change the rules read so far, in order. Of the tables other than filter,
// an empty one (chain declarations and COMMIT) is accepted; a rule in one is
// an error unless opt.SkipUnsupported. name is used in positions.
//
// It reports every bad line (one error per line) as an ErrorList sorted by
// position, and then returns a nil RuleSet: a file with any error changes
// nothing.
func Parse(name string, src []byte, opt ParseOptions) (*RuleSet, error) {
	if err := opt.check(); err != nil {
		return nil, err
	}
	p := parseLines(name, src, opt, nil)
	if len(p.errs) > 0 {
		p.errs.Sort()
		return nil, p.errs
	}
	return p.rs, nil
}

// parseLines reads src line by line into a fileParser; with a non-nil
// report it records what became of each line (Report).
func parseLines(name string, src []byte, opt ParseOptions, report *[]LineReport) *fileParser {
	opt.restore = true
	p := &fileParser{name: name, opt: opt, rs: &RuleSet{}}
	lines := strings.Split(string(src), "\n")
	for i, line := range lines {
		if report == nil {
			p.line(i+1, line)
			continue
		}
		errs, other := len(p.errs), p.other != nil
		p.line(i+1, line)
		if lr, ok := p.lineReport(i+1, line, errs, other || p.other != nil); ok {
			*report = append(*report, lr)
		}
	}
	p.finish()
	return p
}

// ParseFile reads and parses the rule file at path (see Parse).
func ParseFile(path string, opt ParseOptions) (*RuleSet, error) {
	src, err := readRuleFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, src, opt)
}

// readRuleFile reads the rule file at path (ReadInputFile), its errors
// saying so.
func readRuleFile(path string) ([]byte, error) {
	src, err := ReadInputFile(path)
	if err != nil {
		var re *Error
		if errors.As(err, &re) {
			return nil, err
		}
		return nil, fmt.Errorf("reading rules: %w", err)
	}
	return src, nil
}

// ParseRuleArgs parses one rule given as command-line arguments, e.g. chain
// "INPUT" and args [-p tcp --dport 22 -j ACCEPT] from
// `xdpfw add INPUT -p tcp --dport 22 -j ACCEPT`. Errors (an ErrorList of one)
// are at line 1 of "<command line>", at the column within the arguments
// joined by single spaces.
func ParseRuleArgs(chain string, args []string, opt ParseOptions) (Rule, error) {
	if err := opt.check(); err != nil {
		return Rule{}, err
	}
	start := Pos{File: commandLine, Line: 1, Col: 1}
	toks := make([]token, len(args))
	col := 1
	for i, a := range args {
		toks[i] = token{text: a, col: col}
		col += len(a) + 1
	}
	c, user, err := parseRuleChain(start, token{text: chain, col: 1}, false)
	if err != nil {
		return Rule{}, ErrorList{err}
	}
	r, err := parseRule(start, c, user, toks, opt)
	if err != nil {
		return Rule{}, ErrorList{err}
	}
	return r, nil
}

// check validates the options.
func (o ParseOptions) check() error {
	switch o.Family {
	case FamilyAny, FamilyIPv4, FamilyIPv6:
		return nil
	}
	return fmt.Errorf("rules: invalid family %d in ParseOptions", o.Family)
}

// fileParser holds the state of Parse across lines.
type fileParser struct {
	name string
	opt  ParseOptions
	rs   *RuleSet
	errs ErrorList

	table    string // open table ("*filter" seen, no COMMIT yet)
	tablePos Pos    // where it was opened
	skipping bool   // inside an unknown table: skip to its COMMIT
	// other is the open section of a table xdpfw cannot load (nat,
	// mangle...): its lines are read for what they would do, and skipped.
	other *otherTable
	// filterRules, filterPolicies and filterChains are where the rules,
	// policies and chains of the last *filter section start: a later
	// *filter section replaces them, as iptables-restore does.
	filterRules, filterPolicies, filterChains int
	// rawTables counts the *raw sections; rawStart is where the rules of
	// the last one start in rs.Raw (a later one replaces them).
	rawTables, rawStart int
	// prio: the open section is *xdpfw-priority (priority.go).
	prio bool
	// outer is the rule set while p.rs is its nat table (ParseOptions.NAT:
	// in a *nat section, or on a -t nat line); nil otherwise.
	outer       *RuleSet
	savedFilter [3]int // filterRules, filterPolicies, filterChains while outer is set
}

// at returns the position of token t on line n.
func (p *fileParser) at(n int, t token) Pos { return Pos{File: p.name, Line: n, Col: t.col} }

// fail records an error at token t of line n.
func (p *fileParser) fail(n int, t token, quoted, msg, hint string) {
	p.errs = append(p.errs, &Error{Pos: p.at(n, t), Token: quoted, Msg: msg, Hint: hint})
}

// line parses line n.
func (p *fileParser) line(n int, text string) {
	toks, err := lexLine(text, Pos{File: p.name, Line: n})
	if err != nil {
		p.errs = append(p.errs, err)
		return
	}
	if len(toks) == 0 {
		return
	}
	first := toks[0]
	if p.skipping {
		if first.text == "COMMIT" {
			p.skipping, p.table = false, ""
		}
		return
	}
	if p.other != nil {
		p.otherLine(n, text, toks)
		return
	}
	if p.prio {
		p.priorityLine(n, text, toks)
		return
	}
	counters := strings.HasPrefix(first.text, "[")
	if counters {
		// iptables-save -c puts a rule's counters before its -A.
		if !isCounters(first.text) {
			p.fail(n, first, first.text, "not a counter [PACKETS:BYTES]", "")
			return
		}
		if len(toks) < 2 {
			p.fail(n, first, "", "counters [PACKETS:BYTES] must be followed by -A", "")
			return
		}
		toks = toks[1:]
	}
	toks = hoistCommand(toks)
	first = toks[0]
	if counters && first.text != "-A" && first.text != "--append" {
		p.fail(n, first, "", "counters [PACKETS:BYTES] must be followed by -A", "")
		return
	}
	switch {
	case strings.HasPrefix(first.text, "*"):
		p.tableLine(n, toks)
	case first.text == "COMMIT":
		switch {
		case p.table == "":
			p.fail(n, first, "", "COMMIT without a table", "a table starts with a line *filter")
		case len(toks) > 1:
			p.fail(n, toks[1], toks[1].text, "unexpected text after COMMIT", "")
		}
		p.table = ""
		p.leaveNAT()
	case strings.HasPrefix(first.text, ":"):
		p.chainLine(n, toks)
	case isRuleCommand(first.text):
		p.ruleLine(n, text, toks)
	case first.text == "-P" || first.text == "--policy":
		p.policyLine(n, toks)
	case first.text == "-N" || first.text == "--new-chain":
		p.newChainLine(n, toks)
	case first.text == "-X" || first.text == "--delete-chain":
		p.deleteChainLine(n, toks)
	case first.text == "-F" || first.text == "--flush":
		p.flushLine(n, toks)
	default:
		p.badCommand(n, first)
	}
}

// hoistCommand moves the options written before a line's command (-4 and
// -6, as in one file for both iptables-restore and ip6tables-restore, and
// -t TABLE) behind the command and its chain (and a policy's verdict), where
// the rule and policy parsers read them: "-6 -A INPUT -j DROP" becomes
// "-A INPUT -6 -j DROP". Tokens keep their columns, so errors still point
// into the line as written.
func hoistCommand(toks []token) []token {
	i := 0
	for i < len(toks) {
		switch toks[i].text {
		case "-4", "--ipv4", "-6", "--ipv6":
			i++
			continue
		case "-t", "--table":
			if i+1 < len(toks) {
				i += 2
				continue
			}
		}
		break
	}
	if i == 0 || i == len(toks) {
		return toks
	}
	head := 2 // -A CHAIN
	switch toks[i].text {
	case "-A", "--append":
	case "-I", "--insert", "-D", "--delete", "-R", "--replace":
		if i+2 < len(toks) && isDigits(toks[i+2].text) {
			head = 3 // -I CHAIN N
		}
	case "-P", "--policy":
		head = 3 // -P CHAIN VERDICT
	case "-N", "--new-chain":
	default:
		return toks
	}
	head = min(i+head, len(toks))
	out := append([]token{}, toks[i:head]...)
	out = append(out, toks[:i]...)
	return append(out, toks[head:]...)
}

// tableLine handles "*TABLE".
func (p *fileParser) tableLine(n int, toks []token) {
	t := toks[0]
	name := strings.TrimPrefix(t.text, "*")
	switch {
	case p.table != "":
		p.fail(n, t, "", fmt.Sprintf("table %s starts before the COMMIT of table %s (line %d)",
			Clip(name), p.table, p.tablePos.Line), "end each table with a COMMIT line")
	case name == PriorityTable:
		p.openPriority(n, t)
	case name == "nat" && p.opt.NAT:
		p.table, p.tablePos = name, p.at(n, t)
		if len(toks) > 1 {
			p.fail(n, toks[1], toks[1].text, "unexpected text after the table name", "")
		}
		p.natSection()
	case name != "filter":
		if why, ok := refusedTables[name]; ok {
			p.table, p.tablePos = name, p.at(n, t)
			p.other = &otherTable{why: why, raw: name == "raw"}
			if name == "raw" { // each section replaces the last, as iptables-restore flushes the table
				if p.rawTables > 0 {
					p.rs.Raw = p.rs.Raw[:p.rawStart]
				}
				p.rawStart = len(p.rs.Raw)
				p.rawTables++
			}
			return
		}
		p.fail(n, t, "", fmt.Sprintf("unknown table %s: iptables has filter, nat, mangle, raw and security", Clip(name)),
			"xdpfw loads the filter table")
		p.skipping, p.table = true, name
	case len(toks) > 1:
		p.fail(n, toks[1], toks[1].text, "unexpected text after the table name", "")
		fallthrough // go on as if the line were right
	default:
		p.table, p.tablePos = name, p.at(n, t)
		// iptables-restore flushes a table each time a section names it:
		// a later *filter section replaces an earlier one entirely, its
		// rules and its policies (iptables-nft resets the chains it does
		// not name to ACCEPT; xdpfw's default policy is ACCEPT too).
		if p.rs.Tables > 0 {
			p.rs.Rules, p.rs.Policies = p.rs.Rules[:p.filterRules], p.rs.Policies[:p.filterPolicies]
			p.rs.Chains = p.rs.Chains[:p.filterChains]
		}
		p.filterRules, p.filterPolicies, p.filterChains = len(p.rs.Rules), len(p.rs.Policies), len(p.rs.Chains)
		p.rs.Tables++
	}
}

// finish reports an unterminated table.
func (p *fileParser) finish() {
	if p.table != "" && !p.skipping {
		p.errs = append(p.errs, &Error{Pos: p.tablePos, Msg: "table " + p.table + " has no COMMIT",
			Hint: "iptables-save output ends each table with COMMIT; the file may be truncated"})
	}
	p.leaveNAT()
	p.checkNATHooks()
}

// isCounters reports whether s is "[PACKETS:BYTES]".
func isCounters(s string) bool {
	inner, ok := strings.CutPrefix(s, "[")
	if inner, ok = strings.CutSuffix(inner, "]"); !ok {
		return false
	}
	pk, by, ok := strings.Cut(inner, ":")
	return ok && isDigits(pk) && isDigits(by)
}

// parseChain maps a chain name to a built-in chain (for a policy: user
// chains have none).
func parseChain(pos Pos, t token, nat bool) (Chain, *Error) {
	if c, ok := builtinChain(t.text, nat); ok {
		return c, nil
	}
	pos.Col = t.col
	err := &Error{Pos: pos, Token: t.text, Msg: "only built-in chains have a policy",
		Hint: "xdpfw has the built-in chains INPUT, FORWARD and OUTPUT; a user-defined chain ends with a -j of its own " +
			"(or returns to the chain that jumped to it)"}
	if nat {
		err.Hint = "the nat table has the built-in chains PREROUTING, INPUT, OUTPUT and POSTROUTING"
	}
	switch c, ok := builtinChain(toUpperASCII(t.text), nat); {
	case ok:
		err.Msg, err.Hint = "unknown chain", "chain names are upper case: "+c.String()
	case !nat && (t.text == "PREROUTING" || t.text == "POSTROUTING"):
		err.Msg, err.Hint = "chain "+t.text+" is not in the filter table", notFilterHint
	}
	return 0, err
}

// notFilterHint says where PREROUTING and POSTROUTING rules go.
const notFilterHint = "the raw table's NOTRACK rules are written -t raw -A PREROUTING ... -j NOTRACK (or in a *raw section); " +
	"nat rules -t nat -A PREROUTING|POSTROUTING ... (or in a *nat section), read with --nat xdpfw (docs/nat.md); " +
	"the mangle table is not supported (docs/compat.md)"

// builtinChain maps the name of a built-in chain of the filter table (of
// the nat table when nat) to its Chain.
func builtinChain(s string, nat bool) (Chain, bool) {
	if nat {
		return natChain(s)
	}
	return ParseChain(s)
}

// parseRuleChain reads the chain of a rule: a built-in chain, or else the
// name of a user chain (ChainUser).
func parseRuleChain(pos Pos, t token, nat bool) (Chain, string, *Error) {
	if c, ok := builtinChain(t.text, nat); ok {
		return c, "", nil
	}
	pos.Col = t.col
	if nat && t.text == "FORWARD" {
		return 0, "", &Error{Pos: pos, Token: t.text, Msg: "chain FORWARD is not in the nat table",
			Hint: "the nat table has PREROUTING, INPUT, OUTPUT and POSTROUTING; forwarded traffic is translated in PREROUTING and POSTROUTING"}
	}
	if c, ok := builtinChain(toUpperASCII(t.text), nat); ok {
		return 0, "", &Error{Pos: pos, Token: t.text, Msg: "unknown chain", Hint: "chain names are upper case: " + c.String()}
	}
	if ve := checkChainName(t.text); ve != nil {
		return 0, "", &Error{Pos: pos, Token: ve.tok, Msg: ve.msg, Hint: ve.hint}
	}
	return ChainUser, t.text, nil
}

// declare adds the user chain of token t on line n (-N, or :NAME -).
func (p *fileParser) declare(n int, t token) {
	if ve := checkChainName(t.text); ve != nil {
		p.fail(n, t, ve.tok, ve.msg, ve.hint)
		return
	}
	for _, c := range p.rs.Chains {
		if c.Name == t.text {
			p.fail(n, t, t.text, "chain "+t.text+" already exists", fmt.Sprintf("it was declared at line %d", c.Pos.Line))
			return
		}
	}
	p.rs.Chains = append(p.rs.Chains, ChainDecl{Name: t.text, Pos: p.at(n, t)})
}

// known reports whether the user chain name is declared.
func (p *fileParser) known(name string) bool {
	return p.rs.HasChain(name) || (&RuleSet{Chains: p.opt.Chains}).HasChain(name)
}

// newChainLine handles "-N CHAIN".
func (p *fileParser) newChainLine(n int, toks []token) {
	if p.opt.NAT && !p.opt.nat && tableOf(toks) == "nat" {
		p.inNAT(func() { p.newChainLine(n, withoutTable(toks)) })
		return
	}
	switch {
	case len(toks) < 2:
		p.fail(n, toks[0], "", toks[0].text+" needs a chain name", "write -N NAME")
	case len(toks) > 2:
		p.fail(n, toks[2], toks[2].text, "unexpected text after the chain name", "")
	default:
		p.declare(n, toks[1])
	}
}

// deleteChainLine handles "-X CHAIN": the chain must be empty and no rule
// may jump to it, as in iptables.
func (p *fileParser) deleteChainLine(n int, toks []token) {
	if len(toks) != 2 {
		t := toks[0]
		if len(toks) > 2 {
			t = toks[2]
		}
		p.fail(n, t, "", "write -X NAME: one user-defined chain", "")
		return
	}
	t := toks[1]
	i := slices.IndexFunc(p.rs.Chains, func(c ChainDecl) bool { return c.Name == t.text })
	if i < 0 {
		p.fail(n, t, t.text, "no chain "+t.text+" to delete", "")
		return
	}
	if err := CheckDeleteChain(p.rs, t.text); err != nil {
		p.fail(n, t, t.text, err.Error(), "")
		return
	}
	p.rs.Chains = slices.Delete(p.rs.Chains, i, i+1)
	p.filterChains = min(p.filterChains, len(p.rs.Chains))
}

// CheckDeleteChain says why the user chain name of rs cannot be deleted
// (iptables -X): it holds rules, or a rule jumps to it.
func CheckDeleteChain(rs *RuleSet, name string) error {
	held := 0
	for i := range rs.Rules {
		r := &rs.Rules[i]
		if (r.Target.Verdict == VerdictJump || r.Target.Verdict == VerdictGoto) && r.Target.Chain == name {
			return fmt.Errorf("chain %s is still in use: the rule %s jumps to it", name, r.String())
		}
		if r.Chain == ChainUser && r.UserChain == name {
			held++
		}
	}
	if held > 0 {
		return fmt.Errorf("chain %s is not empty (%d rules); flush it first (-F %s)", name, held, name)
	}
	return nil
}

// flushLine handles "-F [CHAIN]": the chain's rules go (all rules without
// a chain); policies and chains stay.
func (p *fileParser) flushLine(n int, toks []token) {
	if len(toks) > 2 {
		p.fail(n, toks[2], toks[2].text, "unexpected text after the chain name", "")
		return
	}
	keep := func(*Rule) bool { return false }
	if len(toks) == 2 {
		t := toks[1]
		c, user, err := parseRuleChain(p.at(n, t), t, p.opt.nat)
		if err == nil && c == ChainUser && !p.rs.HasChain(user) {
			err = &Error{Pos: p.at(n, t), Token: user, Msg: "no chain " + user + " to flush"}
		}
		if err != nil {
			p.errs = append(p.errs, err)
			return
		}
		keep = func(r *Rule) bool { return r.Chain != c || r.UserChain != user }
	}
	kept := p.rs.Rules[:0]
	for i := range p.rs.Rules {
		if keep(&p.rs.Rules[i]) {
			kept = append(kept, p.rs.Rules[i])
		}
	}
	p.rs.Rules = kept
	p.filterRules = min(p.filterRules, len(p.rs.Rules))
}

// chainCounters checks what follows a chain line's policy (or "-"): at
// most its counters [PACKETS:BYTES].
func (p *fileParser) chainCounters(n int, toks []token) bool {
	if len(toks) > 2 && !isCounters(toks[2].text) {
		p.fail(n, toks[2], toks[2].text, "not a counter [PACKETS:BYTES]", "")
		return false
	}
	if len(toks) > 3 {
		p.fail(n, toks[3], toks[3].text, "unexpected text after the chain's counters", "")
		return false
	}
	return true
}

// chainLine handles ":CHAIN POLICY [PACKETS:BYTES]" of iptables-save, and
// ":NAME - [PACKETS:BYTES]", a user chain.
func (p *fileParser) chainLine(n int, toks []token) {
	t := toks[0]
	name := token{text: strings.TrimPrefix(t.text, ":"), col: t.col + 1}
	if _, builtin := builtinChain(name.text, p.opt.nat); !builtin && len(toks) >= 2 && toks[1].text == "-" {
		if p.chainCounters(n, toks) {
			p.declare(n, name)
		}
		return
	}
	c, err := parseChain(Pos{File: p.name, Line: n}, name, p.opt.nat)
	if err != nil {
		if _, _, uerr := parseRuleChain(Pos{File: p.name, Line: n}, name, p.opt.nat); uerr == nil {
			err.Hint = "declare a user-defined chain with :" + name.text + " - [0:0] (no policy)"
		}
		p.errs = append(p.errs, err)
		return
	}
	if len(toks) >= 2 && toks[1].text == "-" {
		p.fail(n, toks[1], "", "built-in chain "+name.text+" needs a policy", "write :"+name.text+" ACCEPT [0:0]")
		return
	}
	if len(toks) < 2 {
		p.fail(n, t, "", "chain "+name.text+" needs a policy", "write :"+name.text+" ACCEPT [0:0]")
		return
	}
	v, ok := parsePolicyVerdict(toks[1].text)
	if !ok {
		p.fail(n, toks[1], toks[1].text, "a policy must be ACCEPT or DROP", "")
		return
	}
	if p.opt.nat && v != VerdictAccept {
		p.fail(n, toks[1], toks[1].text, natPolicyMsg, natPolicyHint)
		return
	}
	if p.chainCounters(n, toks) && !p.opt.nat { // the nat table's policies are ACCEPT
		p.rs.Policies = append(p.rs.Policies, Policy{Chain: c, Family: p.opt.Family, Verdict: v, Pos: p.at(n, t)})
	}
}

// parsePolicyVerdict parses the verdict of a policy.
func parsePolicyVerdict(s string) (Verdict, bool) {
	switch s {
	case "ACCEPT":
		return VerdictAccept, true
	case "DROP":
		return VerdictDrop, true
	}
	return 0, false
}

// policyLine handles "-P CHAIN ACCEPT|DROP [-4|-6]".
func (p *fileParser) policyLine(n int, toks []token) {
	if len(toks) < 3 {
		p.fail(n, toks[0], "", toks[0].text+" needs a chain and a policy", "write -P INPUT DROP")
		return
	}
	for i := 3; i+1 < len(toks); i++ {
		if t := toks[i]; !t.quoted && (t.text == "-t" || t.text == "--table") && toks[i+1].text == PriorityTable {
			p.priorityCommand(n, "", append(toks[:i:i], toks[i+2:]...))
			return
		}
	}
	if p.opt.NAT && !p.opt.nat && tableOf(toks[3:]) == "nat" {
		p.inNAT(func() { p.policyLine(n, withoutTable(toks)) })
		return
	}
	c, err := parseChain(Pos{File: p.name, Line: n}, toks[1], p.opt.nat)
	if err != nil {
		p.errs = append(p.errs, err)
		return
	}
	v, ok := parsePolicyVerdict(toks[2].text)
	if !ok {
		p.fail(n, toks[2], toks[2].text, "a policy must be ACCEPT or DROP", "")
		return
	}
	if p.opt.nat {
		if v != VerdictAccept {
			p.fail(n, toks[2], toks[2].text, natPolicyMsg, natPolicyHint)
		}
		return // the nat table's policies are ACCEPT
	}
	pol := Policy{Chain: c, Family: p.opt.Family, Verdict: v, Pos: p.at(n, toks[0])}
	fams := 0
	for i := 3; i < len(toks); i++ {
		t := toks[i]
		f, isFamily := parseFamilyFlag(t.text)
		switch {
		case isFamily:
		case t.text == "-t" || t.text == "--table":
			if i+1 == len(toks) {
				p.fail(n, t, "", t.text+" needs a table name", "write -t filter")
				return
			}
			i++
			if ve := checkTable(toks[i].text); ve != nil {
				p.fail(n, toks[i], ve.tok, ve.msg, ve.hint)
				return
			}
			continue
		default:
			p.fail(n, t, t.text, "unexpected text after the policy", "a policy line is -P CHAIN ACCEPT|DROP [-4|-6]")
			return
		}
		if fams++; fams > 1 {
			p.fail(n, t, "", "family given twice", "")
			return
		}
		if p.opt.Family != FamilyAny && p.opt.Family != f {
			// One file for iptables-restore and ip6tables-restore: each
			// skips the lines marked for the other family.
			return
		}
		pol.Family = f
	}
	p.rs.Policies = append(p.rs.Policies, pol)
}

// ruleLine handles "-A CHAIN OPTIONS...", and -I, -D and -R (commands.go).
func (p *fileParser) ruleLine(n int, text string, toks []token) {
	if len(toks) < 2 || strings.HasPrefix(toks[1].text, "-") && !toks[1].quoted {
		p.fail(n, toks[0], "", toks[0].text+" needs a chain", "write "+toks[0].text+" INPUT ... -j ACCEPT")
		return
	}
	// A rule of another table (-t nat -A PREROUTING ...) is refused for
	// its table rather than for its chain.
	for i := 2; i+1 < len(toks); i++ {
		if t := toks[i]; !t.quoted && (t.text == "-t" || t.text == "--table") {
			if toks[i+1].text == "nat" && p.opt.NAT {
				if !p.opt.nat {
					p.inNAT(func() { p.ruleLine(n, text, append(toks[:i:i], toks[i+2:]...)) })
					return
				}
				toks = append(toks[:i:i], toks[i+2:]...)
				break
			}
			if toks[i+1].text == "raw" {
				p.rawRule(n, text, append(toks[:i:i], toks[i+2:]...))
				return
			}
			if toks[i+1].text == PriorityTable {
				p.priorityCommand(n, text, append(toks[:i:i], toks[i+2:]...))
				return
			}
			if why, ok := refusedTables[toks[i+1].text]; ok {
				p.unsupported(n, text, &Error{Pos: p.at(n, toks[i+1]), Token: toks[i+1].text,
					Msg: "table " + toks[i+1].text + " is not supported: " + why.why, Hint: why.hint, Unsupported: why.skippable})
				return
			}
			if ve := checkTable(toks[i+1].text); ve != nil {
				p.fail(n, toks[i+1], ve.tok, ve.msg, ve.hint)
				return
			}
		}
	}
	if err := p.command(n, toks); err != nil {
		p.unsupported(n, text, err)
	}
}

// unsupported records err of line n (text): a skipped line when err is
// Unsupported and the options skip such lines, else an error (whose hint
// then says that the line could be skipped).
func (p *fileParser) unsupported(n int, text string, err *Error) {
	if !err.Unsupported {
		p.errs = append(p.errs, err)
		return
	}
	if p.opt.SkipUnsupported {
		p.rs.Skipped = append(p.rs.Skipped, Skipped{Pos: err.Pos, Line: clipTo(strings.TrimSpace(text), maxLine), Why: err.Msg})
		return
	}
	if err.Hint != "" {
		err.Hint += "; "
	}
	err.Hint += "or --skip-unsupported: load the rest and list each line left out"
	p.errs = append(p.errs, err)
}

// checkTarget checks that the chain rule r (of line n, read from toks)
// jumps or goes to exists, as iptables-restore does: declared before the
// rule.
func (p *fileParser) checkTarget(n int, toks []token, r *Rule) *Error {
	if (r.Target.Verdict != VerdictJump && r.Target.Verdict != VerdictGoto) || p.known(r.Target.Chain) {
		return nil
	}
	at := toks[0]
	for i := 1; i < len(toks); i++ {
		if toks[i].text == r.Target.Chain && !toks[i-1].quoted {
			switch toks[i-1].text {
			case "-j", "--jump", "-g", "--goto":
				at = toks[i]
			}
		}
	}
	return unknownChain(p.at(n, at), r.Target.Chain)
}

// badCommand explains a line that does not start with -A, -P or an
// iptables-save keyword.
func (p *fileParser) badCommand(n int, t token) {
	const only = "a rule file holds -A, -I, -D, -R, -P, -N, -X and -F lines"
	switch t.text {
	case "-E", "--rename-chain":
		p.fail(n, t, "", t.text+" is not allowed here: "+only,
			"declare the chain under its new name (-N NAME) and use that name")
	case "-Z", "--zero":
		p.fail(n, t, "", t.text+" is not allowed here: "+only,
			"counters of unchanged rules survive a load; there is nothing to zero")
	case "iptables", "ip6tables", "xdpfw", "iptables-legacy", "iptables-nft", "ip6tables-legacy", "ip6tables-nft":
		p.fail(n, t, t.text, "a rule file holds -A, -I, -D, -R, -P, -N, -X and -F lines, not commands",
			"leave out the command name: -A INPUT ... -j ACCEPT")
	default:
		p.fail(n, t, t.text, "expected -A, -I, -D, -R, -P, -N, -X, -F or an iptables-save line",
			"a rule file holds -A CHAIN ... -j TARGET and -P CHAIN POLICY lines, and # comments")
	}
}
