package rules

import (
	"math/rand/v2"
	"net/netip"
)

// Value pools of the random generator: most values come from these small
// sets, so that random rules overlap and random packets built from the same
// pools hit them.
var (
	randomIPv4 = [...]string{"10.0.0.1", "10.0.0.2", "10.1.2.3", "10.200.0.1", "192.168.1.10", "172.16.5.4", "8.8.8.8"}
	randomIPv6 = [...]string{"2001:db8::1", "2001:db8::2", "2001:db8:1::10", "fd00::1", "fd00:1::2", "fe80::1", "::1"}
	randomPort = [...]uint16{0, 22, 53, 80, 123, 443, 1024, 8080, 65535}
	randomMAC  = [...][6]byte{
		{0x00, 0x11, 0x22, 0x33, 0x44, 0x55}, {0x02, 0x00, 0x00, 0x00, 0x00, 0x01},
		{0x02, 0x00, 0x00, 0x00, 0x00, 0x02}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	}
	randomIface   = [...]string{"veth0", "eth0", "eth+"}
	randomVLAN    = [...]uint16{0, 1, 10, 100, 4095}
	randomComment = [...]string{"ssh", "web servers", `say "hi"`, `back\slash`, "# not a comment", "!"}
	// log prefixes, as people write them (a trailing space, a colon)
	randomPrefixText = [...]string{"DROP: ", "fw ", "INPUT denied ", `"quoted" `, "ssh", "!"}
)

// RandomRuleSet returns a random, valid rule set of n rules (chains INPUT
// and FORWARD) and up to three random policies, for differential and fuzz
// tests. It covers IPv4, IPv6 and both; prefixes of every length; single
// ports, ranges and multiport lists; negations; TCP flags; ICMP and ICMPv6
// types and codes; a bare -m tcp; MAC addresses; VLAN ids; -i; -o (FORWARD); -m pkttype; -m addrtype; -f;
// connection states; header matches (RandomHeaderMatches); the verdicts ACCEPT, DROP and (rarely) REJECT;
// LOG, NFLOG and ULOG rules and --log, with log options; sometimes a raw table (NOTRACK rules). Values
// mostly come from small pools so that
// rules and packets collide. Parse(rs.String()) yields the same rule set
// (ignoring positions); Rule.Text is set, Pos is not.
func RandomRuleSet(r *rand.Rand, n int) *RuleSet {
	return RandomRuleSetWith(r, n, RandomKnobs{})
}

// RandomKnobs switch parts of the random vocabulary off. The zero value is
// RandomRuleSet's: everything xdpfw reads. A knob never changes what is
// drawn, only what is kept, so a seed gives the same rule set shape with
// any knobs (vocabulary added later goes behind a knob when iptables lacks
// it, so that the differential test against real iptables keeps loading).
type RandomKnobs struct {
	// IptablesOnly leaves out xdpfw's extensions, which iptables-restore
	// refuses: -m vlan, --mac-destination, --log on a verdict, --log-rate
	// and --log-burst, ports and a bare -m udplite on -p udplite,
	// --icmpv6-type any. What is left loads into iptables-restore and
	// ip6tables-restore (both back ends) as String prints it.
	IptablesOnly bool
	// NoCTState leaves out -m conntrack --ctstate (for a test whose two
	// sides cannot be made to see the same connection states).
	NoCTState bool
	// NoCTOptions leaves out -m conntrack's tests other than --ctstate
	// (--ctdir, --ctstatus, --ctproto, --ctorig*/--ctrepl*: for a test
	// whose reference does not know the connection's direction and status).
	NoCTOptions bool
}

// keep removes from rule what k switches off.
func (k RandomKnobs) keep(rule *Rule) {
	m, t := &rule.Match, &rule.Target
	if k.NoCTState { // and the tests that need a connection
		m.CTState = nil
	}
	if k.NoCTState || k.NoCTOptions {
		m.CTProto, m.CTStatus, m.CTDir = nil, nil, nil
		m.CTOrigSrc, m.CTOrigDst, m.CTReplSrc, m.CTReplDst = nil, nil, nil, nil
	}
	if k.IptablesOnly {
		m.VLAN, m.VLANPrio, m.MACDst = nil, nil, nil
		if t.Verdict != VerdictLog {
			*t = Target{Verdict: t.Verdict, Chain: t.Chain, RejectWith: t.RejectWith}
		}
		t.LogRate, t.LogBurst = LogRate{}, 0
		if p := m.Proto; p != nil && !p.Invert && p.Proto == protoUDPLite {
			m.SPort, m.DPort, m.Ports = nil, nil, nil
		}
		if i := m.ICMP; i != nil && i.Any && m.Family == FamilyIPv6 {
			m.ICMP = nil
		}
		if g := t.Group; g != nil && g.ULOG { // Linux has had no ULOG since 3.17
			t.Group = nil
		}
	}
	rule.Text = rule.Spec()
}

