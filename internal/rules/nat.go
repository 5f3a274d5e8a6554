package rules

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// The nat table (docs/nat.md). With ParseOptions.NAT, a file's *nat section
// (and -t nat lines) is read into RuleSet.NAT: its own rules, user chains and
// built-in chains PREROUTING, INPUT, OUTPUT and POSTROUTING, whose policies
// are always ACCEPT (iptables refuses DROP there). Without it the nat table
// stays the kernel's, as before: refused, or skipped with
// KernelNATNote (docs/conntrack.md, Kernel NAT).

// ChainPostrouting is the nat table's POSTROUTING chain (RuleSet.NAT):
// packets leaving, after the routing decision. Like ChainPrerouting it is
// no filter chain.
const ChainPostrouting Chain = 5

// NATKind is what a nat rule's target translates.
type NATKind uint8

// The address-translating targets of the nat table.
const (
	NATDNAT       NATKind = iota + 1 // -j DNAT --to-destination: the destination
	NATSNAT                          // -j SNAT --to-source: the source
	NATMasquerade                    // -j MASQUERADE: the source, to the egress interface's address
	NATRedirect                      // -j REDIRECT: the destination, to this host (the address of the interface it came in by)
)

// String returns the iptables name of the target ("DNAT").
func (k NATKind) String() string {
	switch k {
	case NATDNAT:
		return "DNAT"
	case NATSNAT:
		return "SNAT"
	case NATMasquerade:
		return "MASQUERADE"
	case NATRedirect:
		return "REDIRECT"
	}
	return fmt.Sprintf("nat(%d)", uint8(k))
}

// Source reports whether the target translates the source (SNAT,
// MASQUERADE) rather than the destination (DNAT, REDIRECT).
func (k NATKind) Source() bool { return k == NATSNAT || k == NATMasquerade }

// NATTarget is a nat rule's translation: -j DNAT --to-destination
// ADDR[-ADDR][:PORT[-PORT]], -j SNAT --to-source ..., -j MASQUERADE
// [--to-ports P[-P]], -j REDIRECT [--to-ports P[-P]], and their flags.
type NATTarget struct {
	Kind NATKind
	// AddrLo and AddrHi are the range of addresses (DNAT, SNAT); both
	// invalid when the rule gives only ports (--to-destination :8080).
	AddrLo, AddrHi netip.Addr
	// Ports: PortLo-PortHi was given (":PORT[-PORT]", --to-ports).
	Ports          bool
	PortLo, PortHi uint16
	// Random (--random), RandomFully (--random-fully: SNAT and
	// MASQUERADE), Persistent (--persistent: DNAT and SNAT).
	Random, RandomFully, Persistent bool
}

// Verdict of a nat rule whose target translates (Target.NAT says how). In
// the nat table a rule decides its connection's translation: the first
// matching rule with a NAT target or ACCEPT ends the walk of its hook.
const VerdictNAT Verdict = VerdictBulk + 1

// natChain maps a chain name of the nat table to its built-in chain.
func natChain(s string) (Chain, bool) {
	switch s {
	case "PREROUTING":
		return ChainPrerouting, true
	case "INPUT":
		return ChainInput, true
	case "OUTPUT":
		return ChainOutput, true
	case "POSTROUTING":
		return ChainPostrouting, true
	}
	return 0, false
}

// natHooks are the built-in chains of the nat table where each target may
// be, as the kernel's xt_nat checks them (a user chain takes those of the
// chains that jump to it).
var natHooks = map[NATKind][]Chain{
	NATDNAT:       {ChainPrerouting, ChainOutput},
	NATRedirect:   {ChainPrerouting, ChainOutput},
	NATSNAT:       {ChainPostrouting, ChainInput},
	NATMasquerade: {ChainPostrouting},
}

// natHookNames lists the chains of natHooks[k] for messages.
func natHookNames(k NATKind) string {
	var s []string
	for _, c := range natHooks[k] {
		s = append(s, c.String())
	}
	return strings.Join(s, " and ")
}

// natTargetFor maps a -j name to its NATKind (0: not a nat target).
func natTargetFor(name string) NATKind {
	for _, k := range []NATKind{NATDNAT, NATSNAT, NATMasquerade, NATRedirect} {
		if k.String() == name {
			return k
		}
	}
	return 0
}

