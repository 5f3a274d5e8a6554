package compile

import (
	"net/netip"
	"strings"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// RefPacket is what the reference matcher knows of a packet: the fields the
// data plane's parser extracts, in plain Go types.
type RefPacket struct {
	Chain    rules.Chain
	InIface  string
	Src, Dst netip.Addr // both IPv4 or both IPv6
	Proto    uint8
	L4       bool // an L4 header is present (not a non-first fragment, known protocol)
	SPort    uint16
	DPort    uint16
	TCPFlags uint8
	ICMPType uint8
	ICMPCode uint8
	SrcMAC   [6]byte
	DstMAC   [6]byte
	Tagged   bool
	VLAN     uint16 // outermost VID when Tagged
	Fragment bool   // a non-first fragment
	CTState  uint8  // connection state (CTNew...); CTNew where no rule tests it
	// Len is the IP length as -m length reads it: IPv4's total length,
	// IPv6's payload length + 40 (the header). TTL is the IPv4 TTL or IPv6
	// hop limit, TOS the IPv4 TOS or IPv6 traffic class byte.
	Len uint32
	TTL uint8
	TOS uint8
	// CTInfo is the connection's direction and status (CTI*), CTProto its
	// protocol (a RELATED ICMP error: the quoted packet's), as -m
	// conntrack sees them: for the states NEW, ESTABLISHED and RELATED.
	CTInfo  uint8
	CTProto uint8
	// MSS is the TCP header's MSS option, NoMSS without one.
	MSS uint32
	// RT: an IPv6 routing header; the first one's type, segments left
	// and length in bytes.
	RT         bool
	RTType     uint8
	RTSegsLeft uint8
	RTLen      uint16
	// Sets are the named sets rules may use, by name.
	Sets map[string]RefSet
}

// RefSet is a named set as the reference matcher sees it.
type RefSet struct {
	Family   rules.Family
	Contains func(netip.Addr) bool
}

func (p *RefPacket) family() rules.Family {
	if p.Src.Is4() {
		return rules.FamilyIPv4
	}
	return rules.FamilyIPv6
}

// Evaluate is the reference matcher: iptables first-match semantics over
// the AST, written for clarity, not speed. It returns the index of the
// deciding rule (-1 for the chain policy) and the verdict. LOG rules do not
// decide (non-terminating): they log and the search goes on.
func Evaluate(rs *rules.RuleSet, p RefPacket) (int, rules.Verdict) {
	d := Decide(rs, p)
	return d.Rule, d.Verdict
}

// Decision is the reference matcher's whole answer for one packet.
type Decision struct {
	Rule    int           // index of the deciding rule, -1 for the chain policy
	Verdict rules.Verdict // ACCEPT, DROP or REJECT
	Reject  Reject        // with REJECT: what answers (--reject-with)
	// Reason is the counter reason the data plane reports. For REJECT it
	// says whether the packet is answered (ReasonRuleReject) or why not;
	// the per-source rate limit (ReasonRejectRate) is not modelled.
	Reason Reason
	// Logs are the LOG rules (indices) that log the packet: those it
	// matches before the deciding rule, the first MaxLogPerPacket of them
	// (LogOverflow: there were more). Log: the deciding rule has --log.
	// The events come in this order: Logs, then the deciding rule's.
	// Rate limits are not modelled.
	Logs        []int
	LogOverflow bool
	Log         bool
}

// Decide is Evaluate with what a REJECT answers, the counter reason and
// what logs the packet.
func Decide(rs *rules.RuleSet, p RefPacket) Decision {
	var logs []int
	overflow := false
	for i := range rs.Rules {
		r := &rs.Rules[i]
		if r.Chain != p.Chain || !Matches(&r.Match, p) {
			continue
		}
		if !r.Target.Verdict.Terminal() { // LOG: log and go on
			if len(logs) < MaxLogPerPacket {
				logs = append(logs, i)
			} else {
				overflow = true
			}
			continue
		}
		d := Decision{Rule: i, Verdict: r.Target.Verdict, Logs: logs, LogOverflow: overflow, Log: r.Target.Log}
		switch d.Verdict {
		case rules.VerdictAccept:
			d.Reason = ReasonRuleAccept
		case rules.VerdictDrop:
			d.Reason = ReasonRuleDrop
		case rules.VerdictReject:
			d.Reject, _ = RejectOf(r.Target.RejectWith) // the parser accepted it
			d.Reason = RejectReason(p, d.Reject)
		}
		return d
	}
	d := Decision{Rule: -1, Verdict: rs.PolicyFor(p.Chain, p.family()), Reason: ReasonPolicyAccept, Logs: logs, LogOverflow: overflow}
	if d.Verdict == rules.VerdictDrop {
		d.Reason = ReasonPolicyDrop
	}
	return d
}

// RejectReason says whether a REJECT answers p (ReasonRuleReject) or why it
// must not: a non-first fragment; a broadcast or multicast destination, at
// the link layer or in IP, or a source that is not one host (RFC 1122
// 3.2.2); an ICMP error (ICMPv4 types 3, 4, 5, 11, 12 and unknown ones above
// 18, as Linux; ICMPv6 types below 128, RFC 4443 2.4(e)); a RST answered
// with tcp-reset. The twin of fw_reject_unanswerable (bpf/lib/reject.h).
func RejectReason(p RefPacket, k Reject) Reason {
	switch {
	case p.Fragment:
		return ReasonRejectFrag
	case p.DstMAC[0]&1 != 0 || p.SrcMAC[0]&1 != 0 || !oneHost(p.Src) || !oneHost(p.Dst):
		return ReasonRejectBcast
	}
	v6 := p.Src.Is6()
	if p.L4 && !v6 && p.Proto == 1 {
		switch t := p.ICMPType; {
		case t == 3 || t == 4 || t == 5 || t == 11 || t == 12 || t > 18:
			return ReasonRejectError
		}
	}
	if p.L4 && v6 && p.Proto == 58 && p.ICMPType < 128 {
		return ReasonRejectError
	}
	if k == RejectTCPReset && p.L4 && p.Proto == 6 && p.TCPFlags&0x04 != 0 {
		return ReasonRejectError
	}
	return ReasonRuleReject
}

// oneHost: an address of one host, which an answer may go to or come from:
// not 0/8, 127/8, 224/4 (multicast), 240/4 (incl. 255.255.255.255); not ::,
// ::1 or ff00::/8.
func oneHost(a netip.Addr) bool {
	if a.Is4() {
		b := a.As4()
		return b[0] != 0 && b[0] != 127 && b[0] < 224
	}
	// bytes, not netip's IsLoopback/IsMulticast, which unmap ::ffff:a.b.c.d
	b := a.As16()
	return b != [16]byte{} && b != [16]byte{15: 1} && b[0] != 0xff
}

// Matches reports whether every selector of m matches p.
func Matches(m *rules.Match, p RefPacket) bool {
	if m.Family != rules.FamilyAny && m.Family != p.family() {
		return false
	}
	if m.NeedsL4() && !p.L4 {
		return false // iptables: a header that is not there matches nothing
	}
	if m.Proto != nil && (p.Proto == m.Proto.Proto) == m.Proto.Invert {
		return false
	}
	if m.Src != nil && m.Src.Prefix.Contains(p.Src) == m.Src.Invert {
		return false
	}
	if m.Dst != nil && m.Dst.Prefix.Contains(p.Dst) == m.Dst.Invert {
		return false
	}
	if m.SPort != nil && inPorts(m.SPort.Ranges, p.SPort) == m.SPort.Invert {
		return false
	}
	if m.DPort != nil && inPorts(m.DPort.Ranges, p.DPort) == m.DPort.Invert {
		return false
	}
	if m.Ports != nil {
		either := inPorts(m.Ports.Ranges, p.SPort) || inPorts(m.Ports.Ranges, p.DPort)
		if either == m.Ports.Invert {
			return false
		}
	}
	if m.InIface != nil {
		ok := p.InIface == m.InIface.Name
		if m.InIface.Prefix {
			ok = strings.HasPrefix(p.InIface, m.InIface.Name)
		}
		if ok == m.InIface.Invert {
			return false
		}
	}
	if m.MACSrc != nil && (p.SrcMAC == m.MACSrc.Addr) == m.MACSrc.Invert {
		return false
	}
	if m.MACDst != nil && (p.DstMAC == m.MACDst.Addr) == m.MACDst.Invert {
		return false
	}
	if m.TCPFlags != nil && (p.TCPFlags&m.TCPFlags.Mask == m.TCPFlags.Comp) == m.TCPFlags.Invert {
		return false
	}
	if m.ICMP != nil {
		ok := m.ICMP.Any || (p.ICMPType == m.ICMP.Type && (m.ICMP.Code < 0 || int16(p.ICMPCode) == m.ICMP.Code))
		if ok == m.ICMP.Invert {
			return false
		}
	}
	if m.VLAN != nil && (p.Tagged && p.VLAN == m.VLAN.ID) == m.VLAN.Invert {
		return false
	}
	if m.Fragment != nil && p.Fragment != *m.Fragment {
		return false
	}
	if c := m.CTState; c != nil && (c.Mask&(1<<p.CTState) != 0) == c.Invert {
		return false
	}
	if !ctMatches(m, p) {
		return false
	}
	if !headerMatches(m, &p) {
		return false
	}
	for _, s := range []struct {
		sm *rules.SetMatch
		a  netip.Addr
	}{{m.SrcSet, p.Src}, {m.DstSet, p.Dst}} {
		if s.sm == nil {
			continue
		}
		set, ok := p.Sets[s.sm.Name]
		// a set holds one family: a rule using it never matches the other
		if !ok || set.Family != p.family() || set.Contains(s.a) == s.sm.Invert {
			return false
		}
	}
	return true
}

// ctMatches is the part of Matches of -m conntrack's tests other than
// --ctstate: as in the kernel's xt_conntrack, a packet without a
// connection (INVALID, UNTRACKED) matches none of them, negated or not.
func ctMatches(m *rules.Match, p RefPacket) bool {
	if m.CTProto == nil && m.CTStatus == nil && m.CTDir == nil && !m.CTAddrs() {
		return true
	}
	if p.CTState != CTNew && p.CTState != CTEstablished && p.CTState != CTRelated {
		return false
	}
	if c := m.CTProto; c != nil && (p.CTProto == c.Proto) == c.Invert {
		return false
	}
	if c := m.CTStatus; c != nil && (p.CTInfo&c.Mask != 0) == c.Invert {
		return false
	}
	if c := m.CTDir; c != nil && (p.CTInfo&CTIReply != 0) != (*c == rules.CTDirReply) {
		return false
	}
	// the connection's addresses: without NAT the packet's, by direction
	// (the compiler refuses these tests where RELATED errors could reach
	// them: their connection is the quoted packet's)
	origSrc, origDst := p.Src, p.Dst
	if p.CTInfo&CTIReply != 0 {
		origSrc, origDst = p.Dst, p.Src
	}
	for _, a := range []struct {
		m *rules.AddrMatch
		v netip.Addr
	}{{m.CTOrigSrc, origSrc}, {m.CTOrigDst, origDst}, {m.CTReplSrc, origDst}, {m.CTReplDst, origSrc}} {
		if a.m != nil && a.m.Prefix.Contains(a.v) == a.m.Invert {
			return false
		}
	}
	return true
}

// headerMatches is the header matches' part of Matches, as the kernel's
// xt_iprange, xt_length, ipt_ttl / ip6t_hl, xt_dscp, xt_tos and xt_ecn
// read the packet.
func headerMatches(m *rules.Match, p *RefPacket) bool {
	for _, r := range []struct {
		m *rules.IPRangeMatch
		a netip.Addr
	}{{m.SrcRange, p.Src}, {m.DstRange, p.Dst}} {
		if r.m != nil && (r.m.From.Compare(r.a) <= 0 && r.a.Compare(r.m.To) <= 0) == r.m.Invert {
			return false
		}
	}
	if s := m.MSS; s != nil && (p.MSS <= 0xffff && p.MSS >= uint32(s.Min) && p.MSS <= uint32(s.Max)) == s.Invert {
		return false // xt_tcpmss: no MSS option matches only negated
	}
	if rt := m.RT; rt != nil {
		if !p.RT {
			return false // ip6t_rt: no routing header, no match
		}
		if v := rt.Type; v != nil && (uint32(p.RTType) == v.V) == v.Invert {
			return false
		}
		if s := rt.Segs; s != nil && (uint32(p.RTSegsLeft) >= s.Lo && uint32(p.RTSegsLeft) <= s.Hi) == s.Invert {
			return false
		}
		if v := rt.Len; v != nil && (uint32(p.RTLen) == v.V) == v.Invert {
			return false
		}
	}
	if l := m.Length; l != nil && (p.Len >= uint32(l.Min) && p.Len <= uint32(l.Max)) == l.Invert {
		return false
	}
	if t := m.TTL; t != nil {
		ok := map[rules.TTLOp]bool{rules.TTLEq: p.TTL == t.Value, rules.TTLNe: p.TTL != t.Value,
			rules.TTLLt: p.TTL < t.Value, rules.TTLGt: p.TTL > t.Value}[t.Op]
		if !ok {
			return false
		}
	}
	if d := m.DSCP; d != nil && (p.TOS>>2 == d.Value) == d.Invert {
		return false
	}
	if t := m.TOS; t != nil && (p.TOS&t.Mask == t.Value) == t.Invert {
		return false
	}
	if e := m.ECN; e != nil {
		if e.IPECT >= 0 && (p.TOS&3 == uint8(e.IPECT)) == e.IPInvert {
			return false
		}
		if p.TCPFlags&e.TCPMask != e.TCPComp {
			return false
		}
	}
	return true
}

func inPorts(rs []rules.PortRange, port uint16) bool {
	for _, r := range rs {
		if port >= r.Lo && port <= r.Hi {
			return true
		}
	}
	return false
}
