package rules

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// optFamily handles -4 and -6.
func (p *ruleParser) optFamily(o optUse) *Error {
	f := FamilyIPv4
	if o.opt.text == "-6" || o.opt.text == "--ipv6" {
		f = FamilyIPv6
	}
	if p.opt.restore && p.opt.Family != FamilyAny && p.opt.Family != f {
		p.other, p.fam = true, f
		return nil
	}
	return p.setFamily(f, o.opt, "", o.opt.text, o.opt.text)
}

// optTable handles -t TABLE: only the filter table has rules here.
func (p *ruleParser) optTable(o optUse) *Error {
	if ve := checkTable(o.args[0].text); ve != nil {
		return p.valueErr(o.args[0], ve)
	}
	return nil
}

// checkTable checks the argument of -t: xdpfw's rules are the filter table.
func checkTable(name string) *valueErr {
	if name == "filter" {
		return nil
	}
	if name == PriorityTable {
		return &valueErr{tok: name, msg: "the " + PriorityTable + " table is read from rule files only (load, apply)",
			hint: "write -t " + PriorityTable + " -A PRIORITY ... -j HIGH in the rule file (docs/realtime.md, Priority)"}
	}
	return &valueErr{tok: name, msg: fmt.Sprintf("table %s is not supported; xdpfw implements the filter table only", Clip(name)),
		hint: "leave out -t, or write -t filter"}
}

// optProto handles -p.
func (p *ruleParser) optProto(o optUse) *Error {
	a := o.args[0]
	proto, ve := parseProto(a.text)
	if ve != nil {
		return p.valueErr(a, ve)
	}
	if proto == 0 {
		if o.invert {
			return p.errAt(a, a.text, "! -p all matches nothing", "remove the rule, or the !")
		}
		return nil // -p all: no protocol match
	}
	if !o.invert {
		var err *Error
		switch proto {
		case protoICMP:
			err = p.setFamily(FamilyIPv4, a, a.text, "-p icmp (IPv4)", "-p icmp (IPv4)")
			if err != nil {
				err.Hint = "ICMPv6 is -p ipv6-icmp"
			}
		case protoICMPv6:
			err = p.setFamily(FamilyIPv6, a, a.text, "-p ipv6-icmp (IPv6)", "-p ipv6-icmp (IPv6)")
			if err != nil {
				err.Hint = "ICMP for IPv4 is -p icmp"
			}
		}
		if err != nil {
			return err
		}
	}
	p.r.Match.Proto = &ProtoMatch{Proto: proto, Invert: o.invert}
	return nil
}

// optSrc handles -s.
func (p *ruleParser) optSrc(o optUse) *Error { return p.addr(o, "-s", &p.r.Match.Src) }

// optDst handles -d.
func (p *ruleParser) optDst(o optUse) *Error { return p.addr(o, "-d", &p.r.Match.Dst) }

// addr handles -s and -d (flag), storing the match in *dst.
func (p *ruleParser) addr(o optUse, flag string, dst **AddrMatch) *Error {
	a := o.args[0]
	pfx, ve := parsePrefix(a.text)
	if ve != nil {
		return p.valueErr(a, ve)
	}
	f := FamilyIPv4
	if pfx.Addr().Is6() {
		f = FamilyIPv6
	}
	err := p.setFamily(f, a, a.text, famName(f)+" address",
		fmt.Sprintf("%s %s (%s)", flag, a.text, famName(f)))
	if err != nil {
		return err
	}
	*dst = &AddrMatch{Prefix: pfx, Invert: o.invert}
	return nil
}

// optSPort handles --sport.
func (p *ruleParser) optSPort(o optUse) *Error { return p.port(o, &p.r.Match.SPort) }

// optDPort handles --dport.
func (p *ruleParser) optDPort(o optUse) *Error { return p.port(o, &p.r.Match.DPort) }

// port handles --sport and --dport.
func (p *ruleParser) port(o optUse, dst **PortMatch) *Error {
	a := o.args[0]
	r, ve := parsePortRange(a.text, 0, "")
	if ve != nil {
		return p.valueErr(a, ve)
	}
	p.needPorts(o.opt)
	return p.setPorts(a, dst, &PortMatch{Ranges: []PortRange{r}, Invert: o.invert})
}