// natJump handles -j TARGET in the nat table (ruleParser.optJump): the
// translating targets, ACCEPT, RETURN and user chains; true when it took
// the target (or refused it: *err).
func (p *ruleParser) natJump(a token) (bool, *Error) {
	if !p.opt.nat {
		// Without ParseOptions.NAT the nat targets stay refused
		// (refusedTargets: the kernel keeps the nat table).
		if k := natTargetFor(a.text); k != 0 && p.opt.NAT {
			return true, p.errAt(a, a.text, fmt.Sprintf("target %s belongs to the nat table", a.text),
				fmt.Sprintf("write it in a *nat section, or -t nat -A %s ... -j %s", natHooks[k][0], a.text))
		}
		return false, nil
	}
	switch a.text {
	case "ACCEPT", "RETURN":
		return false, nil
	case "DROP", "REJECT":
		return true, p.errAt(a, a.text, "the nat table is not for filtering: -j "+a.text+" is refused there (as iptables refuses it)",
			"drop or reject in the filter table (INPUT, FORWARD, OUTPUT)")
	}
	k := natTargetFor(a.text)
	if k == 0 {
		if isIptablesTarget(a.text) || a.text == "LOG" || a.text == "NFLOG" || a.text == "ULOG" {
			return true, p.errAt(a, a.text, fmt.Sprintf("-j %s in the nat table is not supported: xdpfw's nat table translates "+
				"(DNAT, SNAT, MASQUERADE, REDIRECT), accepts, returns and jumps", a.text),
				"log in the filter table, or keep the nat table in the kernel (docs/nat.md)")
		}
		return false, nil // a user chain
	}
	p.r.Target.Verdict = VerdictNAT
	p.r.Target.NAT = &NATTarget{Kind: k}
	p.checks = append(p.checks, func() *Error { return p.checkNAT(a) })
	return true, nil
}

// checkNAT checks a nat rule once all its options are read: the options
// its target must have, its chain, and a protocol with ports for ports.
func (p *ruleParser) checkNAT(at token) *Error {
	t := p.r.Target.NAT
	switch {
	case t.Kind == NATDNAT && !p.natTo:
		return p.errAt(at, "", "-j DNAT needs --to-destination", "write -j DNAT --to-destination ADDR[-ADDR][:PORT[-PORT]]")
	case t.Kind == NATSNAT && !p.natTo:
		return p.errAt(at, "", "-j SNAT needs --to-source", "write -j SNAT --to-source ADDR[-ADDR][:PORT[-PORT]]")
	}
	if c := p.r.Chain; c != ChainUser && !containsChain(natHooks[t.Kind], c) {
		return p.errAt(at, "", fmt.Sprintf("-j %s cannot be used in the nat table's %s chain", t.Kind, c),
			fmt.Sprintf("-j %s works in %s (as in iptables)", t.Kind, natHookNames(t.Kind)))
	}
	if t.Ports {
		pr := p.r.Match.Proto
		ok := pr != nil && !pr.Invert
		if ok {
			switch pr.Proto {
			case protoTCP, protoUDP, protoSCTP, protoDCCP, protoICMP:
			default:
				ok = false
			}
		}
		if !ok {
			return p.errAt(at, "", "ports in a -j "+t.Kind.String()+" rule need -p tcp, udp, sctp, dccp or icmp",
				"write -p tcp (or udp) before the ports, as iptables requires")
		}
	}
	if p.r.Match.Family == FamilyIPv6 || t.AddrLo.Is6() {
		return &Error{Pos: p.at(at), Unsupported: true,
			Msg:  "IPv6 NAT (ip6tables' nat table) is not supported: xdpfw translates IPv4 (docs/nat.md)",
			Hint: "keep the ip6tables nat table in the kernel (docs/nat.md)"}
	}
	return nil
}

// containsChain reports whether cs holds c.
func containsChain(cs []Chain, c Chain) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

// natOption checks that option o belongs to the rule's nat target, one of
// kinds; it returns the target.
func (p *ruleParser) natOption(o optUse, kinds ...NATKind) (*NATTarget, *Error) {
	t := p.r.Target.NAT
	if !p.target || t == nil {
		names := make([]string, len(kinds))
		for i, k := range kinds {
			names[i] = "-j " + k.String()
		}
		return nil, p.errAt(o.opt, "", fmt.Sprintf("%s is an option of %s (nat table)", o.opt.text, strings.Join(names, " or ")), "")
	}
	for _, k := range kinds {
		if t.Kind == k {
			return t, nil
		}
	}
	return nil, p.errAt(o.opt, "", fmt.Sprintf("-j %s has no option %s", t.Kind, o.opt.text), natUsage[t.Kind])
}