// RandomRuleSetWith is RandomRuleSet with parts of the vocabulary switched
// off (RandomKnobs).
func RandomRuleSetWith(r *rand.Rand, n int, k RandomKnobs) *RuleSet {
	rs := &RuleSet{}
	for range r.IntN(4) {
		rs.Policies = append(rs.Policies, Policy{
			Chain:   pick(r, []Chain{ChainInput, ChainForward}),
			Family:  pick(r, []Family{FamilyAny, FamilyIPv4, FamilyIPv6}),
			Verdict: pick(r, []Verdict{VerdictAccept, VerdictDrop}),
		})
	}
	for range n {
		rule := RandomRule(r)
		if k != (RandomKnobs{}) {
			k.keep(&rule)
		}
		rs.Rules = append(rs.Rules, rule)
	}
	// A bare -m tcp (udp, ...) on some rules of a port protocol without a
	// port or flag test: drawn last, from a stream of its own, so that the
	// rule sets of the seeds the tests use stay what they were (a 10k-rule
	// set's tree size varies a lot from one draw to another).
	l4 := rand.New(rand.NewPCG(r.Uint64(), 0x14))
	for i := range rs.Rules {
		m := &rs.Rules[i].Match
		if p := m.Proto; p != nil && !p.Invert && isPortProto(p.Proto) && !m.NeedsL4() && chance(l4, 15) &&
			!(k.IptablesOnly && p.Proto == protoUDPLite) {
			m.L4Header = true
			rs.Rules[i].Text = rs.Rules[i].Spec()
		}
	}
	// Some LOG rules are NFLOG or ULOG rules (their events are LOG
	// events): drawn last, from a stream of their own, as above.
	g := rand.New(rand.NewPCG(l4.Uint64(), 0x9f))
	for i := range rs.Rules {
		if t := &rs.Rules[i].Target; t.Verdict == VerdictLog && chance(g, 25) {
			t.Group = &LogGroup{ULOG: chance(g, 20), Group: uint16(g.IntN(3))}
			if t.Group.ULOG && t.Group.Group == 1 {
				t.Group.Group = 0 // the default, as the parser stores it
			}
			if chance(g, 30) {
				t.Group.Size = uint32(g.IntN(200))
				t.Group.Cut = !t.Group.ULOG || t.Group.Size != 0 // as the parser stores it
			}
			t.LogLevel = "" // NFLOG and ULOG have none
			rs.Rules[i].Text = rs.Rules[i].Spec()
		}
	}
	// Some LOG rules have LOG's flags (--log-tcp-sequence...), which change
	// only their log lines: from a stream that takes nothing of the others'.
	lf := rand.New(rand.NewPCG(uint64(len(rs.Rules)), 0x1f))
	for i := range rs.Rules {
		if t := &rs.Rules[i].Target; t.Verdict == VerdictLog && t.Group == nil && chance(lf, 20) {
			t.LogFlags = LogFlags(lf.IntN(64)) &^ 0x10
			rs.Rules[i].Text = rs.Rules[i].Spec()
		}
	}
	// Some sets have a raw table: NOTRACK rules in PREROUTING (drawn
	// last, from a stream of their own, as above).
	rr := rand.New(rand.NewPCG(g.Uint64(), 0x4a))
	if chance(rr, 15) {
		for range 1 + rr.IntN(3) {
			rs.Raw = append(rs.Raw, randomRawRule(rr))
		}
	}
	// -m pkttype on some rules, from a stream of its own too.
	pt := rand.New(rand.NewPCG(r.Uint64(), 0x97))
	for i := range rs.Rules {
		if chance(pt, RandomPktTypePercent) {
			rs.Rules[i].Match.PktType = &PktTypeMatch{Type: uint8(pt.IntN(4)), Invert: chance(pt, 30)}
			rs.Rules[i].Text = rs.Rules[i].Spec()
		}
	}
	// -m addrtype on some rules, from a stream of its own too.
	at := rand.New(rand.NewPCG(r.Uint64(), 0xad))
	for i := range rs.Rules {
		if chance(at, RandomAddrTypePercent) {
			randomAddrType(at, &rs.Rules[i])
			rs.Rules[i].Text = rs.Rules[i].Spec()
		}
	}
	// -o on some FORWARD rules, from a stream of its own too.
	oif := rand.New(rand.NewPCG(r.Uint64(), 0x0f))
	for i := range rs.Rules {
		if rs.Rules[i].Chain == ChainForward && chance(oif, RandomOutIfacePercent) {
			rs.Rules[i].Match.OutIface = randomIfaceMatch(oif)
			rs.Rules[i].Text = rs.Rules[i].Spec()
		}
	}
	// Header matches (-m iprange, length, ttl/hl, dscp, tos, ecn) and
	// -m conntrack's other tests, from a stream of their own for the same
	// reason.
	if RandomHeaderMatches {
		hdr := rand.New(rand.NewPCG(l4.Uint64(), 0x68))
		for i := range rs.Rules {
			randomHeader(hdr, &rs.Rules[i].Match)
			rs.Rules[i].Text = rs.Rules[i].Spec()
		}
		// (seeded from hdr after its last draw: nothing drawn above changes)
		ct := rand.New(rand.NewPCG(hdr.Uint64(), 0xc7))
		for i := range rs.Rules {
			if randomCTConnless(ct, &rs.Rules[i].Match) {
				rs.Rules[i].Text = rs.Rules[i].Spec()
			}
		}
	}
	// Some sets have an xdpfw-priority table, from a stream of its own
	// too; iptables has none (IptablesOnly).
	pr := rand.New(rand.NewPCG(rr.Uint64(), 0x9a)) // rr's: the main stream, and so later sets, stay what they were
	if chance(pr, 20) && !k.IptablesOnly {
		for range pr.IntN(6) {
			rs.Priority = append(rs.Priority, RandomPriorityRule(pr))
		}
		if chance(pr, 30) {
			rs.PriorityPolicy = VerdictHigh
		}
	}
	// the knobs last: they remove what any stream above drew
	for i := range rs.Rules {
		k.keep(&rs.Rules[i])
	}
	return rs
}

// RandomPktTypePercent is how often RandomRuleSet gives a rule -m pkttype
// (0: never).
var RandomPktTypePercent = 8

// RandomAddrTypePercent is how often RandomRuleSet gives a rule -m
// addrtype (0: never).
var RandomAddrTypePercent = 8

