package rules

import (
	"fmt"
	"slices"
	"strings"
)

// ruleParser parses the options of one rule: everything after "-A CHAIN".
type ruleParser struct {
	pos  Pos // file and line of the rule; errors set Col
	opt  ParseOptions
	toks []token
	next int // index of the next unread token

	r       Rule
	seen    map[string]token      // option slot -> the option that filled it
	modules map[string]*moduleUse // -m modules that have options
	target  bool                  // -j given
	notrack bool                  // -j CT --notrack's option given
	natTo   bool                  // -j DNAT's or SNAT's --to-destination or --to-source given
	other   bool                  // -4/-6 names the other family than opt.Family: skip the rule
	// comment is the last -m comment while it has no --comment: each
	// -m comment takes one, as in iptables.
	comment  *token
	fam      Family          // family fixed by -4/-6 or implied by a selector
	famWhy   string          // what fixed fam, for conflict messages
	checks   []func() *Error // run once every option is read
	stateAt  *token          // the -m limit, -m recent or -m hashlimit, once given (afterState)
	stateMod string          // its module
	// loaded are the extensions whose long options iptables would read
	// at this point of the rule (longOption); protoLoaded: the protocol's
	// match was loaded on an unknown option, as iptables does once
	loaded      map[string]bool
	protoLoaded bool
	multiport   *token // the option of the last -m multiport, once given
	// ctStated has one entry per -m conntrack or -m state match, in order:
	// whether it has a state test (newCTMatch)
	ctStated []bool
	// connLimitSet records that -m connlimit has its limit (connLimitModule)
	connLimitSet func()
	// hashRateSet records -m hashlimit's rate (hashLimitModule)
	hashRateSet func(periodUS uint64, unitMS uint32)
}

// moduleUse records a -m MODULE and whether one of its options followed.
type moduleUse struct {
	tok  token
	used bool
}

// parseRule parses the options of a rule of chain c (ChainUser: the user
// chain user); start is the position of the rule (its -A token).
func parseRule(start Pos, c Chain, user string, toks []token, opt ParseOptions) (Rule, *Error) {
	p := &ruleParser{
		pos:     Pos{File: start.File, Line: start.Line},
		opt:     opt,
		toks:    toks,
		r:       Rule{Chain: c, UserChain: user, Pos: start, NAT: opt.nat},
		seen:    map[string]token{},
		modules: map[string]*moduleUse{},
		loaded:  map[string]bool{},
	}
	for p.next < len(p.toks) {
		if err := p.option(); err != nil {
			return Rule{}, err
		}
		if p.other {
			// iptables-restore stops reading a line at the -6 that says
			// the line is for ip6tables-restore (and the other way round).
			return Rule{Chain: c, UserChain: user, Pos: start, Match: Match{Family: p.fam}}, nil
		}
	}
	if !p.target {
		// as iptables: a rule without -j counts the packets it matches
		// and lets them go on to the next rule
		p.r.Target.Verdict = VerdictNone
	}
	p.r.Match.Family = p.fam
	if m := &p.r.Match; m.L4Header {
		// -m tcp --dport 22: the port test needs the header already (one
		// meaning, one AST: the canonical text drops that -m tcp)
		m.L4Header = false
		m.L4Header = !m.NeedsL4()
	}
	if p.fam == FamilyAny {
		p.r.Match.Family = opt.Family
	}
	var first *Error
	for _, check := range p.checks {
		if err := check(); err != nil && (first == nil || err.Pos.Col < first.Pos.Col) {
			first = err
		}
	}
	if first != nil {
		return Rule{}, first
	}
	p.r.Text = p.r.Spec()
	return p.r, nil
}

// errAt returns an error at token t, quoting the text quoted (if not empty).
func (p *ruleParser) errAt(t token, quoted, msg, hint string) *Error {
	return &Error{Pos: p.at(t), Token: quoted, Msg: msg, Hint: hint}
}

// at is the position of t.
func (p *ruleParser) at(t token) Pos {
	pos := p.pos
	pos.Col = t.col
	return pos
}

// valueErr turns a problem in argument a into an error pointing into a.
func (p *ruleParser) valueErr(a token, ve *valueErr) *Error {
	err := p.errAt(a, ve.tok, ve.msg, ve.hint)
	if !a.quoted {
		err.Pos.Col += ve.off
	}
	return err
}

// option reads one option ([!] OPTION ARGS...) and applies it to the rule.
func (p *ruleParser) option() *Error {
	t := p.toks[p.next]
	p.next++
	invert := false
	if t.isNot() {
		if p.next >= len(p.toks) {
			return p.errAt(t, "", "! must be followed by an option", "")
		}
		invert = true
		t = p.toks[p.next]
		p.next++
		if t.isNot() {
			return p.errAt(t, "", "! given twice", "")
		}
	}
	if !exactOnly(t.text) {
		name, err := p.longOption(t)
		if err != nil {
			return err
		}
		t.text = name
	}
	spec, ok := lookupOption(t.text)
	if !ok {
		return p.unknownOption(t)
	}
	if invert && !spec.negatable {
		return p.errAt(t, "", t.text+" cannot be negated", "remove the ! before "+t.text)
	}
	if spec.module != "" {
		m := p.modules[spec.module]
		if m == nil {
			return p.errAt(t, "", fmt.Sprintf("%s needs -m %s before it", t.text, spec.module),
				fmt.Sprintf("write -m %s %s", spec.module, spec.usage))
		}
		m.used = true
	}
	if t.text != "-m" && t.text != "--match" {
		if err := p.afterState(t, spec); err != nil {
			return err
		}
	}
	if spec.slot != "" {
		if first, dup := p.seen[spec.slot]; dup {
			msg := t.text + " given twice"
			if first.text != t.text {
				msg = fmt.Sprintf("%s and %s both given", first.text, t.text)
			}
			hint := fmt.Sprintf("an option may appear once per rule (the first is at column %d)", first.col)
			if slices.Contains(ctSlots, spec.slot) {
				hint = fmt.Sprintf("an option may appear once per -m %s (the first is at column %d); "+
					"a rule may have several -m conntrack and -m state matches, which a packet must all pass", spec.module, first.col)
			}
			return p.errAt(t, "", msg, hint)
		}
		p.seen[spec.slot] = t
	}
	o := optUse{opt: t, invert: invert}
	for range spec.nargs {
		a, err := p.arg(t, spec)
		if err != nil {
			return err
		}
		o.args = append(o.args, a)
	}
	switch t.text {
	case "-m", "--match", "-j", "--jump":
		p.loadExt(o.args[0].text)
	}
	return spec.parse(p, o)
}

