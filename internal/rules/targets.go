package rules

import (
	"fmt"
	"strings"
)

// optJump handles -j TARGET.
func (p *ruleParser) optJump(o optUse) *Error {
	a := o.args[0]
	switch a.text {
	case "ACCEPT":
		p.r.Target.Verdict = VerdictAccept
	case "DROP":
		p.r.Target.Verdict = VerdictDrop
	case "REJECT":
		p.r.Target.Verdict = VerdictReject
	case "LOG":
		p.r.Target.Verdict = VerdictLog
	case "RETURN":
		p.r.Target.Verdict = VerdictReturn
	default:
		if isIptablesTarget(a.text) {
			return p.badTarget(a)
		}
		if ve := checkChainName(a.text); ve != nil {
			return p.valueErr(a, ve)
		}
		// A user chain; Parse checks that it exists (a command line's
		// target is checked against the chains in force).
		p.r.Target.Verdict, p.r.Target.Chain = VerdictJump, a.text
	}
	p.target = true
	return nil
}

// CheckChainName says why s cannot name a user-defined chain (nil: it can).
func CheckChainName(s string) error {
	if ve := checkChainName(s); ve != nil {
		return fmt.Errorf("bad chain name %q: %s", s, ve.msg)
	}
	return nil
}

// checkChainName checks the name of a user-defined chain as iptables does:
// at most MaxChainName bytes, no blank, not an option, not a target's name.
func checkChainName(s string) *valueErr {
	switch {
	case s == "":
		return &valueErr{msg: "empty chain name"}
	case len(s) > MaxChainName:
		return &valueErr{tok: Clip(s), msg: fmt.Sprintf("chain name longer than %d characters", MaxChainName)}
	case s[0] == '-' || s[0] == '!':
		return &valueErr{tok: s, msg: "a chain name cannot start with - or !"}
	case strings.ContainsAny(s, " \t\n\r\f\v"):
		return &valueErr{tok: Clip(s), msg: "a chain name cannot contain blanks"}
	}
	if _, builtin := ParseChain(s); builtin {
		return &valueErr{tok: s, msg: s + " is a built-in chain", hint: "built-in chains cannot be jumped to"}
	}
	switch s {
	case "ACCEPT", "DROP", "REJECT", "LOG", "RETURN":
		return &valueErr{tok: s, msg: s + " is a target, not a chain name"}
	}
	if isIptablesTarget(s) {
		return &valueErr{tok: s, msg: s + " is an iptables target, not a chain name"}
	}
	return nil
}

// supportedTargets is the hint given for an unsupported target.
const supportedTargets = "supported targets: ACCEPT, DROP, REJECT, LOG, RETURN and user-defined chains"

// badTarget explains an unsupported -j target.
func (p *ruleParser) badTarget(a token) *Error {
	return p.errAt(a, a.text, fmt.Sprintf("target %s is not supported", a.text), supportedTargets)
}

// unknownChain explains a -j or -g to a chain that does not exist (at
// token a of a rule at pos).
func unknownChain(pos Pos, name string) *Error {
	err := &Error{Pos: pos, Token: name, Msg: "no chain or target " + name,
		Hint: "declare the chain before the rule: -N " + name + " (or :" + name + " - [0:0] in an iptables-save file)"}
	switch up := toUpperASCII(name); up {
	case "ACCEPT", "DROP", "REJECT", "LOG", "RETURN":
		err.Hint = "targets are upper case: -j " + up + "; or declare a chain " + name + " with -N " + name
	}
	return err
}

// toUpperASCII upper-cases ASCII letters.
func toUpperASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// optGoto handles -g CHAIN.
func (p *ruleParser) optGoto(o optUse) *Error {
	a := o.args[0]
	if ve := checkChainName(a.text); ve != nil {
		return p.valueErr(a, ve)
	}
	p.r.Target.Verdict, p.r.Target.Chain = VerdictGoto, a.text
	p.target = true
	return nil
}