// setPorts stores port match m (from option argument a) in *dst; when
// *dst holds the other spelling's match already (--dport beside
// -m multiport --dports), the packet must pass both, as in iptables.
func (p *ruleParser) setPorts(a token, dst **PortMatch, m *PortMatch) *Error {
	if *dst != nil {
		both, ve := bothPorts(*dst, m)
		if ve != nil {
			ve.tok = a.text
			return p.valueErr(a, ve)
		}
		m = both
	}
	*dst = m
	return nil
}

// optSPorts handles -m multiport --sports.
func (p *ruleParser) optSPorts(o optUse) *Error { return p.portList(o, &p.r.Match.SPort) }

// optDPorts handles -m multiport --dports.
func (p *ruleParser) optDPorts(o optUse) *Error { return p.portList(o, &p.r.Match.DPort) }

// optPorts handles -m multiport --ports.
func (p *ruleParser) optPorts(o optUse) *Error { return p.portList(o, &p.r.Match.Ports) }

// portList handles the -m multiport options.
func (p *ruleParser) portList(o optUse, dst **PortMatch) *Error {
	if first := p.multiport; first != nil {
		return p.errAt(o.opt, "", fmt.Sprintf("%s and %s both given to one -m multiport", first.text, o.opt.text),
			"one -m multiport takes one of --sports, --dports, --ports (as in iptables): write -m multiport "+o.opt.text+" ... again")
	}
	p.multiport = &o.opt
	a := o.args[0]
	ranges, ve := parsePortList(a.text, p.protoText())
	if ve != nil {
		return p.valueErr(a, ve)
	}
	p.needPorts(o.opt)
	return p.setPorts(a, dst, &PortMatch{Ranges: ranges, Invert: o.invert})
}

// protoText names the rule's protocol (so far) for service lookups: "" when
// it has none.
func (p *ruleParser) protoText() string {
	if pr := p.r.Match.Proto; pr != nil && !pr.Invert {
		return protoName(pr.Proto)
	}
	return ""
}

// optInIface handles -i.
func (p *ruleParser) optInIface(o optUse) *Error {
	if p.r.Chain == ChainPostrouting {
		return p.iface(o, ChainPostrouting, &p.r.Match.InIface, "POSTROUTING sees packets leaving: iptables refuses -i there")
	}
	return p.iface(o, ChainOutput, &p.r.Match.InIface,
		"OUTPUT sees locally generated packets, which have no input interface")
}

// optOutIface handles -o.
func (p *ruleParser) optOutIface(o optUse) *Error {
	if p.r.Chain == ChainPrerouting && p.opt.nat {
		return p.iface(o, ChainPrerouting, &p.r.Match.OutIface, "PREROUTING runs before the routing decision: no output interface yet")
	}
	return p.iface(o, ChainInput, &p.r.Match.OutIface,
		"INPUT sees packets for this host, which have no output interface")
}

// iface handles -i and -o: refused in chain not (as iptables does:
// "Can't use -o with INPUT"), else stored in *dst.
func (p *ruleParser) iface(o optUse, not Chain, dst **IfaceMatch, why string) *Error {
	a := o.args[0]
	m, ve := parseIface(a.text)
	if ve != nil {
		return p.valueErr(a, ve)
	}
	if p.r.Chain == not {
		return p.errAt(o.opt, "", fmt.Sprintf("%s cannot be used in the %s chain", o.opt.text, not), why)
	}
	m.Invert = o.invert
	*dst = &m
	return nil
}

// optMACSrc handles -m mac --mac-source.
func (p *ruleParser) optMACSrc(o optUse) *Error { return p.mac(o, &p.r.Match.MACSrc) }

// optMACDst handles -m mac --mac-destination.
func (p *ruleParser) optMACDst(o optUse) *Error { return p.mac(o, &p.r.Match.MACDst) }

// mac handles the -m mac options.
func (p *ruleParser) mac(o optUse, dst **MACMatch) *Error {
	a := o.args[0]
	addr, ve := parseMAC(a.text)
	if ve != nil {
		return p.valueErr(a, ve)
	}
	*dst = &MACMatch{Addr: addr, Invert: o.invert}
	return nil
}

