package compile

import "github.com/xdpfw/xdpfw/internal/rules"

// FwdExpired tells whether the kernel drops p, which the FIB forwards, for
// its TTL (hop limit) before the FORWARD hook: it arrived with 1 or 0
// (ip_forward, ip6_forward answer it with a time exceeded). The twin of
// bpf/lib/fwdexpired.h (not with --nat xdpfw): the data plane passes such
// a packet to the kernel unjudged (FwdExpiredDecision). A fragment is
// judged as before (the kernel reassembles its datagram first).
//
// A routed packet in a broadcast or multicast frame (PktTypeOf not
// PktHost) is dropped before FORWARD as well (ip_forward, ip6_forward:
// pkt_type not PACKET_HOST), silently: passed the same way, reason
// not-unicast.
func (p *RefPacket) FwdExpired() bool {
	return p.Chain == rules.ChainForward && (p.TTL <= 1 || PktTypeOf(p) != rules.PktHost) && !p.Fragment && !p.FirstFragment
}

// FwdExpiredDecision is the data plane's decision for p, FwdExpired:
// passed (XDP_PASS) with no rule (rule id 0), reason ttl-expired, or
// not-unicast for a broadcast or multicast frame.
func FwdExpiredDecision(p *RefPacket) Decision {
	reason := ReasonFwdExpired
	if PktTypeOf(p) != rules.PktHost {
		reason = ReasonFwdNotUnicast
	}
	return Decision{Rule: NoRule, Verdict: rules.VerdictAccept, Reason: reason}
}
