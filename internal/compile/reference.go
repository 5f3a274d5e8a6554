package compile

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// RefPacket is what the reference matcher knows of a packet: the fields the
// data plane's parser extracts, in plain Go types.
type RefPacket struct {
	Chain   rules.Chain
	InIface string
	// OutIface is the device the packet leaves by: in FORWARD the FIB's
	// egress device, in OUTPUT tc egress's; "" none (INPUT; a FORWARD
	// packet the FIB names no device for: no positive -o matches it).
	OutIface string
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
	VLANPrio uint8  // outermost tag's PCP when Tagged
	// PPPoE: the packet came in a PPPoE session frame; InIface is the
	// session's ppp device (bpf/lib/pppoe.h).
	PPPoE    bool
	Fragment bool // a non-first fragment
	// FirstFragment: a datagram's first fragment (more follow); only
	// its priority class reads it (PriorityOf).
	FirstFragment bool
	CTState       uint8  // connection state (CTNew...); CTNew where no rule tests it
	Mark          uint32 // the packet's mark (skb->mark): OUTPUT only, 0 in INPUT and FORWARD
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
	// Addrs is the host's local routing table (-m addrtype).
	Addrs AddrTable
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
	// matches before the deciding rule, each once, the first
	// MaxLogPerPacket of them (LogOverflow: there were more). Log: the deciding rule has --log.
	// The events come in this order: Logs, then the deciding rule's.
	// Rate limits are not modelled.
	Logs        []int
	LogOverflow bool
	Log         bool
	// Counts are the rules without a verdict of their own (jump, goto,
	// RETURN, no -j) that the packet reaches and matches before the
	// decision: iptables counts it for each. Each rule once, in the order
	// reached (the data plane counts a rule once per packet).
	Counts []int
	// Reached is every rule the packet reached whose matches passed, in
	// order, the deciding rule last, a rule as often as it was reached:
	// what iptables' packet counters count (a LOG rule or a jump reached
	// twice counts twice, every LOG rule counts; the data plane counts
	// Logs, Counts and Rule).
	Reached []int
}

// Decide is Evaluate with what a REJECT answers, the counter reason and
// what logs the packet. Every -m limit bucket is full (DecideAt).
func Decide(rs *rules.RuleSet, p RefPacket) Decision { return DecideAt(rs, p, nil) }