// optTCPFlags handles --tcp-flags MASK COMP.
func (p *ruleParser) optTCPFlags(o optUse) *Error {
	mask, ve := parseTCPFlags(o.args[0].text)
	if ve != nil {
		return p.valueErr(o.args[0], ve)
	}
	comp, ve := parseTCPFlags(o.args[1].text)
	if ve != nil {
		return p.valueErr(o.args[1], ve)
	}
	p.r.Match.TCPFlags = &TCPFlagsMatch{Mask: mask, Comp: comp, Invert: o.invert}
	p.needProto(o.opt, is(protoTCP), o.opt.text+" needs -p tcp", "")
	return nil
}

// optSyn handles --syn.
func (p *ruleParser) optSyn(o optUse) *Error {
	p.r.Match.TCPFlags = &TCPFlagsMatch{Mask: synMask, Comp: synComp, Invert: o.invert}
	p.needProto(o.opt, is(protoTCP), o.opt.text+" needs -p tcp", "")
	return nil
}

// optICMPType handles --icmp-type.
func (p *ruleParser) optICMPType(o optUse) *Error {
	return p.icmp(o, false, protoICMP, "--icmp-type needs -p icmp",
		"add -p icmp (for ICMPv6: -p ipv6-icmp --icmpv6-type)")
}

// optICMPv6Type handles --icmpv6-type.
func (p *ruleParser) optICMPv6Type(o optUse) *Error {
	return p.icmp(o, true, protoICMPv6, "--icmpv6-type needs -p ipv6-icmp",
		"add -p ipv6-icmp (for IPv4: -p icmp --icmp-type)")
}

// icmp handles --icmp-type and --icmpv6-type.
func (p *ruleParser) icmp(o optUse, v6 bool, proto uint8, msg, hint string) *Error {
	a := o.args[0]
	m, ve := parseICMPType(a.text, v6)
	if ve != nil {
		return p.valueErr(a, ve)
	}
	m.Invert = o.invert
	m = m.canonical(v6)
	p.r.Match.ICMP = &m
	p.needProto(o.opt, is(proto), msg, hint)
	return nil
}

// optVLAN handles -m vlan --vlan-id.
func (p *ruleParser) optVLAN(o optUse) *Error {
	a := o.args[0]
	id, ve := parseVLAN(a.text)
	if ve != nil {
		return p.valueErr(a, ve)
	}
	p.r.Match.VLAN = &VLANMatch{ID: id, Invert: o.invert}
	return nil
}

// optVLANPrio handles -m vlan --vlan-prio.
func (p *ruleParser) optVLANPrio(o optUse) *Error {
	a := o.args[0]
	n, ok := parseUint(a.text, maxVLANPrio)
	if !ok {
		return p.valueErr(a, &valueErr{tok: a.text, msg: fmt.Sprintf("not a VLAN priority (PCP, 0-%d)", maxVLANPrio)})
	}
	p.r.Match.VLANPrio = &VLANPrioMatch{Prio: uint8(n), Invert: o.invert}
	return nil
}

// optMatchSet handles -m set --match-set NAME src|dst (one set per
// direction; ipset's multi-dimension flags such as src,dst are refused).
func (p *ruleParser) optMatchSet(o optUse) *Error {
	name, dir := o.args[0], o.args[1]
	if !ValidSetName(name.text) {
		return p.errAt(name, name.text, "not a set name", SetNameHint)
	}
	var dst **SetMatch
	switch dir.text {
	case "src":
		dst = &p.r.Match.SrcSet
	case "dst":
		dst = &p.r.Match.DstSet
	default:
		return p.errAt(dir, dir.text, "want src or dst", "xdpfw sets hold addresses: match the source (src) or the destination (dst)")
	}
	if *dst != nil {
		return p.errAt(o.opt, "", fmt.Sprintf("--match-set ... %s given twice", dir.text), "use one set per direction")
	}
	*dst = &SetMatch{Name: name.text, Invert: o.invert, Pos: p.at(name)}
	return nil
}

// bitNames names the bits of a mask (connection states, statuses), in the
// order iptables prints them.
type bitNames []struct {
	name string
	bit  uint8
}

// parse reads a comma-separated list of names (any case) into a mask; an
// unknown name (an empty one too: ",NEW") is returned with its offset in
// s, and ok false.
func (n bitNames) parse(s string) (mask uint8, bad string, off int, ok bool) {
	for name := range strings.SplitSeq(s, ",") {
		found := false
		for _, b := range n {
			if strings.EqualFold(b.name, name) {
				mask |= b.bit
				found = true
			}
		}
		if !found {
			return 0, name, off, false
		}
		off += len(name) + 1
	}
	return mask, "", 0, true
}