// arg reads the next argument of option o.
func (p *ruleParser) arg(o token, spec optSpec) (token, *Error) {
	missing := func() *Error {
		msg := o.text + " needs an argument"
		if spec.nargs > 1 {
			msg = fmt.Sprintf("%s needs %d arguments", o.text, spec.nargs)
		}
		return p.errAt(o, "", msg, "write "+spec.usage)
	}
	if p.next >= len(p.toks) {
		return token{}, missing()
	}
	a := p.toks[p.next]
	if a.isNot() && spec.negatable {
		example := "..."
		if p.next+1 < len(p.toks) {
			example = p.toks[p.next+1].text
		}
		return token{}, p.errAt(a, "", fmt.Sprintf("! must come before %s, not after it", o.text),
			fmt.Sprintf("write ! %s %s (the form %s ! ... is obsolete)", o.text, example, o.text))
	}
	if !a.quoted && strings.HasPrefix(a.text, "-") {
		if _, isOption := lookupOption(a.text); isOption {
			return token{}, missing()
		}
	}
	p.next++
	return a, nil
}

// unknownOption explains a word that is not a rule option.
func (p *ruleParser) unknownOption(t token) *Error {
	switch {
	case !strings.HasPrefix(t.text, "-") || t.text == "-" || t.quoted:
		return p.errAt(t, t.text, "unexpected argument",
			"each option takes a fixed number of arguments; quote text that contains spaces")
	}
	if r, ok := refusedOptions[t.text]; ok {
		return p.errAt(t, "", t.text+" is not supported: "+r.why, r.hint)
	}
	return p.errAt(t, t.text, "unknown option",
		"supported: -4 -6 -t filter -p -s -d -i --sport --dport -m multiport -m mac -m vlan -m comment -m set "+
			"--tcp-flags --syn --icmp-type --icmpv6-type -f, and -j ACCEPT|DROP|REJECT|LOG")
}

// setFamily records that the rule is for family f because of what (at token
// at, quoting quoted): cur describes it in a message about it, why in a
// message about a later conflict.
func (p *ruleParser) setFamily(f Family, at token, quoted, cur, why string) *Error {
	if p.opt.Family != FamilyAny && p.opt.Family != f {
		return p.errAt(at, quoted,
			fmt.Sprintf("%s conflicts with the default family (%s)", cur, famName(p.opt.Family)),
			defaultFamilyHint(p.opt.Family))
	}
	if p.fam != FamilyAny && p.fam != f {
		return p.errAt(at, quoted, fmt.Sprintf("%s conflicts with %s", cur, p.famWhy),
			"a rule matches either IPv4 or IPv6 packets; write one rule per family")
	}
	if p.fam == FamilyAny {
		p.fam, p.famWhy = f, why
	}
	return nil
}

// famName names a family in messages.
func famName(f Family) string {
	switch f {
	case FamilyIPv4:
		return "IPv4"
	case FamilyIPv6:
		return "IPv6"
	}
	return "IPv4 and IPv6"
}

// defaultFamilyHint explains a conflict with ParseOptions.Family.
func defaultFamilyHint(f Family) string {
	if f == FamilyIPv6 {
		return "these rules are read as IPv6 only (as ip6tables-save output); " +
			"put IPv4 rules in the iptables-save file or in a native xdpfw file"
	}
	return "these rules are read as IPv4 only (as iptables-save output); " +
		"put IPv6 rules in the ip6tables-save file or in a native xdpfw file"
}

// needProto adds a check that the rule has -p proto (not negated).
func (p *ruleParser) needProto(at token, ok func(uint8) bool, msg, hint string) {
	p.checks = append(p.checks, func() *Error {
		if pr := p.r.Match.Proto; pr != nil && !pr.Invert && ok(pr.Proto) {
			return nil
		}
		return p.errAt(at, "", msg, hint)
	})
}

// is returns a predicate matching one protocol number.
func is(proto uint8) func(uint8) bool { return func(p uint8) bool { return p == proto } }

// needPorts adds the check that an option with ports has a protocol with ports.
func (p *ruleParser) needPorts(at token) {
	p.needProto(at, isPortProto, at.text+" needs -p tcp or -p udp",
		"ports exist only with -p tcp, udp, sctp or udplite (not negated)")
}

// needTarget checks that a target option follows -j v.
func (p *ruleParser) needTarget(o optUse, v Verdict) *Error {
	if !p.target {
		return p.errAt(o.opt, "", fmt.Sprintf("%s needs -j %s before it", o.opt.text, v), "")
	}
	if p.r.Target.Verdict != v {
		return p.errAt(o.opt, "", fmt.Sprintf("%s is an option of -j %s, not of -j %s",
			o.opt.text, v, p.r.Target.Verdict), "")
	}
	return nil
}
