package compile

import (
	"net/netip"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// NoRule is Decision.Rule for a packet no rule or policy decided: a later
// fragment dropped for want of its datagram's verdict, a forwarded packet
// whose TTL runs out here (FwdExpired); counted on rule id 0 by the data
// plane.
const NoRule = -2

// FragKey tells datagrams apart as the kernel's reassembly does (RFC 791:
// source, destination, protocol, identification; RFC 8200: source,
// destination, identification), in the chain that decides them.
type FragKey struct {
	Src, Dst netip.Addr
	Proto    uint8 // IPv4's protocol; 0 for IPv6 (a later fragment's next header need not be it)
	ID       uint32
	Chain    rules.Chain
}

// Fragments is the reference's view of fragmented datagrams, the twin of
// bpf/lib/frag.h (docs/fragments.md). iptables' filter table sees a
// datagram once, reassembled, so its first fragment is decided as a whole
// packet (Decide) and every later fragment gets that decision, a REJECT
// unanswered (ReasonRejectFrag); a later fragment of no datagram seen, or one that starts
// before the end of what the first fragment carried (an overlap), is
// dropped, and an overlap drops the rest of its datagram too. The 30 s
// expiry is not modelled (no clock).
type Fragments map[FragKey]fragDatagram

type fragDatagram struct {
	d   Decision
	end int // bytes of the fragmentable part the first fragment carried
}

// First records the decision d of a datagram's first fragment, which
// carried the first end bytes of its fragmentable part.
func (f Fragments) First(k FragKey, d Decision, end int) {
	f[k] = fragDatagram{d: d, end: end}
}

// Later decides a later fragment of datagram k that starts offset bytes
// into the fragmentable part.
func (f Fragments) Later(k FragKey, offset int) Decision {
	dg, ok := f[k]
	switch {
	case !ok:
		return Decision{Rule: NoRule, Verdict: rules.VerdictDrop, Reason: ReasonFragUnknown}
	case offset < dg.end || dg.d.Reason == ReasonFragOverlap:
		f[k] = fragDatagram{d: Decision{Rule: NoRule, Verdict: rules.VerdictDrop, Reason: ReasonFragOverlap}, end: dg.end}
		return f[k].d
	}
	d := Decision{Rule: dg.d.Rule, Verdict: dg.d.Verdict, Reason: dg.d.Reason, Reject: dg.d.Reject}
	if d.Verdict == rules.VerdictReject {
		d.Reason = ReasonRejectFrag // unanswered: dropped
	}
	return d
}