// natUsage is each nat target's syntax, for hints.
var natUsage = map[NATKind]string{
	NATDNAT:       "-j DNAT --to-destination ADDR[-ADDR][:PORT[-PORT]] [--random] [--persistent]",
	NATSNAT:       "-j SNAT --to-source ADDR[-ADDR][:PORT[-PORT]] [--random] [--random-fully] [--persistent]",
	NATMasquerade: "-j MASQUERADE [--to-ports PORT[-PORT]] [--random] [--random-fully]",
	NATRedirect:   "-j REDIRECT [--to-ports PORT[-PORT]] [--random]",
}

// optNATTo handles --to-destination (DNAT) and --to-source (SNAT).
func (p *ruleParser) optNATTo(o optUse) *Error {
	kind := NATDNAT
	if o.opt.text == "--to-source" {
		kind = NATSNAT
	}
	t, err := p.natOption(o, kind)
	if err != nil {
		return err
	}
	a := o.args[0]
	if ve := parseNATRange(a.text, t); ve != nil {
		return p.valueErr(a, ve)
	}
	p.natTo = true
	return nil
}

// optNATPorts handles --to-ports (MASQUERADE, REDIRECT).
func (p *ruleParser) optNATPorts(o optUse) *Error {
	t, err := p.natOption(o, NATMasquerade, NATRedirect)
	if err != nil {
		return err
	}
	a := o.args[0]
	if ve := parseNATPorts(a.text, 0, t); ve != nil {
		return p.valueErr(a, ve)
	}
	return nil
}

// optNATFlag handles --random, --random-fully and --persistent.
func (p *ruleParser) optNATFlag(o optUse) *Error {
	var kinds []NATKind
	switch o.opt.text {
	case "--random":
		kinds = []NATKind{NATDNAT, NATSNAT, NATMasquerade, NATRedirect}
	case "--random-fully":
		kinds = []NATKind{NATSNAT, NATMasquerade}
	case "--persistent":
		kinds = []NATKind{NATDNAT, NATSNAT}
	}
	t, err := p.natOption(o, kinds...)
	if err != nil {
		return err
	}
	switch o.opt.text {
	case "--random":
		t.Random = true
	case "--random-fully":
		t.RandomFully = true
	default:
		t.Persistent = true
	}
	return nil
}

// parseNATRange parses ADDR[-ADDR][:PORT[-PORT]] (or :PORT[-PORT]) into t,
// as iptables' DNAT and SNAT read it (IPv4; an IPv6 address is written
// [ADDR] when ports follow).
func parseNATRange(s string, t *NATTarget) *valueErr {
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") > 1 {
		return &valueErr{tok: s, msg: "IPv6 NAT is not supported: xdpfw translates IPv4 (docs/nat.md)",
			hint: "keep the ip6tables nat table in the kernel (docs/nat.md)"}
	}
	addrs, ports, hasPorts := strings.Cut(s, ":")
	if addrs == "" && !hasPorts {
		return &valueErr{msg: "missing address", hint: "write ADDR[-ADDR][:PORT[-PORT]], e.g. 10.0.0.2:8080"}
	}
	if addrs != "" {
		lo, hi, isRange := strings.Cut(addrs, "-")
		a, err := netip.ParseAddr(lo)
		if err != nil || !a.Is4() {
			return &valueErr{tok: lo, msg: "bad IPv4 address", hint: "write ADDR[-ADDR][:PORT[-PORT]], e.g. 10.0.0.2:8080"}
		}
		b := a
		if isRange {
			if b, err = netip.ParseAddr(hi); err != nil || !b.Is4() {
				return &valueErr{off: len(lo) + 1, tok: hi, msg: "bad IPv4 address", hint: "write ADDR-ADDR, e.g. 10.0.0.2-10.0.0.9"}
			}
			if b.Less(a) {
				return &valueErr{tok: addrs, msg: "address range ends before it starts",
					hint: "write the lower address first (iptables takes it, but the kernel then picks any address)"}
			}
		}
		t.AddrLo, t.AddrHi = a, b
	}
	if hasPorts {
		return parseNATPorts(ports, len(addrs)+1, t)
	}
	return nil
}

