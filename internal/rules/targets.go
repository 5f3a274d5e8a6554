package rules

import (
	"fmt"
	"strings"
)

// optJump handles -j TARGET.
func (p *ruleParser) optJump(o optUse) *Error {
	a := o.args[0]
	if p.opt.prio {
		return p.priorityTarget(a)
	}
	if p.rawTarget(a) {
		p.target = true
		return nil
	}
	if took, err := p.natJump(a); took {
		p.target = err == nil
		return err
	}
	switch a.text {
	case "ACCEPT":
		p.r.Target.Verdict = VerdictAccept
	case "DROP":
		p.r.Target.Verdict = VerdictDrop
	case "REJECT":
		p.r.Target.Verdict = VerdictReject
	case "LOG":
		p.r.Target.Verdict = VerdictLog
	case "NFLOG", "ULOG":
		p.r.Target.Verdict = VerdictLog
		p.r.Target.Group = &LogGroup{ULOG: a.text == "ULOG"}
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
	if p.opt.raw && p.r.Target.Verdict != VerdictNotrack {
		return p.rawOther(a, "-j")
	}
	p.target = true
	return nil
}

// rawOther refuses a target of the raw table other than NOTRACK (a, after
// -j or -g). DROP and REJECT decide packets: refused. The others only
// change which packets the raw table's NOTRACK rules reach (ACCEPT,
// RETURN, a jump or goto: the kernel's conntrack tracks them either way)
// or report them (LOG): skippable, as a NOTRACK rule of a user chain is.
func (p *ruleParser) rawOther(a token, opt string) *Error {
	msg := fmt.Sprintf("%s %s in the raw table is not supported: xdpfw runs -j NOTRACK and -j CT --notrack there", opt, a.text)
	if v := p.r.Target.Verdict; v == VerdictDrop || v == VerdictReject {
		// Docker 28's direct-routing protection and wg-quick's
		// full-tunnel rule are such DROPs
		return p.errAt(a, a.text, msg+" (a verdict there acts before conntrack and routing, on every packet arriving; "+
			"xdpfw's raw table only exempts packets from tracking)",
			"keep this rule in the kernel's raw table (it sees what xdpfw accepts, and Docker and wg-quick install theirs there), "+
				"or put rules that decide packets in the filter table (INPUT, FORWARD, OUTPUT)")
	}
	err := p.errAt(a, a.text, msg+"; left out, it changes only which packets later NOTRACK rules exempt from tracking",
		"keep the NOTRACK rules in the raw table's PREROUTING and OUTPUT")
	err.Unsupported = true
	return err
}

// rawTarget handles -j NOTRACK and -j CT in the raw table.
func (p *ruleParser) rawTarget(a token) bool {
	if !p.opt.raw {
		return false
	}
	switch a.text {
	case "NOTRACK":
	case "CT": // --notrack must follow
		p.r.Target.CT = true
		ct := a
		p.checks = append(p.checks, func() *Error {
			if !p.notrack {
				return p.errAt(ct, "", "-j CT without --notrack is not supported: the other CT options set the kernel's conntrack (zones, helpers, timeouts)",
					"write -j CT --notrack, or keep the rule in the kernel's iptables")
			}
			return nil
		})
	default:
		return false
	}
	p.r.Target.Verdict = VerdictNotrack
	p.checks = append(p.checks, p.checkRawMatch)
	return true
}

// checkRawMatch refuses the matches a NOTRACK rule cannot have: the raw
// table runs before conntrack on what the packet's headers say.
func (p *ruleParser) checkRawMatch() *Error {
	m := &p.r.Match
	bad := ""
	switch {
	case m.InIface != nil:
		bad = "-i"
	case m.MACSrc != nil || m.MACDst != nil:
		bad = "-m mac"
	case m.VLAN != nil || m.VLANPrio != nil:
		bad = "-m vlan"
	case m.SrcSet != nil || m.DstSet != nil:
		bad = "-m set"
	case m.CTState != nil:
		bad = "-m conntrack"
	case m.Mark != nil:
		bad = "-m mark"
	case m.TCPFlags != nil:
		bad = "--tcp-flags"
	case m.ICMP != nil:
		bad = "--icmp-type"
	case m.Fragment != nil:
		bad = "-f"
	case m.Ports != nil || m.SPort != nil && len(m.SPort.Ranges) > 1 || m.DPort != nil && len(m.DPort.Ranges) > 1:
		bad = "-m multiport"
	default:
		return nil
	}
	return &Error{Pos: p.r.Pos, Unsupported: true,
		Msg:  fmt.Sprintf("%s in a NOTRACK rule is not supported: xdpfw's raw table matches -4/-6, -p, -s, -d, --sport and --dport", bad),
		Hint: "write the NOTRACK rule with those matches, or keep it in the kernel's iptables"}
}

// optNotrack handles -j CT --notrack.
func (p *ruleParser) optNotrack(o optUse) *Error {
	if !p.target || p.r.Target.Verdict != VerdictNotrack || !p.r.Target.CT {
		return p.errAt(o.opt, "", "--notrack is an option of -j CT (raw table)", "")
	}
	p.notrack = true
	return nil
}

// optCTOther refuses the options of -j CT other than --notrack.
func (p *ruleParser) optCTOther(o optUse) *Error {
	if !p.target || !p.r.Target.CT {
		return p.errAt(o.opt, "", o.opt.text+" is an option of -j CT (raw table)", "")
	}
	err := p.errAt(o.opt, "", "-j CT "+o.opt.text+" is not supported: it sets the kernel's conntrack (zones, helpers, events, timeouts), which xdpfw's is not",
		"keep the rule in the kernel's iptables")
	err.Unsupported = true
	return err
}

// supportedTargets is the hint given for an unsupported target.
const supportedTargets = "supported targets: ACCEPT, DROP, REJECT, LOG, NFLOG, ULOG, RETURN and user-defined chains"

// badTarget explains a -j target of iptables that xdpfw does not run
// (refusedTargets: the reason, and whether --skip-unsupported may leave
// the rule out).
func (p *ruleParser) badTarget(a token) *Error {
	if why, ok := refusedTargets[a.text]; ok {
		err := p.errAt(a, a.text, fmt.Sprintf("target %s is not supported: %s", a.text, why.why), why.hint)
		err.Unsupported = why.skippable
		return err
	}
	return p.errAt(a, a.text, fmt.Sprintf("target %s is not supported", a.text), supportedTargets)
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

// unknownChain explains a -j or -g to a chain that does not exist (at
// token a of a rule at pos).
func unknownChain(pos Pos, name string) *Error {
	err := &Error{Pos: pos, Token: name, Msg: "no chain or target " + name,
		Hint: "declare the chain before the rule: -N " + name + " (or :" + name + " - [0:0] in an iptables-save file)"}
	switch up := toUpperASCII(name); up {
	case "ACCEPT", "DROP", "REJECT", "LOG", "RETURN":
		err.Hint = "targets are upper case: -j " + up + "; or declare a chain " + name + " with -N " + name
	case "HIGH", "BULK":
		err.Hint = "-j " + up + " is a target of xdpfw's own " + PriorityTable + " table only (-t " + PriorityTable +
			" -A PRIORITY ... -j " + up + "; docs/realtime.md, Priority); or declare a chain " + name + " with -N " + name
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
	if p.opt.raw {
		return p.rawOther(a, "-g")
	}
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

// needLogTarget checks that a log option (--log-prefix, --log-level, a LOG flag,
// --log-rate, --log-burst) follows -j LOG, or -j ACCEPT|DROP|REJECT with
// --log anywhere after it.
func (p *ruleParser) needLogTarget(o optUse) *Error {
	if g := p.r.Target.Group; g != nil && (o.opt.text == "--log-prefix" || o.opt.text == "--log-level") {
		hint := "NFLOG has no level: its events go at the default (warning)"
		if o.opt.text == "--log-prefix" {
			hint = "write --" + strings.ToLower(g.Name()) + "-prefix"
		}
		return p.errAt(o.opt, "", fmt.Sprintf("%s is an option of -j LOG, not of -j %s", o.opt.text, g.Name()), hint)
	}
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

// optLogFlag handles --log-tcp-sequence, --log-tcp-options,
// --log-ip-options, --log-uid and --log-macdecode: options of -j LOG (of
// a rule with --log too), not of NFLOG or ULOG.
func (p *ruleParser) optLogFlag(o optUse) *Error {
	if g := p.r.Target.Group; g != nil {
		return p.errAt(o.opt, "", fmt.Sprintf("%s is an option of -j LOG, not of -j %s", o.opt.text, g.Name()), "remove "+o.opt.text)
	}
	if err := p.needLogTarget(o); err != nil {
		return err
	}
	for _, f := range logFlagNames {
		if f.opt == o.opt.text {
			p.r.Target.LogFlags |= f.flag
		}
	}
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

// Limits of the NFLOG and ULOG options, as iptables has them.
const (
	maxNFLOGPrefix = 63 // NFLOG: 64 bytes with the terminating NUL
	maxULOGPrefix  = 31 // ULOG: 32 bytes
	maxULOGGroup   = 32
	maxULOGQueue   = 50 // --ulog-qthreshold
)

// needGroupTarget checks that an NFLOG (ulog: ULOG) option follows its -j.
func (p *ruleParser) needGroupTarget(o optUse, ulog bool) *Error {
	want := "NFLOG"
	if ulog {
		want = "ULOG"
	}
	if g := p.r.Target.Group; g == nil || g.ULOG != ulog {
		if !p.target {
			return p.errAt(o.opt, "", fmt.Sprintf("%s needs -j %s before it", o.opt.text, want), "")
		}
		have := p.r.Target.Verdict.String()
		if g != nil {
			have = g.Name()
		}
		return p.errAt(o.opt, "", fmt.Sprintf("%s is an option of -j %s, not of -j %s", o.opt.text, want, have), "")
	}
	return nil
}

// optGroupOption handles the options of -j NFLOG (--nflog-prefix,
// --nflog-group, --nflog-size, --nflog-range, --nflog-threshold) and -j ULOG
// (--ulog-prefix, --ulog-nlgroup, --ulog-cprange, --ulog-qthreshold).
func (p *ruleParser) optGroupOption(o optUse) *Error {
	name := o.opt.text
	ulog := strings.HasPrefix(name, "--ulog-")
	if err := p.needGroupTarget(o, ulog); err != nil {
		return err
	}
	g, a := p.r.Target.Group, o.args[0]
	number := func(lo, hi int, what string) (int, *Error) {
		n, ok := parseUint(a.text, hi)
		if !ok || n < lo {
			return 0, p.errAt(a, a.text, "bad "+name, fmt.Sprintf("%s: %d to %d", what, lo, hi))
		}
		return n, nil
	}
	var n int
	var err *Error
	switch name {
	case "--nflog-prefix", "--ulog-prefix":
		max := maxNFLOGPrefix
		if ulog {
			max = maxULOGPrefix
		}
		if ve := checkText(a.text, "log prefix", max); ve != nil {
			return p.valueErr(a, ve)
		}
		p.r.Target.LogPrefix = a.text
		return nil
	case "--nflog-group":
		n, err = number(0, 65535, "the netlink group")
		g.Group = uint16(n)
	case "--ulog-nlgroup":
		n, err = number(1, maxULOGGroup, "the netlink group")
		g.Group = uint16(n)
		if n == 1 {
			g.Group = 0 // the default: one meaning, one AST
		}
	case "--nflog-size":
		n, err = number(0, 1<<32-1, "bytes of the packet each event keeps")
		g.Size, g.Cut = uint32(n), true
	case "--ulog-cprange":
		n, err = number(0, 1<<32-1, "bytes of the packet each event keeps (0: all)")
		g.Size, g.Cut = uint32(n), n != 0
	case "--nflog-range":
		n, err = number(0, 1<<32-1, "bytes of the packet (obsolete: the kernel never honoured it; use --nflog-size)")
		g.Range = uint32(n)
	case "--nflog-threshold":
		n, err = number(1, 65535, "packets the kernel batches in one netlink message")
		g.Threshold = uint32(n)
	case "--ulog-qthreshold":
		n, err = number(1, maxULOGQueue, "packets the kernel batches in one netlink message")
		g.Threshold = uint32(n)
		if n == 1 {
			g.Threshold = 0 // the default
		}
	}
	return err
}