// optRejectWith handles -j REJECT --reject-with TYPE.
func (p *ruleParser) optRejectWith(o optUse) *Error {
	if err := p.needTarget(o, VerdictReject); err != nil {
		return err
	}
	a := o.args[0]
	canon, fam, ve := parseRejectWith(a.text)
	if ve != nil {
		return p.valueErr(a, ve)
	}
	p.r.Target.RejectWith = canon
	if canon == portUnreach {
		p.checks = append(p.checks, func() *Error {
			p.r.Target.RejectWith = portUnreachFor(p.r.Match.Family)
			return nil
		})
		return nil
	}
	if canon == "tcp-reset" {
		p.needProto(a, is(protoTCP), "--reject-with tcp-reset needs -p tcp", "")
		return nil
	}
	p.checks = append(p.checks, func() *Error {
		switch rf := p.r.Match.Family; {
		case rf == FamilyAny:
			return p.errAt(a, a.text, fmt.Sprintf("%s reject type in a rule for both IPv4 and IPv6", famName(fam)),
				fmt.Sprintf("add %s, or leave out --reject-with so that each family gets its default",
					familyFlag(fam)))
		case rf != fam:
			return p.errAt(a, a.text, fmt.Sprintf("%s reject type in an %s rule", famName(fam), famName(rf)),
				rejectHint(rf))
		}
		return nil
	})
	return nil
}

// rejectHint lists the --reject-with types of a family.
func rejectHint(f Family) string {
	if f == FamilyIPv6 {
		return "IPv6 rules use icmp6-no-route, icmp6-adm-prohibited, icmp6-addr-unreachable, " +
			"icmp6-port-unreachable or tcp-reset"
	}
	return "IPv4 rules use icmp-net-unreachable, icmp-host-unreachable, icmp-port-unreachable, " +
		"icmp-proto-unreachable, icmp-net-prohibited, icmp-host-prohibited, icmp-admin-prohibited or tcp-reset"
}

// needLogTarget checks that a log option (--log-prefix, --log-level,
// --log-rate, --log-burst) follows -j LOG, or -j ACCEPT|DROP|REJECT with
// --log anywhere after it.
func (p *ruleParser) needLogTarget(o optUse) *Error {
	if !p.target {
		return p.errAt(o.opt, "", o.opt.text+" needs -j LOG before it",
			"or -j ACCEPT, DROP or REJECT with --log: the rule then logs the packets it decides")
	}
	if v := p.r.Target.Verdict; v != VerdictLog {
		p.checks = append(p.checks, func() *Error {
			if p.r.Target.Log {
				return nil
			}
			return p.errAt(o.opt, "", fmt.Sprintf("%s on -j %s needs --log", o.opt.text, v),
				fmt.Sprintf("write -j %s --log %s ... to log the packets the rule decides, or use a -j LOG rule", v, o.opt.text))
		})
	}
	return nil
}

// optLog handles --log on -j ACCEPT, DROP or REJECT.
func (p *ruleParser) optLog(o optUse) *Error {
	switch {
	case !p.target:
		return p.errAt(o.opt, "", "--log needs -j ACCEPT, DROP or REJECT before it", "")
	case p.r.Target.Verdict == VerdictLog:
		return p.errAt(o.opt, "", "-j LOG logs already; --log is an option of -j ACCEPT, DROP and REJECT",
			"remove --log")
	}
	p.r.Target.Log = true
	return nil
}

// optLogPrefix handles --log-prefix TEXT.
func (p *ruleParser) optLogPrefix(o optUse) *Error {
	if err := p.needLogTarget(o); err != nil {
		return err
	}
	a := o.args[0]
	if ve := checkText(a.text, "log prefix", maxLogPrefix); ve != nil {
		return p.valueErr(a, ve)
	}
	p.r.Target.LogPrefix = a.text
	return nil
}

// optLogLevel handles --log-level LEVEL.
func (p *ruleParser) optLogLevel(o optUse) *Error {
	if err := p.needLogTarget(o); err != nil {
		return err
	}
	a := o.args[0]
	level, ve := parseLogLevel(a.text)
	if ve != nil {
		return p.valueErr(a, ve)
	}
	p.r.Target.LogLevel = level
	return nil
}

// optLogRate handles --log-rate N/UNIT.
func (p *ruleParser) optLogRate(o optUse) *Error {
	if err := p.needLogTarget(o); err != nil {
		return err
	}
	a := o.args[0]
	r, ve := parseLogRate(a.text)
	if ve != nil {
		return p.valueErr(a, ve)
	}
	p.r.Target.LogRate = r
	return nil
}

// optLogBurst handles --log-burst N.
func (p *ruleParser) optLogBurst(o optUse) *Error {
	if err := p.needLogTarget(o); err != nil {
		return err
	}
	a := o.args[0]
	n, ok := parseUint(a.text, MaxLogBurst)
	if !ok || n < 1 {
		return p.errAt(a, a.text, "bad --log-burst", fmt.Sprintf("the events a quiet rule may log at once: 1 to %d", MaxLogBurst))
	}
	p.r.Target.LogBurst = uint32(n)
	return nil
}