// parseNATPorts parses PORT[-PORT] (off: its offset in the argument) into t.
func parseNATPorts(s string, off int, t *NATTarget) *valueErr {
	lo, hi, isRange := strings.Cut(s, "-")
	if strings.Contains(s, ":") {
		return &valueErr{off: off, tok: s, msg: "a port range is written with a dash here", hint: "write PORT-PORT, e.g. 1024-65535"}
	}
	a, ve := parsePort(lo, off, "")
	if ve != nil {
		return ve
	}
	b := a
	if isRange {
		if b, ve = parsePort(hi, off+len(lo)+1, ""); ve != nil {
			return ve
		}
	}
	switch {
	case a == 0 || b == 0:
		return &valueErr{off: off, tok: s, msg: "port 0 cannot be a translation", hint: "ports are 1-65535"}
	case b < a:
		return &valueErr{off: off, tok: s, msg: "port range ends before it starts", hint: "write the lower port first"}
	}
	t.Ports, t.PortLo, t.PortHi = true, a, b
	return nil
}

// formatNAT writes the target as iptables-save prints it.
func (w *specWriter) formatNAT(t *NATTarget) {
	w.add(false, "-j", t.Kind.String())
	ports := ""
	if t.Ports {
		ports = strconv.Itoa(int(t.PortLo))
		if t.PortHi != t.PortLo {
			ports += "-" + strconv.Itoa(int(t.PortHi))
		}
	}
	switch t.Kind {
	case NATDNAT, NATSNAT:
		to := ""
		if t.AddrLo.IsValid() {
			to = t.AddrLo.String()
			if t.AddrHi != t.AddrLo {
				to += "-" + t.AddrHi.String()
			}
		}
		if ports != "" {
			to += ":" + ports
		}
		opt := "--to-destination"
		if t.Kind == NATSNAT {
			opt = "--to-source"
		}
		w.add(false, opt, to)
	default:
		if ports != "" {
			w.add(false, "--to-ports", ports)
		}
	}
	if t.Random {
		w.add(false, "--random")
	}
	if t.RandomFully {
		w.add(false, "--random-fully")
	}
	if t.Persistent {
		w.add(false, "--persistent")
	}
}

const (
	natPolicyMsg = "a DROP policy in the nat table is not supported: the nat table is not for filtering " +
		"(iptables -P refuses it; iptables-restore takes it and drops the first packets of connections no nat rule takes)"
	natPolicyHint = "set policies in the filter table (INPUT, FORWARD, OUTPUT)"
)

// natSection opens a *nat section: the nat table read so far is replaced,
// as iptables-restore flushes a table each time a section names it.
func (p *fileParser) natSection() {
	p.leaveNAT()
	p.rs.NAT = &RuleSet{}
	p.enterNAT()
}

// enterNAT makes p.rs the nat table until leaveNAT.
func (p *fileParser) enterNAT() {
	if p.outer != nil {
		return
	}
	if p.rs.NAT == nil {
		p.rs.NAT = &RuleSet{}
	}
	p.outer, p.rs, p.opt.nat = p.rs, p.rs.NAT, true
	p.savedFilter = [3]int{p.filterRules, p.filterPolicies, p.filterChains}
}

// leaveNAT makes p.rs the whole rule set again.
func (p *fileParser) leaveNAT() {
	if p.outer == nil {
		return
	}
	p.rs, p.outer, p.opt.nat = p.outer, nil, false
	p.filterRules, p.filterPolicies, p.filterChains = p.savedFilter[0], p.savedFilter[1], p.savedFilter[2]
}

// inNAT runs f with p.rs the nat table (a -t nat line).
func (p *fileParser) inNAT(f func()) {
	p.enterNAT()
	f()
	p.leaveNAT()
}

// tableOf returns the table a -t (--table) in toks names, "" if none.
func tableOf(toks []token) string {
	for i := 0; i+1 < len(toks); i++ {
		if t := toks[i]; !t.quoted && (t.text == "-t" || t.text == "--table") {
			return toks[i+1].text
		}
	}
	return ""
}

// withoutTable returns toks without its first -t TABLE.
func withoutTable(toks []token) []token {
	for i := 0; i+1 < len(toks); i++ {
		if t := toks[i]; !t.quoted && (t.text == "-t" || t.text == "--table") {
			return append(toks[:i:i], toks[i+2:]...)
		}
	}
	return toks
}

