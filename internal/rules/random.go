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
// types and codes; a bare -m tcp; MAC addresses; VLAN ids; -i; -f; connection states; header matches
// (RandomHeaderMatches); the verdicts ACCEPT,
// DROP and (rarely) REJECT; LOG rules and --log, with log options. Values mostly come from small pools so that
// rules and packets collide. Parse(rs.String()) yields the same rule set
// (ignoring positions); Rule.Text is set, Pos is not.
func RandomRuleSet(r *rand.Rand, n int) *RuleSet {
	rs := &RuleSet{}
	for range r.IntN(4) {
		rs.Policies = append(rs.Policies, Policy{
			Chain:   pick(r, []Chain{ChainInput, ChainForward}),
			Family:  pick(r, []Family{FamilyAny, FamilyIPv4, FamilyIPv6}),
			Verdict: pick(r, []Verdict{VerdictAccept, VerdictDrop}),
		})
	}
	for range n {
		rs.Rules = append(rs.Rules, RandomRule(r))
	}
	// A bare -m tcp (udp, ...) on some rules of a port protocol without a
	// port or flag test: drawn last, from a stream of its own, so that the
	// rule sets of the seeds the tests use stay what they were (a 10k-rule
	// set's tree size varies a lot from one draw to another).
	l4 := rand.New(rand.NewPCG(r.Uint64(), 0x14))
	for i := range rs.Rules {
		m := &rs.Rules[i].Match
		if p := m.Proto; p != nil && !p.Invert && isPortProto(p.Proto) && !m.NeedsL4() && chance(l4, 15) {
			m.L4Header = true
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
	}
	return rs
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
		name := pick(r, randomIface[:])
		i := &IfaceMatch{Name: name, Invert: chance(r, 20)}
		if name[len(name)-1] == '+' {
			i.Name, i.Prefix = name[:len(name)-1], true
		}
		m.InIface = i
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