// randomAddrType gives rule a random -m addrtype its family allows.
func randomAddrType(r *rand.Rand, rule *Rule) {
	m := &rule.Match
	types := func() uint16 {
		var mask uint16
		for mask == 0 {
			for t := range NumAddrTypes {
				if chance(r, 20) {
					mask |= 1 << t
				}
			}
			if m.Family != FamilyIPv4 {
				mask &^= AddrIPv4Only | AddrUnreachable
			}
		}
		return mask
	}
	a := &AddrTypeMatch{}
	if chance(r, 60) {
		a.Src, a.SrcInvert = types(), chance(r, 25)
	}
	if a.Src == 0 || chance(r, 40) {
		a.Dst, a.DstInvert = types(), chance(r, 25)
	}
	if chance(r, 30) {
		a.Limit = LimitIn
		if rule.Chain == ChainForward && chance(r, 50) {
			a.Limit = LimitOut
		}
	}
	m.AddrType = a
}

// RandomOutIfacePercent is how often RandomRuleSet gives a FORWARD rule
// -o (0: never, for tests whose packets have no output device).
var RandomOutIfacePercent = 30

// randomIfaceMatch is a random -i or -o.
func randomIfaceMatch(r *rand.Rand) *IfaceMatch {
	name := pick(r, randomIface[:])
	i := &IfaceMatch{Name: name, Invert: chance(r, 20)}
	if name[len(name)-1] == '+' {
		i.Name, i.Prefix = name[:len(name)-1], true
	}
	return i
}

// RandomHeaderMatches makes RandomRuleSet draw header matches and the
// conntrack tests other than --ctstate too (on by default; a test that
// needs the rule sets drawn before them turns it off).
var RandomHeaderMatches = true

// Value pools of the header matches: lengths around the random packets'
// (a header and a few bytes), TTLs at the edges.
var (
	randomLength = [...]uint16{0, 20, 28, 40, 48, 52, 60, 64, 72, 80, 100, 1500, 65535}
	randomTTL    = [...]uint8{0, 1, 2, 63, 64, 65, 128, 254, 255}
	randomMSS    = [...]uint16{0, 536, 1220, 1360, 1440, 1460, 8960, 65535}
)

// randomCTConnless gives, at random, a rule whose --ctstate lets packets
// without a connection (INVALID, UNTRACKED) through a test that reads a
// connection beside it (--ctstatus, --ctproto or --ctdir), which the
// kernel's xt_conntrack skips for such packets; it reports whether it did.
func randomCTConnless(r *rand.Rand, m *Match) bool {
	c := m.CTState
	const none = CTInvalid | CTUntracked
	if c == nil || c.Invert && c.Mask&none == none || !c.Invert && c.Mask&none == 0 ||
		m.CTProto != nil || m.CTStatus != nil || m.CTDir != nil || m.CTAddrs() || !chance(r, 40) {
		return false
	}
	switch r.IntN(3) {
	case 0:
		m.CTStatus = &CTStatusMatch{Mask: uint8(1 + r.IntN(15)), Invert: chance(r, 40)}
	case 1:
		m.CTProto = &ProtoMatch{Proto: pick(r, []uint8{protoTCP, protoUDP, protoICMP}), Invert: chance(r, 40)}
	default:
		d := pick(r, []CTDir{CTDirOriginal, CTDirReply})
		m.CTDir = &d
	}
	return true
}

