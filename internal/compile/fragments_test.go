package compile

import (
	"net/netip"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestFragments: the reference's view of a fragmented datagram, the twin
// of bpf/lib/frag.h (the data plane agrees in the datapath differential
// test and frag_test.go).
func TestFragments(t *testing.T) {
	k := FragKey{Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("198.51.100.1"), Proto: 17, ID: 7,
		Chain: rules.ChainInput}
	other := k
	other.ID = 8
	f := Fragments{}
	if d := f.Later(k, 1480); d.Rule != NoRule || d.Reason != ReasonFragUnknown || d.Verdict != rules.VerdictDrop {
		t.Errorf("before its first fragment: %+v; want dropped, fragment-unknown", d)
	}
	f.First(k, Decision{Rule: 3, Verdict: rules.VerdictAccept, Reason: ReasonRuleAccept}, 1480)
	if d := f.Later(k, 1480); d.Rule != 3 || d.Verdict != rules.VerdictAccept || d.Reason != ReasonRuleAccept {
		t.Errorf("after its first fragment: %+v; want rule 3's ACCEPT", d)
	}
	if d := f.Later(other, 1480); d.Reason != ReasonFragUnknown {
		t.Errorf("another datagram: %+v; want fragment-unknown", d)
	}
	if d := f.Later(k, 8); d.Rule != NoRule || d.Reason != ReasonFragOverlap {
		t.Errorf("overlapping the first: %+v; want fragment-overlap", d)
	}
	if d := f.Later(k, 2960); d.Reason != ReasonFragOverlap {
		t.Errorf("after an overlap: %+v; want the datagram dropped (fragment-overlap)", d)
	}
	f.First(other, Decision{Rule: 5, Verdict: rules.VerdictReject, Reject: RejectTCPReset, Reason: ReasonRuleReject}, 1480)
	if d := f.Later(other, 1480); d.Rule != 5 || d.Verdict != rules.VerdictReject || d.Reason != ReasonRejectFrag ||
		d.Reject != RejectTCPReset {
		t.Errorf("after a REJECTed first fragment: %+v; want rule 5, unanswered (reject-unanswered-fragment)", d)
	}
}