// format prints mask the way parse reads it: the names of its bits; none,
// zero (if one names 0).
func (n bitNames) format(mask uint8) string {
	var names []string
	for _, b := range n {
		if mask&b.bit != 0 || mask == 0 && b.bit == 0 {
			names = append(names, b.name)
		}
	}
	return strings.Join(names, ",")
}

// ctStateNames are the connection states.
var ctStateNames = bitNames{{"INVALID", CTInvalid}, {"NEW", CTNew}, {"RELATED", CTRelated},
	{"ESTABLISHED", CTEstablished}, {"UNTRACKED", CTUntracked}, {"SNAT", CTSNAT}, {"DNAT", CTDNAT}}

// optCTState handles -m conntrack --ctstate and -m state --state.
func (p *ruleParser) optCTState(o optUse) *Error {
	a := o.args[0]
	mask, bad, off, ok := ctStateNames.parse(a.text)
	if !ok {
		return p.valueErr(a, &valueErr{off: off, tok: bad, msg: "unknown connection state",
			hint: "states are NEW, ESTABLISHED, RELATED, INVALID, UNTRACKED, SNAT and DNAT, separated by commas"})
	}
	if nat := mask & (CTSNAT | CTDNAT); nat != 0 && o.opt.text == "--state" {
		name := ctStateNames.format(nat &^ (nat - 1)) // the first
		return p.errAt(a, a.text, "-m state has no "+name, "-m conntrack --ctstate "+name)
	}
	c, why := intersectCTState(p.r.Match.CTState, CTStateMatch{Mask: mask, Invert: o.invert})
	if why != "" {
		return p.ctRefuse(o, why)
	}
	p.r.Match.CTState = c
	if n := len(p.ctStated); n > 0 {
		p.ctStated[n-1] = true
	}
	return nil
}

// ctSlots are the option slots of -m conntrack and -m state: each match of
// the rule may fill them once.
var ctSlots = []string{"ctstate", "--ctproto", "--ctorigsrc", "--ctorigdst", "--ctreplsrc", "--ctrepldst",
	"--ctstatus", "--ctdir"}

// newCTMatch starts a -m conntrack or -m state match. A rule may have
// several, as in iptables; a packet must pass them all, so the parser keeps
// their intersection: an option given in two matches is refused only where
// the intersection is no single option of the same kind (ctRefuse).
func (p *ruleParser) newCTMatch(at token) {
	for _, s := range ctSlots {
		delete(p.seen, s)
	}
	p.ctStated = append(p.ctStated, false)
	if len(p.ctStated) == 2 {
		p.checks = append(p.checks, func() *Error { return p.ctConnless(at) })
	}
}

// ctConnless makes the intersection of the rule's -m conntrack and -m state
// matches (the second at token at) mean for packets without a connection
// (INVALID, UNTRACKED) what the kernel's matches mean: one of them passes
// such a packet when its state test does, whatever its other options
// (--ctproto, --ctstatus, --ctdir, the addresses), and one without a state
// test passes none. Match keeps the meaning of one such match (the one -m
// conntrack list prints): where every match has a state test, the
// intersection's is their conjunction, exact as it stands; where some match
// has none, the state test drops INVALID and UNTRACKED.
func (p *ruleParser) ctConnless(at token) *Error {
	m := &p.r.Match
	c := m.CTState
	const none = CTInvalid | CTUntracked
	if c == nil || !(m.CTProto != nil || m.CTStatus != nil || m.CTDir != nil || m.CTAddrs()) {
		return nil
	}
	if c.Invert && c.Mask&none == none || !c.Invert && c.Mask&none == 0 {
		return nil // the state test passes no packet without a connection
	}
	if !slices.Contains(p.ctStated, false) {
		return nil
	}
	if c.Invert {
		m.CTState = &CTStateMatch{Mask: c.Mask | none, Invert: true}
	} else if m.CTState = (&CTStateMatch{Mask: c.Mask &^ none}); m.CTState.Mask == 0 {
		return p.errAt(at, "", "-m conntrack or -m state matches of one rule that match no packet",
			"the state test lets only packets without a connection through (INVALID, UNTRACKED), "+
				"and another match's --ctproto, --ctstatus, --ctdir or address test needs a connection")
	}
	return nil
}