// randomHeader adds some header matches to m.
func randomHeader(r *rand.Rand, m *Match) {
	if m.Family != FamilyAny {
		for _, dst := range []**IPRangeMatch{&m.SrcRange, &m.DstRange} {
			if chance(r, 6) {
				a, b := randomPrefix(r, m.Family), randomPrefix(r, m.Family)
				lo, hi := a.Addr(), b.Addr()
				if chance(r, 50) { // a range around one pool address
					lo, hi = b.Addr(), lastAddr(b)
				}
				if hi.Less(lo) {
					lo, hi = hi, lo
				}
				*dst = &IPRangeMatch{From: lo, To: hi, Invert: chance(r, 20)}
			}
		}
		if chance(r, 6) {
			t := &TTLMatch{Op: pick(r, []TTLOp{TTLEq, TTLNe, TTLLt, TTLGt}), Value: pick(r, randomTTL[:])}
			m.TTL = t
		}
	}
	if chance(r, 6) {
		a, b := pick(r, randomLength[:]), pick(r, randomLength[:])
		if chance(r, 40) {
			b = a
		}
		m.Length = &LengthMatch{Min: min(a, b), Max: max(a, b), Invert: chance(r, 20)}
	}
	switch n := r.IntN(100); {
	case n < 4:
		m.DSCP = &DSCPMatch{Value: uint8(r.IntN(64)), Invert: chance(r, 20)}
		if chance(r, 50) {
			m.DSCP.Value = pick(r, []uint8{0, 8, 10, 46})
		}
	case n < 7:
		t := pick(r, tosNames)
		m.TOS = &TOSMatch{Value: t.value, Mask: 0x3f, Invert: chance(r, 20)}
		if chance(r, 50) {
			m.TOS.Mask = uint8(r.UintN(256))
			m.TOS.Value = uint8(r.UintN(256)) & m.TOS.Mask
		}
	}
	if chance(r, 4) {
		m.ECN = &ECNMatch{IPECT: int8(r.IntN(4)), IPInvert: chance(r, 20)}
	}
	if p := m.Proto; p != nil && !p.Invert && p.Proto == protoTCP && chance(r, 5) {
		if m.ECN == nil {
			m.ECN = &ECNMatch{IPECT: -1}
		}
		m.ECN.TCPMask = pick(r, []uint8{TCPFlagECE, TCPFlagCWR, TCPFlagECE | TCPFlagCWR})
		m.ECN.TCPComp = m.ECN.TCPMask & uint8(r.UintN(256))
		m.L4Header = false // the ECN bits need the header already
	}
	if m.Family == FamilyIPv6 && chance(r, 4) {
		rt := &RTMatch{}
		if chance(r, 60) {
			rt.Type = &RTValue{V: pick(r, []uint32{0, 2, 3, 4, 253, 256}), Invert: chance(r, 20)}
		}
		if chance(r, 40) {
			a, b := pick(r, []uint32{0, 1, 2, 5, 255, 300}), pick(r, []uint32{0, 1, 3, 255, 0xffffffff})
			rt.Segs = &RTRange{Lo: min(a, b), Hi: max(a, b), Invert: chance(r, 20)}
			if rt.Segs.Lo == 0 && rt.Segs.Hi == 0xffffffff && !rt.Segs.Invert {
				rt.Segs = nil // iptables-save prints no option: read back as none
			}
		}
		if chance(r, 30) {
			rt.Len = &RTValue{V: pick(r, []uint32{8, 16, 24, 3}), Invert: chance(r, 20)}
		}
		m.RT = rt
	}
	if p := m.Proto; p != nil && !p.Invert && p.Proto == protoTCP && chance(r, 5) {
		a, b := pick(r, randomMSS[:]), pick(r, randomMSS[:])
		m.MSS = &MSSMatch{Min: min(a, b), Max: max(a, b), Invert: chance(r, 25)}
		m.L4Header = false
	}
	if chance(r, 4) {
		m.CTProto = &ProtoMatch{Proto: pick(r, []uint8{protoTCP, protoUDP, protoICMP, protoICMPv6, 47}), Invert: chance(r, 20)}
	}
	if chance(r, 4) {
		m.CTStatus = &CTStatusMatch{Mask: uint8(r.UintN(16)), Invert: chance(r, 20)}
	}
	if chance(r, 4) {
		d := pick(r, []CTDir{CTDirOriginal, CTDirReply})
		m.CTDir = &d
	}
	if c := m.CTState; c != nil && chance(r, 10) {
		c.Mask |= pick(r, []uint8{CTSNAT, CTDNAT})
	}
	// a connection's address (without NAT: the packet's, by direction), in
	// states without RELATED (whose connection the data plane does not know)
	if m.Family != FamilyAny && m.Src == nil && m.Dst == nil && chance(r, 4) {
		a := &AddrMatch{Prefix: randomPrefix(r, m.Family), Invert: chance(r, 20)}
		switch r.IntN(4) {
		case 0:
			m.CTOrigSrc = a
		case 1:
			m.CTOrigDst = a
		case 2:
			m.CTReplSrc = a
		default:
			m.CTReplDst = a
		}
		m.CTState = &CTStateMatch{Mask: pick(r, []uint8{CTNew, CTEstablished, CTNew | CTEstablished})}
	}
}

// lastAddr is the last address of prefix p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// RandomRule returns one random, valid rule (see RandomRuleSet).
func RandomRule(r *rand.Rand) Rule {
	rule := Rule{Chain: ChainInput}
	if r.IntN(10) < 3 {
		rule.Chain = ChainForward
	}
	fam := pick(r, []Family{FamilyIPv4, FamilyIPv4, FamilyIPv6, FamilyIPv6, FamilyAny})
	m := &rule.Match
	m.Family = fam
	if fam != FamilyAny {
		if chance(r, 40) {
			m.Src = &AddrMatch{Prefix: randomPrefix(r, fam), Invert: chance(r, 20)}
		}
		if chance(r, 30) {
			m.Dst = &AddrMatch{Prefix: randomPrefix(r, fam), Invert: chance(r, 20)}
		}
	}
	if chance(r, 65) {
		m.Proto = randomProto(r, fam)
	}
	if p := m.Proto; p != nil && !p.Invert {
		randomL4(r, m, p.Proto)
	}
	if fam == FamilyIPv4 && chance(r, 8) {
		frag := chance(r, 50)
		m.Fragment = &frag
	}
	if chance(r, 25) {
		m.InIface = randomIfaceMatch(r)
	}
	if chance(r, 10) {
		m.MACSrc = &MACMatch{Addr: pick(r, randomMAC[:]), Invert: chance(r, 20)}
	}
	if chance(r, 5) {
		m.MACDst = &MACMatch{Addr: pick(r, randomMAC[:]), Invert: chance(r, 20)}
	}
	if chance(r, 10) {
		id := pick(r, randomVLAN[:])
		if chance(r, 30) {
			id = uint16(r.IntN(maxVLANID + 1))
		}
		m.VLAN = &VLANMatch{ID: id, Invert: chance(r, 20)}
		randomVLANPrio(r, m)
	}
	if chance(r, 12) {
		mask := uint8(1 + r.IntN(int(CTAll)))
		m.CTState = &CTStateMatch{Mask: mask, Invert: chance(r, 15)}
	}
	for chance(r, 10) && len(rule.Comments) < 2 {
		rule.Comments = append(rule.Comments, pick(r, randomComment[:]))
	}
	rule.Target = randomTarget(r, m)
	rule.Text = rule.Spec()
	return rule
}

// pick returns a random element of s.
func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

// chance returns true with the given percentage.
func chance(r *rand.Rand, percent int) bool { return r.IntN(100) < percent }

// randomPrefix returns a masked prefix of family f, of any length, mostly
// around a pool address.
func randomPrefix(r *rand.Rand, f Family) netip.Prefix {
	var addr netip.Addr
	switch {
	case f == FamilyIPv4 && chance(r, 80):
		addr = netip.MustParseAddr(pick(r, randomIPv4[:]))
	case f == FamilyIPv4:
		var b [4]byte
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		addr = netip.AddrFrom4(b)
	case chance(r, 80):
		addr = netip.MustParseAddr(pick(r, randomIPv6[:]))
	default:
		var b [16]byte
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		addr = netip.AddrFrom16(b)
	}
	bits := addr.BitLen()
	if chance(r, 70) {
		bits = r.IntN(addr.BitLen() + 1)
	}
	return netip.PrefixFrom(addr, bits).Masked()
}

