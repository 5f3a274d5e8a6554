package datapath

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/conntrack"
)

// TestNATRepliesFrom: conntrack list's translations from the bindings: a
// masqueraded connection (SNAT), a port forward (DNAT: the address the
// client sent to, the reply from the server), a hairpin (both), a
// connection bound to itself (none).
func TestNATRepliesFrom(t *testing.T) {
	ap := netip.MustParseAddrPort
	tu := func(src, dst string) NATTuple {
		s, d := ap(src), ap(dst)
		return NATTuple{Src: s.Addr(), Dst: d.Addr(), SrcPort: s.Port(), DstPort: d.Port()}
	}
	bind := func(from, to NATTuple) []NATBinding { // both directions, as the data plane binds them
		back := NATTuple{Src: from.Dst, Dst: from.Src, SrcPort: from.DstPort, DstPort: from.SrcPort}
		reply := NATTuple{Src: to.Dst, Dst: to.Src, SrcPort: to.DstPort, DstPort: to.SrcPort}
		return []NATBinding{{Proto: 6, From: from, To: to}, {Proto: 6, From: reply, To: back}}
	}
	var bs []NATBinding
	bs = append(bs, bind(tu("10.0.1.2:4000", "192.0.2.9:80"), tu("203.0.113.1:4000", "192.0.2.9:80"))...)   // SNAT
	bs = append(bs, bind(tu("192.0.2.9:5000", "203.0.113.1:8080"), tu("192.0.2.9:5000", "10.0.1.2:80"))...) // DNAT
	bs = append(bs, bind(tu("10.0.1.3:6000", "203.0.113.1:8080"), tu("10.0.1.1:6000", "10.0.1.2:80"))...)   // hairpin
	bs = append(bs, bind(tu("10.0.1.4:7000", "192.0.2.9:53"), tu("10.0.1.4:7000", "192.0.2.9:53"))...)      // untranslated
	es := []conntrack.Entry{
		{Proto: 6, Src: ap("10.0.1.2:4000"), Dst: ap("192.0.2.9:80")},
		{Proto: 6, Src: ap("192.0.2.9:5000"), Dst: ap("10.0.1.2:80")},
		{Proto: 6, Src: ap("10.0.1.3:6000"), Dst: ap("10.0.1.2:80")},
		{Proto: 6, Src: ap("10.0.1.4:7000"), Dst: ap("192.0.2.9:53")},
	}
	natRepliesFrom(bs, es)
	want := []*conntrack.NATReply{
		{Src: ap("192.0.2.9:80"), Dst: ap("203.0.113.1:4000"), Kind: "SNAT"},
		{Src: ap("10.0.1.2:80"), Dst: ap("192.0.2.9:5000"), OrigDst: ap("203.0.113.1:8080"), Kind: "DNAT"},
		{Src: ap("10.0.1.2:80"), Dst: ap("10.0.1.1:6000"), OrigDst: ap("203.0.113.1:8080"), Kind: "SNAT,DNAT"},
		nil,
	}
	for i, e := range es {
		if (e.NAT == nil) != (want[i] == nil) || e.NAT != nil && *e.NAT != *want[i] {
			t.Errorf("%s > %s: %+v, want %+v", e.Src, e.Dst, e.NAT, want[i])
		}
	}
	if s := es[1].String(); !strings.Contains(s, "orig-dst=203.0.113.1:8080 reply: src=10.0.1.2:80 dst=192.0.2.9:5000 [DNAT]") {
		t.Errorf("conntrack list line: %s", s)
	}
}