// ctRefuse refuses option o, given in an earlier -m conntrack or -m state
// match of the rule too, because their intersection is not one option: why.
func (p *ruleParser) ctRefuse(o optUse, why string) *Error {
	hint := "test one of them in a user chain the rule jumps to (-N c, -A c -m conntrack ... -j ACCEPT)"
	if strings.HasSuffix(why, "match no packet") {
		hint = "remove the rule, or correct one of the tests"
	}
	return p.errAt(o.opt, "", fmt.Sprintf("%s in two -m conntrack or -m state matches of one rule: %s", o.opt.text, why), hint)
}

// intersectCTState is the one state test that matches what both old (nil:
// none) and c match, or why there is none. The kernel matches when the
// packet's state bits meet Mask: one state bit (CTAll) and, under NAT, SNAT
// and DNAT too. With one bit, two tests intersect exactly; with SNAT or DNAT
// in a mask, only where one test implies the other.
func intersectCTState(old *CTStateMatch, c CTStateMatch) (*CTStateMatch, string) {
	if old == nil || *old == c {
		return &c, ""
	}
	a, b := *old, c
	if a.Invert && !b.Invert {
		a, b = b, a
	}
	nat := (a.Mask|b.Mask)&^CTAll != 0
	var r CTStateMatch
	switch {
	case a.Invert && b.Invert: // no bit of either: no bit of their union
		r = CTStateMatch{Mask: a.Mask | b.Mask, Invert: true}
	case !b.Invert && a.Mask&^b.Mask == 0: // a implies b
		r = a
	case !b.Invert && b.Mask&^a.Mask == 0:
		r = b
	case nat:
		return nil, "SNAT and DNAT are tested beside the state, so these tests have no intersection of one --ctstate"
	case !b.Invert:
		r = CTStateMatch{Mask: a.Mask & b.Mask}
	default: // a, not b
		r = CTStateMatch{Mask: a.Mask &^ b.Mask}
	}
	if !r.Invert && r.Mask == 0 {
		return nil, "they share no state, so the rule would match no packet"
	}
	return &r, ""
}

// optCTAddr handles -m conntrack --ctorigsrc, --ctorigdst, --ctreplsrc and
// --ctrepldst.
func (p *ruleParser) optCTAddr(o optUse) *Error {
	m := &p.r.Match
	dst := map[string]**AddrMatch{"--ctorigsrc": &m.CTOrigSrc, "--ctorigdst": &m.CTOrigDst,
		"--ctreplsrc": &m.CTReplSrc, "--ctrepldst": &m.CTReplDst}[o.opt.text]
	prev := *dst
	if err := p.addr(o, o.opt.text, dst); err != nil {
		return err
	}
	if prev != nil && *prev != **dst {
		return p.ctRefuse(o, "xdpfw takes one address test per direction; give it once")
	}
	return nil
}

// optCTProto handles -m conntrack --ctproto.
func (p *ruleParser) optCTProto(o optUse) *Error {
	a := o.args[0]
	proto, ve := parseProto(a.text)
	if ve != nil {
		return p.valueErr(a, ve)
	}
	c := ProtoMatch{Proto: proto, Invert: o.invert}
	if prev := p.r.Match.CTProto; prev != nil && *prev != c {
		switch {
		case prev.Invert && !c.Invert && prev.Proto != c.Proto:
		case !prev.Invert && c.Invert && prev.Proto != c.Proto:
			c = *prev
		case prev.Invert && c.Invert:
			return p.ctRefuse(o, "two negated protocols are no one --ctproto")
		default:
			return p.ctRefuse(o, "a connection has one protocol, so the rule would match no packet")
		}
	}
	p.r.Match.CTProto = &c
	return nil
}

// ctStatusNames are the connection statuses (NONE: no bit).
var ctStatusNames = bitNames{{"EXPECTED", CTStatusExpected}, {"SEEN_REPLY", CTStatusSeenReply},
	{"ASSURED", CTStatusAssured}, {"CONFIRMED", CTStatusConfirmed}, {"NONE", 0}}