// randomProto returns a -p match valid for family f.
func randomProto(r *rand.Rand, f Family) *ProtoMatch {
	p := &ProtoMatch{Invert: chance(r, 10)}
	switch n := r.IntN(100); {
	case n < 35:
		p.Proto = protoTCP
	case n < 60:
		p.Proto = protoUDP
	case n < 75 && f == FamilyIPv4:
		p.Proto = protoICMP
	case n < 75 && f == FamilyIPv6:
		p.Proto = protoICMPv6
	case n < 80:
		p.Proto = protoSCTP
	case n < 85:
		p.Proto = protoUDPLite
	default:
		// Any other protocol; 1 and 58 would imply a family.
		p.Proto = uint8(2 + r.IntN(254))
		if p.Proto == protoICMPv6 {
			p.Proto = 47
		}
	}
	return p
}

// randomL4 adds the port, TCP flag and ICMP matches that protocol proto allows.
func randomL4(r *rand.Rand, m *Match, proto uint8) {
	switch {
	case isPortProto(proto):
		if chance(r, 25) {
			m.SPort = randomPorts(r, true)
		}
		if chance(r, 55) {
			m.DPort = randomPorts(r, true)
		}
		if chance(r, 8) {
			m.Ports = randomPorts(r, false)
		}
		if proto == protoTCP && chance(r, 25) {
			f := &TCPFlagsMatch{Mask: synMask, Comp: synComp, Invert: chance(r, 20)}
			if chance(r, 60) {
				f.Mask = uint8(r.UintN(uint(TCPFlagALL) + 1))
				f.Comp = f.Mask & uint8(r.UintN(uint(TCPFlagALL)+1))
			}
			m.TCPFlags = f
		}
	case proto == protoICMP || proto == protoICMPv6:
		if chance(r, 60) {
			m.ICMP = randomICMP(r, proto == protoICMPv6)
		}
	}
}

// randomPorts returns a port match; with single set, often one port or range.
func randomPorts(r *rand.Rand, single bool) *PortMatch {
	m := &PortMatch{Invert: chance(r, 15)}
	if single && chance(r, 70) {
		m.Ranges = []PortRange{randomPortRange(r)}
		return m
	}
	for count := 0; ; {
		pr := randomPortRange(r)
		cost := 1
		if pr.Lo != pr.Hi {
			cost = 2
		}
		if count+cost > maxMultiport {
			break
		}
		m.Ranges = append(m.Ranges, pr)
		count += cost
		if len(m.Ranges) >= 2 && chance(r, 40) {
			break
		}
	}
	return m
}

// randomRawRule returns a NOTRACK rule of the raw table's PREROUTING, in
// the vocabulary the raw table takes (family, protocol, source, one
// destination port range).
func randomRawRule(r *rand.Rand) Rule {
	var m Match
	m.Family = pick(r, []Family{FamilyAny, FamilyIPv4, FamilyIPv6})
	if m.Family != FamilyAny && chance(r, 50) {
		m.Src = &AddrMatch{Prefix: randomPrefix(r, m.Family), Invert: chance(r, 10)}
	}
	if chance(r, 70) {
		m.Proto = &ProtoMatch{Proto: pick(r, []uint8{protoTCP, protoUDP})}
		if chance(r, 60) {
			m.DPort = &PortMatch{Ranges: []PortRange{randomPortRange(r)}, Invert: chance(r, 10)}
		}
	}
	rule := Rule{Chain: ChainPrerouting, Match: m, Target: Target{Verdict: VerdictNotrack, CT: chance(r, 30)}}
	rule.Text = rule.Spec()
	return rule
}

// randomPortRange returns one port (mostly from the pool) or a range.
func randomPortRange(r *rand.Rand) PortRange {
	port := func() uint16 {
		if chance(r, 70) {
			return pick(r, randomPort[:])
		}
		return uint16(r.UintN(65536))
	}
	a := port()
	if chance(r, 65) {
		return PortRange{a, a}
	}
	b := port()
	if a > b {
		a, b = b, a
	}
	if a == b {
		// A range with Lo == Hi prints as a single port: keep it one.
		return PortRange{a, a}
	}
	return PortRange{a, b}
}

// randomICMP returns an ICMP (v6: ICMPv6) type match.
func randomICMP(r *rand.Rand, v6 bool) *ICMPMatch {
	m := &ICMPMatch{Code: -1, Invert: chance(r, 20)}
	names := icmpNames[:]
	if v6 {
		names = icmpv6Names[:]
	}
	switch n := r.IntN(100); {
	case n < 10:
		m.Any = true
	case n < 70:
		name := pick(r, names)
		m.Type, m.Code = name.typ, name.code
	default:
		m.Type = uint8(r.UintN(256))
		if chance(r, 50) {
			m.Code = int16(r.IntN(256))
			if chance(r, 50) {
				m.Code = int16(r.IntN(4))
			}
		}
	}
	*m = m.canonical(v6)
	return m
}

// randomTarget returns ACCEPT or DROP, sometimes REJECT with a --reject-with
// valid for the rule, sometimes LOG; some ACCEPT, DROP and REJECT rules
// log too (--log). Log options come with both.
func randomTarget(r *rand.Rand, m *Match) Target {
	var t Target
	switch n := r.IntN(100); {
	case n < 42:
		t = Target{Verdict: VerdictAccept}
	case n < 84:
		t = Target{Verdict: VerdictDrop}
	case n < 92:
		t = Target{Verdict: VerdictLog}
	default:
		t = randomReject(r, m)
	}
	if t.Verdict != VerdictLog && chance(r, 12) {
		t.Log = true
	}
	if t.Logs() {
		randomLogOptions(r, &t)
	}
	return t
}