// natIfaceProblem refuses what a nat rule reached from hooks tests of a
// packet that has no such thing there: -m mac where the kernel refuses it
// (OUTPUT, POSTROUTING: xt_mac is for PREROUTING, INPUT and FORWARD), and
// -i (-o) in a user chain reached from a hook without an input (output)
// device. iptables takes the latter (a positive test then never matches,
// a negated one always); xdpfw classifies a nat chain once for all the
// hooks that reach it, so it refuses them.
func natIfaceProblem(r *Rule, hooks map[Chain]bool) *Error {
	out := hooks[ChainOutput] || hooks[ChainPostrouting]
	in := hooks[ChainPrerouting] || hooks[ChainInput]
	where := func(cs ...Chain) string {
		var s []string
		for _, c := range cs {
			if hooks[c] {
				s = append(s, c.String())
			}
		}
		return strings.Join(s, " and ")
	}
	switch {
	case out && (r.Match.MACSrc != nil || r.Match.MACDst != nil):
		return &Error{Pos: r.Pos, Msg: "-m mac in a nat rule " + where(ChainOutput, ChainPostrouting) + " reaches: the kernel refuses it there",
			Hint: "-m mac works in PREROUTING and INPUT (packets arriving)"}
	case r.Chain == ChainUser && out && r.Match.InIface != nil:
		return &Error{Pos: r.Pos, Msg: "-i in chain " + r.UserChain + ", which " + where(ChainOutput, ChainPostrouting) +
			" reaches, is not supported: packets there have no input interface",
			Hint: "test -i in PREROUTING, or in a chain only PREROUTING and INPUT jump to"}
	case r.Chain == ChainUser && in && r.Match.OutIface != nil:
		return &Error{Pos: r.Pos, Msg: "-o in chain " + r.UserChain + ", which " + where(ChainPrerouting, ChainInput) +
			" reaches, is not supported: packets there have no output interface yet",
			Hint: "test -o in POSTROUTING or OUTPUT, or in a chain only they jump to"}
	}
	return nil
}

// checkNATHooks checks, once the file is read, that each translating rule
// of a nat user chain is reached only from the built-in chains its target
// may be in (iptables-restore refuses the table otherwise: "Invalid
// argument").
func (p *fileParser) checkNATHooks() {
	nat := p.rs.NAT
	if nat == nil {
		return
	}
	reach := NATReach(nat)
	for _, r := range nat.Rules {
		hooks := map[Chain]bool{r.Chain: true}
		if r.Chain == ChainUser {
			hooks = reach[r.UserChain]
		}
		if err := natIfaceProblem(&r, hooks); err != nil {
			p.errs = append(p.errs, err)
			continue
		}
		if r.Chain != ChainUser || r.Target.NAT == nil {
			continue
		}
		k := r.Target.NAT.Kind
		for _, c := range []Chain{ChainPrerouting, ChainInput, ChainOutput, ChainPostrouting} {
			if reach[r.UserChain][c] && !containsChain(natHooks[k], c) {
				p.errs = append(p.errs, &Error{Pos: r.Pos, Msg: fmt.Sprintf("-j %s in chain %s, which %s jumps to: -j %s cannot be used there",
					k, r.UserChain, c, k), Hint: fmt.Sprintf("-j %s works in %s (as in iptables)", k, natHookNames(k))})
				break
			}
		}
	}
}

// NATReach gives each user chain of the nat table nat the built-in chains
// (hooks) whose rules reach it, by jumps and gotos through other user
// chains.
func NATReach(nat *RuleSet) map[string]map[Chain]bool {
	reach := map[string]map[Chain]bool{}
	for changed := true; changed; {
		changed = false
		for _, r := range nat.Rules {
			if r.Target.Verdict != VerdictJump && r.Target.Verdict != VerdictGoto {
				continue
			}
			from := map[Chain]bool{r.Chain: true}
			if r.Chain == ChainUser {
				from = reach[r.UserChain]
			}
			to := reach[r.Target.Chain]
			if to == nil {
				to = map[Chain]bool{}
				reach[r.Target.Chain] = to
			}
			for c := range from {
				if !to[c] {
					to[c], changed = true, true
				}
			}
		}
	}
	return reach
}