// DecideAt is Decide with the -m limit buckets and -m recent lists in st
// (nil: buckets full, lists empty, nothing recorded), which it changes: a
// rule with -m limit that the packet reaches (no earlier rule decided it)
// and whose other matches match it matches only while its bucket has a
// token, and then takes one, as iptables' xt_limit; a rule with -m recent
// does to its list what xt_recent does, in rule order. A LOG rule's -m
// limit is its log budget, which, like every rate limit of events, is not
// modelled (Decision.Logs). User-defined chains are walked as iptables
// walks them, with a stack of return points (not flattened, as compile
// does: the two are independent), up to maxRefDepth deep.
func DecideAt(rs *rules.RuleSet, p RefPacket, st *State) Decision {
	if rawNotrack(rs, &p) {
		p.CTState = CTUntracked
	}
	var logs, counts, reached []int
	overflow := false
	type frame struct{ rules []int } // the rest of a chain to walk
	var builtin []int
	byName := map[string][]int{}
	for i := range rs.Rules {
		switch r := &rs.Rules[i]; {
		case r.Chain == rules.ChainUser:
			byName[r.UserChain] = append(byName[r.UserChain], i)
		case r.Chain == p.Chain:
			builtin = append(builtin, i)
		}
	}
	cur := frame{builtin}
	var stack []frame
	for {
		if len(cur.rules) == 0 {
			if len(stack) == 0 {
				break // the end of the built-in chain: its policy
			}
			cur, stack = stack[len(stack)-1], stack[:len(stack)-1]
			continue
		}
		i := cur.rules[0]
		cur.rules = cur.rules[1:]
		r := &rs.Rules[i]
		if !Matches(&r.Match, p) {
			continue
		}
		// a LOG rule's -m limit is its log budget (not modelled); on any
		// other rule, a jump, RETURN or rule without -j too, the packet
		// that reaches it takes a token, whatever happens after
		if l := r.Match.Limit; l != nil && r.Target.Verdict != rules.VerdictLog && !st.take(i, l.IntervalNS(), l.Burst) {
			continue // no token: the rule does not match
		}
		if m := r.Match.Recent; m != nil && !st.recent(m, &p) {
			continue // the list says no (after doing what the rule does to it)
		}
		if h := r.Match.HashLimit; h != nil && !st.hashlimit(h, &p) {
			continue // the packet's bucket says no (after taking any token)
		}
		if c := r.Match.ConnLimit; c != nil {
			match, full := st.connlimit(i, c, &p)
			if full { // a connection it cannot count: dropped (fw_connlimit_apply)
				return Decision{Rule: -1, Verdict: rules.VerdictDrop, Reason: ReasonCTFull} // no LOG or counting rule has it
			}
			if !match {
				continue
			}
		}
		reached = append(reached, i)
		if v := r.Target.Verdict; !v.Terminal() && v != rules.VerdictLog && !slices.Contains(counts, i) {
			counts = append(counts, i)
		}
		switch v := r.Target.Verdict; v {
		case rules.VerdictLog: // log and go on
			if slices.Contains(logs, i) {
				// one LOG rule reached twice (a chain jumped to from
				// two places): the data plane notes each rule once per
				// packet, at its first place (fw_note), so it logs once
				// (docs/compat.md, Chains)
				continue
			}
			if len(logs) < MaxLogPerPacket {
				logs = append(logs, i)
			} else {
				overflow = true
			}
			continue
		case rules.VerdictNone:
			continue
		case rules.VerdictReturn:
			if len(stack) == 0 {
				cur.rules = nil // RETURN in a built-in chain: its policy
				continue
			}
			cur, stack = stack[len(stack)-1], stack[:len(stack)-1]
			continue
		case rules.VerdictJump, rules.VerdictGoto:
			if v == rules.VerdictJump {
				if len(stack) >= maxRefDepth {
					panic("reference: chains nest deeper than " + fmt.Sprint(maxRefDepth) + " (a loop?)")
				}
				stack = append(stack, cur)
			}
			cur = frame{byName[r.Target.Chain]}
			continue
		}
		d := Decision{Rule: i, Verdict: r.Target.Verdict, Logs: logs, LogOverflow: overflow, Log: r.Target.Log, Counts: counts, Reached: reached}
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
	d := Decision{Rule: -1, Verdict: rs.PolicyFor(p.Chain, p.family()), Reason: ReasonPolicyAccept, Logs: logs, LogOverflow: overflow, Counts: counts,
		Reached: reached}
	if d.Verdict == rules.VerdictDrop {
		d.Reason = ReasonPolicyDrop
	}
	return d
}

// rawNotrack tells whether a NOTRACK rule of the raw table matches p:
// PREROUTING's in INPUT and FORWARD (packets arriving), OUTPUT's in OUTPUT.
func rawNotrack(rs *rules.RuleSet, p *RefPacket) bool {
	for i := range rs.Raw {
		r := &rs.Raw[i]
		in := r.Chain == rules.ChainPrerouting && (p.Chain == rules.ChainInput || p.Chain == rules.ChainForward)
		if (in || r.Chain == p.Chain) && Matches(&r.Match, *p) {
			return true
		}
	}
	return false
}

// maxRefDepth bounds the reference matcher's stack: a loop the compiler
// refuses would not end.
const maxRefDepth = 1024

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
	case p.PPPoE: // no answer into a PPPoE session (fw_reject_xdp)
		return ReasonRejectFail
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
	if m.InIface != nil && ifaceIs(m.InIface, p.InIface) == m.InIface.Invert {
		return false
	}
	if m.OutIface != nil && ifaceIs(m.OutIface, p.OutIface) == m.OutIface.Invert {
		return false
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
	if m.VLANPrio != nil && (p.Tagged && p.VLANPrio == m.VLANPrio.Prio) == m.VLANPrio.Invert {
		return false
	}
	if m.Mark != nil && (p.Mark&m.Mark.Mask == m.Mark.Value) == m.Mark.Invert {
		return false
	}
	if m.Fragment != nil && p.Fragment != *m.Fragment {
		return false
	}
	if c := m.CTState; c != nil && (c.Mask&ctStateBits(p) != 0) == c.Invert {
		return false
	}
	if t := m.PktType; t != nil && (PktTypeOf(&p) == t.Type) == t.Invert {
		return false
	}
	if a := m.AddrType; a != nil {
		on := onDev(a.Limit, p)
		if a.Src != 0 && p.Addrs.TypeOK(p.Src, a.Src, on) == a.SrcInvert ||
			a.Dst != 0 && p.Addrs.TypeOK(p.Dst, a.Dst, on) == a.DstInvert {
			return false
		}
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

// PktTypeOf is p's type as iptables' -m pkttype sees it (xt_pkttype reads
// skb->pkt_type): from the destination MAC as Linux's eth_type_trans sets
// it, broadcast for ff:ff:ff:ff:ff:ff, multicast for the group bit, else to
// this host (a frame for another host's MAC never reaches iptables); in
// OUTPUT always to this host (PACKET_HOST: Linux marks the broadcast and
// multicast copies it sends later); a PPPoE session's packet always to
// this host (the ppp device's receive path makes it PACKET_HOST). The twin
// of lib/classify.h fw_pkttype.
func PktTypeOf(p *RefPacket) uint8 {
	switch {
	case p.Chain == rules.ChainOutput || p.DstMAC[0]&1 == 0 || p.PPPoE:
		return rules.PktHost
	case p.DstMAC == [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}:
		return rules.PktBroadcast
	}
	return rules.PktMulticast
}

// onDev is --limit-iface-in/-out: the route must be on the packet's input
// (output) device; nil when not limited, or when the packet has none.
func onDev(limit uint8, p RefPacket) func(*AddrRoute) bool {
	name := map[uint8]string{rules.LimitIn: p.InIface, rules.LimitOut: p.OutIface}[limit]
	if name == "" {
		return nil
	}
	return func(r *AddrRoute) bool { return r.Dev == name }
}

// ifaceIs: the device named name ("" none) is one im names (its
// inversion aside).
func ifaceIs(im *rules.IfaceMatch, name string) bool {
	if im.Prefix {
		return name != "" && strings.HasPrefix(name, im.Name)
	}
	return name != "" && name == im.Name
}

// ctStateBits is the packet's state as --ctstate reads it (the kernel's
// xt_conntrack): its state's bit, and, for a packet of a connection (NEW,
// ESTABLISHED, RELATED), SNAT and DNAT where NAT changed the connection's
// source or destination (CTInfo's CTISrcNAT, CTIDstNAT: IPS_SRC_NAT,
// IPS_DST_NAT).
func ctStateBits(p RefPacket) uint8 {
	b := uint8(1) << p.CTState
	if p.CTState == CTNew || p.CTState == CTEstablished || p.CTState == CTRelated {
		if p.CTInfo&CTISrcNAT != 0 {
			b |= rules.CTSNAT
		}
		if p.CTInfo&CTIDstNAT != 0 {
			b |= rules.CTDNAT
		}
	}
	return b
}

// ctMatches is the part of Matches of -m conntrack's tests other than
// --ctstate: as in the kernel's xt_conntrack (conntrack_mt), a packet
// without a connection (INVALID, UNTRACKED) is not tested by them: it
// matches when the match has a --ctstate (which Matches has tested
// already), and does not without one, negated or not.
func ctMatches(m *rules.Match, p RefPacket) bool {
	if m.CTProto == nil && m.CTStatus == nil && m.CTDir == nil && !m.CTAddrs() {
		return true
	}
	if p.CTState != CTNew && p.CTState != CTEstablished && p.CTState != CTRelated {
		return m.CTState != nil
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
		ttl := p.TTLSeen()
		ok := map[rules.TTLOp]bool{rules.TTLEq: ttl == t.Value, rules.TTLNe: ttl != t.Value,
			rules.TTLLt: ttl < t.Value, rules.TTLGt: ttl > t.Value}[t.Op]
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

// PriorityOf is the class the xdpfw-priority table gives p, a packet
// as it arrives (its chain and connection state are not looked at): the
// verdict of the first priority rule that matches it, else the table's
// policy; VerdictHigh for every packet when the table is off (nothing is
// handed elsewhere). Fragments are BULK: a datagram's fragments are
// judged in order, on one CPU (docs/realtime.md, Priority).
func PriorityOf(rs *rules.RuleSet, p RefPacket) rules.Verdict {
	if !rs.PriorityOn() {
		return rules.VerdictHigh
	}
	if p.Fragment || p.FirstFragment {
		return rules.VerdictBulk
	}
	p.Chain = rules.ChainPriority // as it arrives: a FORWARD packet's TTL is not decremented yet
	for i := range rs.Priority {
		if r := &rs.Priority[i]; Matches(&r.Match, p) {
			return r.Target.Verdict
		}
	}
	return rs.PriorityDefault()
}