// randomLogOptions sets some of the log options of a logging target.
func randomLogOptions(r *rand.Rand, t *Target) {
	if chance(r, 50) {
		t.LogPrefix = pick(r, randomPrefixText[:])
	}
	if chance(r, 20) {
		t.LogLevel = pick(r, logLevels[:])
		if t.LogLevel == DefaultLogLevel {
			t.LogLevel = "" // as the parser stores it
		}
	}
	if chance(r, 20) {
		t.LogRate = LogRate{N: uint32(1 + r.IntN(100)), Unit: pick(r, []RateUnit{PerSecond, PerMinute, PerHour, PerDay})}
	}
	if chance(r, 15) {
		t.LogBurst = uint32(1 + r.IntN(50))
	}
}

// randomReject returns REJECT, half the time with a --reject-with valid for
// the rule.
func randomReject(r *rand.Rand, m *Match) Target {
	t := Target{Verdict: VerdictReject}
	if chance(r, 50) {
		return t
	}
	var choices []string
	for _, rt := range rejectTypes {
		if rt.name == rt.canon && rt.family != FamilyAny && rt.family == m.Family {
			choices = append(choices, rt.name)
		}
	}
	if p := m.Proto; p != nil && !p.Invert && p.Proto == protoTCP {
		choices = append(choices, "tcp-reset")
	}
	if len(choices) > 0 {
		t.RejectWith = pick(r, choices)
	}
	return t
}

// RandomLimits gives about percent of rs's deciding rules a -m limit of a
// few a hour or a day with a small burst: no token comes back while a
// test runs (a rate of at most 3 an hour refills one in 20 minutes), so
// the buckets' state is the count of packets each rule decided, and a
// reference that models them with its clock standing agrees exactly. A
// knob apart from RandomRuleSet: edits of rule sets with a limit are
// compiled in full (rules.Rule.Budgeted), which the delta tests must not
// meet unasked.
func RandomLimits(r *rand.Rand, rs *RuleSet, percent int) {
	for i := range rs.Rules {
		rule := &rs.Rules[i]
		if !rule.Target.Verdict.Terminal() || !chance(r, percent) {
			continue
		}
		rule.Match.Limit = &LimitMatch{
			Rate:  LogRate{N: uint32(1 + r.IntN(3)), Unit: pick(r, []RateUnit{PerHour, PerDay})},
			Burst: uint32(1 + r.IntN(6)),
		}
		rule.Text = rule.Spec()
	}
}

// RandomRecent gives about percent of rs's deciding and LOG INPUT and
// FORWARD rules a -m recent match on one of three lists (--set, --rcheck,
// --update or --remove; --seconds of an hour or none, so that no time
// stamp ages while a test runs; --hitcount 1 to 3; source or destination;
// sometimes a mask, sometimes negated). A knob apart from RandomRuleSet,
// as RandomLimits. Rules of a chain beyond compile.MaxStateNotes' reach
// may make the compiler refuse the set: callers keep percent small or
// retry.
func RandomRecent(r *rand.Rand, rs *RuleSet, percent int) {
	for i := range rs.Rules {
		rule := &rs.Rules[i]
		if !stateOnRule(rule) || rule.Match.Limit != nil || rule.Match.HashLimit != nil || rule.Match.ConnLimit != nil || !chance(r, percent) {
			continue
		}
		m := &RecentMatch{Op: RecentOp(1 + r.IntN(4)), Name: pick(r, []string{"a", "b", DefaultRecentName}),
			Dest: chance(r, 20)}
		if m.Op == RecentCheck || m.Op == RecentUpdate {
			if chance(r, 50) {
				m.Seconds = 3600
			}
			if chance(r, 50) {
				m.HitCount = uint32(1 + r.IntN(3))
			}
			m.TTL = chance(r, 20)
		}
		m.Invert = chance(r, 10)
		m.Mask = FullMask(rule.Match.Family) // as the parser leaves it
		if f := rule.Match.Family; f != FamilyAny && chance(r, 20) {
			if f == FamilyIPv4 {
				m.Mask = netip.AddrFrom4([4]byte{255, 255, 255, 0})
			} else {
				m.Mask = netip.MustParseAddr("ffff:ffff:ffff:ffff::")
			}
		}
		rule.Match.Recent = m
		rule.Text = rule.Spec()
	}
}

// stateOnRule reports whether RandomRecent and RandomHashLimit may give
// rule their match: a deciding rule or a LOG rule (which logs when its
// test matches), not one with --log, not in OUTPUT (tc egress settles no
// state).
func stateOnRule(rule *Rule) bool {
	v := rule.Target.Verdict
	return (v.Terminal() || v == VerdictLog) && !rule.Target.Log && rule.Chain != ChainOutput
}