// optCTStatus handles -m conntrack --ctstatus.
func (p *ruleParser) optCTStatus(o optUse) *Error {
	a := o.args[0]
	mask, bad, off, ok := ctStatusNames.parse(a.text)
	if !ok {
		return p.valueErr(a, &valueErr{off: off, tok: bad, msg: "unknown connection status",
			hint: "statuses are NONE, EXPECTED, SEEN_REPLY, ASSURED and CONFIRMED, separated by commas"})
	}
	c, why := intersectCTStatus(p.r.Match.CTStatus, CTStatusMatch{Mask: mask, Invert: o.invert})
	if why != "" {
		return p.ctRefuse(o, why)
	}
	p.r.Match.CTStatus = c
	return nil
}

// intersectCTStatus is the one status test that matches what both old (nil:
// none) and c match, or why there is none. A connection has several status
// bits, so two tests intersect as one only when neither is negated and one
// implies the other, or when both are negated (no bit of either).
func intersectCTStatus(old *CTStatusMatch, c CTStatusMatch) (*CTStatusMatch, string) {
	switch {
	case old == nil || *old == c:
		return &c, ""
	case old.Invert && c.Invert:
		return &CTStatusMatch{Mask: old.Mask | c.Mask, Invert: true}, ""
	case !old.Invert && !c.Invert && old.Mask&^c.Mask == 0:
		return old, ""
	case !old.Invert && !c.Invert && c.Mask&^old.Mask == 0:
		return &c, ""
	}
	return nil, "a connection has several status bits, so their intersection is no one --ctstatus"
}

// optCTDir handles -m conntrack --ctdir ORIGINAL|REPLY.
func (p *ruleParser) optCTDir(o optUse) *Error {
	a := o.args[0]
	var d CTDir
	switch strings.ToUpper(a.text) {
	case "ORIGINAL":
		d = CTDirOriginal
	case "REPLY":
		d = CTDirReply
	default:
		return p.errAt(a, a.text, "not a direction", "write --ctdir ORIGINAL or --ctdir REPLY")
	}
	if prev := p.r.Match.CTDir; prev != nil && *prev != d {
		return p.ctRefuse(o, "a packet has one direction, so the rule would match no packet")
	}
	p.r.Match.CTDir = &d
	return nil
}

// pktTypeNames are the names of --pkt-type, canonical first (as
// iptables-save prints them), then iptables' aliases; any case.
var pktTypeNames = []struct {
	name string
	t    uint8
}{{"unicast", PktHost}, {"broadcast", PktBroadcast}, {"multicast", PktMulticast}, {"otherhost", PktOtherHost},
	{"host", PktHost}, {"bcast", PktBroadcast}, {"mcast", PktMulticast}}

// optPktType handles -m pkttype --pkt-type.
func (p *ruleParser) optPktType(o optUse) *Error {
	a := o.args[0]
	for _, n := range pktTypeNames {
		if strings.EqualFold(a.text, n.name) {
			p.r.Match.PktType = &PktTypeMatch{Type: n.t, Invert: o.invert}
			return nil
		}
	}
	return p.errAt(a, a.text, "unknown packet type", "types are unicast, broadcast, multicast and otherhost (aliases host, bcast, mcast)")
}

// formatPktType names a packet type as iptables-save does.
func formatPktType(t uint8) string {
	for _, n := range pktTypeNames {
		if n.t == t {
			return n.name
		}
	}
	return strconv.Itoa(int(t))
}

// addrTypeNames are -m addrtype's types, bit t named at index t.
var addrTypeNames = [NumAddrTypes]string{"UNSPEC", "UNICAST", "LOCAL", "BROADCAST", "ANYCAST", "MULTICAST",
	"BLACKHOLE", "UNREACHABLE", "PROHIBIT", "THROW", "NAT", "XRESOLVE"}

// optAddrType handles -m addrtype --src-type and --dst-type.
func (p *ruleParser) optAddrType(o optUse) *Error {
	a := o.args[0]
	var mask uint16
	off := 0
	for name := range strings.SplitSeq(a.text, ",") {
		i := slices.IndexFunc(addrTypeNames[:], func(n string) bool { return strings.EqualFold(n, name) })
		if i < 0 {
			return p.valueErr(a, &valueErr{off: off, tok: name, msg: "unknown address type",
				hint: "types are " + strings.Join(addrTypeNames[:], ", ") + ", separated by commas"})
		}
		mask |= 1 << i
		off += len(name) + 1
	}
	if mask&AddrIPv4Only != 0 {
		if err := p.setFamily(FamilyIPv4, a, a.text, o.opt.text+" "+a.text+" (IPv4 only)", o.opt.text+" "+a.text+" (IPv4)"); err != nil {
			err.Hint = "ip6tables refuses BROADCAST, BLACKHOLE, PROHIBIT, THROW, NAT and XRESOLVE: IPv6 has no such addresses"
			return err
		}
	}
	if p.r.Match.AddrType == nil {
		p.r.Match.AddrType = &AddrTypeMatch{}
	}
	m := p.r.Match.AddrType
	if o.opt.text == "--src-type" {
		m.Src, m.SrcInvert = mask, o.invert
	} else {
		m.Dst, m.DstInvert = mask, o.invert
	}
	return nil
}

