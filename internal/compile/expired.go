package compile

import "github.com/xdpfw/xdpfw/internal/rules"

// FwdExpired tells whether the kernel drops p, which the FIB forwards, for
// its TTL (hop limit) before the FORWARD hook: it arrived with 1 or 0
// (ip_forward, ip6_forward answer it with a time exceeded). The twin of
// bpf/lib/fwdexpired.h (not with --nat xdpfw): the data plane passes such
// a packet to the kernel unjudged (FwdExpiredDecision). A fragment is
// judged as before (the kernel reassembles its datagram first).
func (p *RefPacket) FwdExpired() bool {
	return p.Chain == rules.ChainForward && p.TTL <= 1 && !p.Fragment && !p.FirstFragment
}

// FwdExpiredDecision is the data plane's decision for a packet FwdExpired:
// passed (XDP_PASS) with no rule (rule id 0), reason ttl-expired.
func FwdExpiredDecision() Decision {
	return Decision{Rule: NoRule, Verdict: rules.VerdictAccept, Reason: ReasonFwdExpired}
}