// RandomStateOnChains is the knob for stateful tests on rules that decide
// nothing themselves: it gives about percent of rs's jumps, gotos,
// RETURNs and rules without -j (after RandomChains) a -m limit (a burst
// of 1 to 3, one token an hour or a day: none comes back while a test
// runs, so a bucket is exactly the packets that took from it) or a
// -m recent (as RandomRecent). Rules OUTPUT reaches keep none (the tc
// egress program settles no such tests: the compiler refuses them).
// Rule.Text is set.
func RandomStateOnChains(r *rand.Rand, rs *RuleSet, percent int) {
	// the user chains OUTPUT reaches, through jumps and gotos
	fromOut := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for i := range rs.Rules {
			rule := &rs.Rules[i]
			v := rule.Target.Verdict
			if (v == VerdictJump || v == VerdictGoto) && !fromOut[rule.Target.Chain] &&
				(rule.Chain == ChainOutput || rule.Chain == ChainUser && fromOut[rule.UserChain]) {
				fromOut[rule.Target.Chain], changed = true, true
			}
		}
	}
	for i := range rs.Rules {
		rule := &rs.Rules[i]
		v := rule.Target.Verdict
		if v.Terminal() || v == VerdictLog || rule.Chain == ChainOutput || rule.Chain == ChainUser && fromOut[rule.UserChain] ||
			rule.Match.Limit != nil || rule.Match.Recent != nil || rule.Match.HashLimit != nil || rule.Match.ConnLimit != nil || !chance(r, percent) {
			continue
		}
		if chance(r, 50) {
			rule.Match.Limit = &LimitMatch{Rate: LogRate{N: 1, Unit: pick(r, []RateUnit{PerHour, PerDay})}, Burst: uint32(1 + r.IntN(3))}
		} else {
			m := &RecentMatch{Op: RecentOp(1 + r.IntN(4)), Name: pick(r, []string{"a", "b", DefaultRecentName}), Dest: chance(r, 20)}
			if m.Op == RecentCheck || m.Op == RecentUpdate {
				if chance(r, 50) {
					m.HitCount = uint32(1 + r.IntN(3))
				}
				m.TTL = chance(r, 20)
			}
			m.Invert = chance(r, 10)
			m.Mask = FullMask(rule.Match.Family)
			rule.Match.Recent = m
		}
		rule.Text = rule.Spec()
	}
}

// RandomHashLimit gives about percent of rs's deciding and LOG INPUT and FORWARD
// rules without another state match a -m hashlimit on one of three
// tables, each with settings of its own drawn once (the parser's checks
// do not refuse rules of one table that differ, the compiler does): a
// mode of any fields, masks of every bit or /24, a rate of a few an hour
// or a day and a burst of 1 to 5 (no token comes back, and with the
// rate's default expiry no bucket is forgotten, while a test runs);
// --hashlimit-upto or --hashlimit-above by rule. A knob apart from
// RandomRuleSet, as RandomLimits; like RandomRecent, percent stays small
// (compile.MaxStateNotes).
func RandomHashLimit(r *rand.Rand, rs *RuleSet, percent int) {
	tables := map[string]HashLimitMatch{}
	for _, name := range []string{"h1", "h2", "h3"} {
		h := HashLimitMatch{Name: name, Mode: HashMode(r.IntN(16)), SrcMask: -1, DstMask: -1, Burst: uint32(1 + r.IntN(5)),
			GCIntervalMS: DefaultHashGCInterval}
		if chance(r, 30) {
			h.SrcMask = 24
		}
		if chance(r, 30) {
			h.DstMask = 24
		}
		unit := pick(r, []uint64{3600, 86400})
		h.PeriodUS = hashScale * unit / uint64(1+r.IntN(3))
		h.ExpireMS = uint32(unit * 1000)
		tables[name] = h
	}
	for i := range rs.Rules {
		rule := &rs.Rules[i]
		if !stateOnRule(rule) || rule.Match.Limit != nil || rule.Match.Recent != nil || rule.Match.ConnLimit != nil || !chance(r, percent) {
			continue
		}
		h := tables[pick(r, []string{"h1", "h2", "h3"})]
		h.Above = chance(r, 40)
		rule.Match.HashLimit = &h
		rule.Text = rule.Spec()
	}
}

// RandomConnLimit gives about percent of rs's deciding INPUT and FORWARD
// rules without another state match a -m connlimit: a limit of 0 to 3,
// above or upto, keyed by the source or the destination, with every bit
// of the address, a /24 or /0 (one count for all). A knob apart from
// RandomRuleSet, as RandomHashLimit; percent stays small
// (compile.MaxStateNotes).
func RandomConnLimit(r *rand.Rand, rs *RuleSet, percent int) {
	for i := range rs.Rules {
		rule := &rs.Rules[i]
		if !rule.Target.Verdict.Terminal() || rule.Target.Log || rule.Chain == ChainOutput ||
			rule.Match.Limit != nil || rule.Match.Recent != nil || rule.Match.HashLimit != nil || !chance(r, percent) {
			continue
		}
		rule.Match.ConnLimit = &ConnLimitMatch{Above: chance(r, 50), Limit: uint32(r.IntN(4)), Mask: pick(r, []int{-1, -1, 24, 0}),
			Dst: chance(r, 30)}
		rule.Text = rule.Spec()
	}
}

// randomChainNames are the user chains RandomChains makes, named as real
// rule sets name theirs (OpenWrt's "reject" is a chain, not REJECT).
var randomChainNames = [...]string{"ufw-before-input", "reject", "DOCKER-USER", "f2b-sshd", "c4", "c5"}

// RandomChains is the chains knob of the generator: it turns rs (a
// RandomRuleSet) into a rule set with user-defined chains. Some rules move
// into up to six chains; jumps (-j), gotos (-g), RETURNs (with random
// matches or none) and rules without -j are added in every chain, and a
// chain jumps only to chains declared after it, so there is no loop (a
// chain nothing reaches can occur). Rule.Text is set.
func RandomChains(r *rand.Rand, rs *RuleSet) { RandomChainsWith(r, rs, RandomKnobs{}) }