// optAddrLimit handles --limit-iface-in and --limit-iface-out.
func (p *ruleParser) optAddrLimit(o optUse) *Error {
	limit, not := LimitIn, ChainOutput
	if o.opt.text == "--limit-iface-out" {
		limit, not = LimitOut, ChainInput
	}
	if p.r.Chain == not {
		return p.errAt(o.opt, "", fmt.Sprintf("%s cannot be used in the %s chain", o.opt.text, not),
			fmt.Sprintf("%s packets have no %s interface (the kernel refuses it)", not, map[uint8]string{LimitIn: "input", LimitOut: "output"}[limit]))
	}
	if p.r.Match.AddrType == nil {
		p.r.Match.AddrType = &AddrTypeMatch{}
	}
	p.r.Match.AddrType.Limit = limit
	return nil
}

// checkAddrType checks a rule's -m addrtype once it is read: a type to
// test, and (IPv6) no UNREACHABLE.
func (p *ruleParser) checkAddrType(at token) *Error {
	m := p.r.Match.AddrType
	if m == nil || m.Src == 0 && m.Dst == 0 {
		return p.errAt(at, "", "-m addrtype needs --src-type or --dst-type", "")
	}
	if (m.Src|m.Dst)&AddrUnreachable != 0 && p.fam != FamilyIPv4 && p.opt.Family != FamilyIPv4 {
		return p.errAt(at, "", "-m addrtype UNREACHABLE is supported in IPv4 rules only",
			"for IPv6 it takes a route lookup per packet that xdpfw's classifier cannot make; add -4 (docs/compat.md)")
	}
	return nil
}

// AddrTypeNames lists the address types, type t at index t.
func AddrTypeNames() []string { return slices.Clone(addrTypeNames[:]) }

// formatAddrTypes prints a type mask as iptables-save does.
func formatAddrTypes(mask uint16) string {
	var names []string
	for i, n := range addrTypeNames {
		if mask&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return strings.Join(names, ",")
}

// optFragment handles -f.
func (p *ruleParser) optFragment(o optUse) *Error {
	if err := p.setFamily(FamilyIPv4, o.opt, "", "-f (IPv4 fragments)", "-f (IPv4)"); err != nil {
		return err
	}
	frag := !o.invert
	p.r.Match.Fragment = &frag
	return nil
}

// optComment handles -m comment --comment.
func (p *ruleParser) optComment(o optUse) *Error {
	a := o.args[0]
	if p.comment == nil {
		return p.errAt(o.opt, "", "--comment given twice for one -m comment",
			"each comment needs its own -m comment: -m comment --comment A -m comment --comment B")
	}
	if ve := checkText(a.text, "comment", maxComment); ve != nil {
		return p.valueErr(a, ve)
	}
	if a.text != "" {
		p.r.Comments = append(p.r.Comments, a.text)
	}
	p.comment = nil
	return nil
}

// optModule handles -m MODULE.
func (p *ruleParser) optModule(o optUse) *Error {
	a := o.args[0]
	if err := p.afterState(token{text: o.opt.text + " " + a.text, col: o.opt.col}, optSpec{module: a.text}); err != nil {
		return err
	}
	if a.text == "conntrack" || a.text == "state" {
		p.newCTMatch(o.opt)
	}
	switch name := a.text; name {
	case "limit":
		return p.limitModule(o.opt)
	case "recent":
		return p.recentModule(o.opt)
	case "hashlimit":
		return p.hashLimitModule(o.opt)
	case "connlimit":
		return p.connLimitModule(o.opt)
	case "tcp", "udp", "sctp", "udplite":
		proto, _ := parseProto(name)
		p.needProto(o.opt, is(proto), fmt.Sprintf("-m %s needs -p %s", name, name), "")
		p.r.Match.L4Header = true // cleared at the end if an option of the module says so already
	case "icmp":
		p.needProto(o.opt, is(protoICMP), "-m icmp needs -p icmp", "")
		p.needICMPType(o.opt, "-m icmp needs --icmp-type", "for every ICMP type: --icmp-type any")
	case "icmp6":
		p.needProto(o.opt, is(protoICMPv6), "-m icmp6 needs -p ipv6-icmp", "")
		p.needICMPType(o.opt, "-m icmp6 needs --icmpv6-type", "-p ipv6-icmp alone matches every ICMPv6 packet")
	case "rt": // no option needed: a packet with a routing header
		if err := p.setFamily(FamilyIPv6, o.opt, "", "-m rt (IPv6 routing header)", "-m rt (IPv6)"); err != nil {
			return err
		}
		p.rt()
		p.modules[name] = &moduleUse{tok: o.opt}
	case "comment":
		if p.comment != nil {
			return p.errAt(*p.comment, "", "-m comment needs --comment", "")
		}
		if p.modules[name] == nil {
			p.checks = append(p.checks, func() *Error {
				if p.comment != nil {
					return p.errAt(*p.comment, "", "-m comment needs --comment", "")
				}
				return nil
			})
		}
		p.comment = &o.opt
		fallthrough
	case "multiport", "mac", "vlan", "set", "conntrack", "state", "mark", "pkttype", "addrtype",
		"iprange", "length", "ttl", "hl", "dscp", "tos", "ecn", "tcpmss":
		if name == "mark" && p.r.Chain != ChainOutput {
			return p.errAt(a, name, "-m mark in "+p.r.ChainName()+" is not supported: "+whyMarkMatch, hintMarkMatch)
		}
		if name == "addrtype" && p.modules[name] == nil {
			at := o.opt
			p.checks = append(p.checks, func() *Error { return p.checkAddrType(at) })
		}
		if p.modules[name] == nil || name == "conntrack" || name == "state" { // each of these a match of its own
			m := &moduleUse{tok: o.opt}
			p.modules[name] = m
			p.checks = append(p.checks, func() *Error {
				if m.used {
					return nil
				}
				opts, _ := moduleOptions(name)
				return p.errAt(m.tok, "", fmt.Sprintf("-m %s needs %s", name, opts), "")
			})
		}
	default:
		if r, ok := refusedModules[name]; ok {
			return p.errAt(a, name, "module "+name+" is not supported: "+r.why, r.hint)
		}
		return p.errAt(a, name, fmt.Sprintf("module %s is not supported", Clip(name)), supportedModules)
	}
	return nil
}

// needICMPType adds the check that -m icmp (icmp6) has its type option, which
// iptables requires: the module has no meaning without one.
func (p *ruleParser) needICMPType(at token, msg, hint string) {
	p.checks = append(p.checks, func() *Error {
		if p.r.Match.ICMP == nil {
			return p.errAt(at, "", msg, hint)
		}
		return nil
	})
}

// optCounters handles -c PACKETS BYTES (accepted and ignored).
func (p *ruleParser) optCounters(o optUse) *Error {
	for _, a := range o.args {
		if !isDigits(a.text) {
			return p.errAt(a, a.text, "not a counter value", "write -c PACKETS BYTES with two numbers")
		}
	}
	return nil
}

// optMark handles -m mark [!] --mark VALUE[/MASK] (OUTPUT only: optModule
// refuses -m mark elsewhere). Numbers are decimal, 0x hexadecimal or 0
// octal, as iptables reads them.
func (p *ruleParser) optMark(o optUse) *Error {
	a := o.args[0]
	v, m, ok := strings.Cut(a.text, "/")
	value, err := strconv.ParseUint(v, 0, 32)
	mask := uint64(0xffffffff)
	if err == nil && ok {
		mask, err = strconv.ParseUint(m, 0, 32)
	}
	if err != nil {
		return p.errAt(a, a.text, "bad --mark", "a mark is VALUE or VALUE/MASK, 32-bit numbers (0x1, 0x10/0xff, 7)")
	}
	p.r.Match.Mark = &MarkMatch{Value: uint32(value), Mask: uint32(mask), Invert: o.invert}
	return nil
}