// RandomChainsWith is RandomChains with the rules it adds (jumps, gotos,
// RETURNs, rules without -j) drawn with parts of the vocabulary switched
// off (RandomKnobs), as RandomRuleSetWith draws rs's.
func RandomChainsWith(r *rand.Rand, rs *RuleSet, knobs RandomKnobs) {
	k := 1 + r.IntN(len(randomChainNames))
	for i := range k {
		rs.Chains = append(rs.Chains, ChainDecl{Name: randomChainNames[i]})
	}
	// chain index of each place: -1 a built-in chain, else a user chain
	place := func(rule *Rule, c int) {
		if c >= 0 {
			rule.Chain, rule.UserChain = ChainUser, randomChainNames[c]
		}
	}
	var out []Rule
	extra := func(from int, chain Chain) {
		x := RandomRule(r)
		x.Chain = chain
		x.Comments = nil
		x.Target = Target{}
		switch n := r.IntN(100); {
		case n < 45 && from+1 < k:
			x.Target.Verdict = pick(r, []Verdict{VerdictJump, VerdictJump, VerdictGoto})
			x.Target.Chain = randomChainNames[from+1+r.IntN(k-from-1)]
		case n < 80:
			x.Target.Verdict = VerdictReturn
			if chance(r, 25) {
				x.Match = Match{Family: x.Match.Family}
			}
		default:
			x.Target.Verdict = VerdictNone
		}
		place(&x, from)
		knobs.keep(&x)
		out = append(out, x)
	}
	for _, rule := range rs.Rules {
		c := -1
		if chance(r, 50) {
			c = r.IntN(k)
		}
		place(&rule, c)
		rule.Text = rule.Spec()
		out = append(out, rule)
		if chance(r, 35) {
			extra(c, rule.Chain)
		}
	}
	// every chain gets a jump from a built-in chain, most of the time
	for c := range k {
		if chance(r, 85) {
			x := Rule{Chain: pick(r, []Chain{ChainInput, ChainForward}), Target: Target{Verdict: VerdictJump, Chain: randomChainNames[c]}}
			if chance(r, 50) {
				x.Match = RandomRule(r).Match
			}
			knobs.keep(&x)
			at := r.IntN(len(out) + 1)
			out = append(out[:at], append([]Rule{x}, out[at:]...)...)
		}
	}
	rs.Rules = out
}

// probePorts are the common ports of packets aimed at random rules.
var probePorts = [...]uint16{0, 1, 22, 53, 80, 123, 443, 1023, 1024, 8080, 65534, 65535}

// RandomAddr returns an address of any value, IPv6 or IPv4.
func RandomAddr(r *rand.Rand, v6 bool) netip.Addr {
	if v6 {
		var b [16]byte
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		return netip.AddrFrom16(b)
	}
	var b [4]byte
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return netip.AddrFrom4(b)
}

// RandomAddrIn returns an address of prefix p for a packet aimed at a rule:
// random host bits, or its first or last address, or the address just
// outside it.
func RandomAddrIn(r *rand.Rand, p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		bit := byte(0x80 >> (i % 8))
		switch k := r.IntN(10); {
		case k < 5: // random host bits
			if chance(r, 50) {
				b[i/8] |= bit
			}
		case k < 9: // all ones: the last address
			b[i/8] |= bit
		}
	}
	if p.Bits() > 0 && chance(r, 15) {
		i := p.Bits() - 1 // flip the last prefix bit: just outside
		b[i/8] ^= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// RandomPortFor returns a port for a packet aimed at a rule's port match pm
// (either: its --ports, taken instead 30 % of the time): mostly an edge of
// one of its ranges, inside or just outside, or a port inside; otherwise
// a common port or any.
func RandomPortFor(r *rand.Rand, pm, either *PortMatch) uint16 {
	if pm == nil || chance(r, 30) {
		pm = either
	}
	if pm != nil && chance(r, 80) {
		pr := pick(r, pm.Ranges)
		switch r.IntN(5) {
		case 0:
			return pr.Lo
		case 1:
			return pr.Hi
		case 2:
			return pr.Lo - 1 // wraps at 0: fine, another edge
		case 3:
			return pr.Hi + 1
		default:
			return pr.Lo + uint16(r.IntN(int(pr.Hi-pr.Lo)+1))
		}
	}
	if chance(r, 60) {
		return pick(r, probePorts[:])
	}
	return uint16(r.UintN(65536))
}

// RandomPriorityRule returns a random rule of the xdpfw-priority table: a
// random rule's matches that a class can be decided by
// (checkPriorityMatch; -i and -m set aside), -j HIGH or -j BULK.
func RandomPriorityRule(r *rand.Rand) Rule {
	rule := RandomRule(r)
	m := &rule.Match
	if chance(r, 40) {
		randomHeader(r, m)
	}
	m.CTState, m.CTProto, m.CTStatus, m.CTDir = nil, nil, nil, nil
	m.CTOrigSrc, m.CTOrigDst, m.CTReplSrc, m.CTReplDst = nil, nil, nil, nil
	m.OutIface = nil // -i stays: the class may test it (RandomRule draws no sets)
	m.Limit, m.Recent, m.HashLimit, m.MSS, m.RT, m.Mark, m.Fragment = nil, nil, nil, nil, nil, nil, nil
	m.ConnLimit = nil
	if chance(r, 15) {
		m.VLAN = &VLANMatch{ID: pick(r, randomVLAN[:]), Invert: chance(r, 20)}
		randomVLANPrio(r, m)
	}
	rule.Chain = ChainPriority
	rule.Target = Target{Verdict: pick(r, []Verdict{VerdictHigh, VerdictBulk})}
	rule.Comments = nil
	rule.Text = rule.Spec()
	return rule
}

// randomVLANPrio adds --vlan-prio to m's -m vlan, half the time, and then
// half the time instead of --vlan-id (drawn only for a rule with -m vlan:
// the rule sets of seeds without it are the same as before it existed).
func randomVLANPrio(r *rand.Rand, m *Match) {
	if !chance(r, 50) {
		return
	}
	m.VLANPrio = &VLANPrioMatch{Prio: uint8(r.IntN(maxVLANPrio + 1)), Invert: chance(r, 20)}
	if chance(r, 50) {
		m.VLAN = nil
	}
}
