package datapath_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"testing"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
)

// corpusBases are well-formed packets whose every truncation is tried.
func corpusBases() []*packet.Packet {
	v6 := func(p *packet.Packet) *packet.Packet {
		p.Src, p.Dst = netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
		return p
	}
	icmp := v4pkt(1, "10.0.0.1", "10.0.0.2", 0, 0)
	icmp.ICMPType = 8
	icmp6 := v6(v4pkt(58, "0.0.0.0", "0.0.0.0", 0, 0))
	icmp6.ICMPType = 128
	opts := v4pkt(6, "10.0.0.1", "10.0.0.2", 1, 22)
	opts.IPv4Options = make([]byte, 40) // IHL 15
	qinq := v4pkt(17, "10.0.0.1", "10.0.0.2", 1, 53)
	qinq.VLANs = []uint16{100, 200}
	ext := v6(v4pkt(6, "0.0.0.0", "0.0.0.0", 1, 22))
	ext.IPv6Ext = []packet.ExtHdr{{Type: 0, Len: 8}, {Type: 60, Len: 16}, {Type: 51, Len: 12}}
	ext.MoreFragments = true // and a fragment header
	return []*packet.Packet{
		v4pkt(6, "10.0.0.1", "10.0.0.2", 1, 22), v4pkt(17, "10.0.0.1", "10.0.0.2", 1, 53), icmp, opts, qinq,
		v6(v4pkt(6, "0.0.0.0", "0.0.0.0", 1, 22)), v6(v4pkt(17, "0.0.0.0", "0.0.0.0", 1, 53)), icmp6, ext,
	}
}

// TestMalformedCorpus cuts each base packet at every byte and checks the
// program calls it malformed for the right reason — both as cut (the IP
// length now lies) and with the IP length fixed up to the cut, which moves
// the fault to the header that is really incomplete.
func TestMalformedCorpus(t *testing.T) {
	f := newFixture(t)
	f.installText("-P INPUT ACCEPT\n")
	n := 0
	for _, base := range corpusBases() {
		full := base.Bytes()
		l3 := 14 + 4*len(base.VLANs)
		for cut := 14; cut < len(full); cut++ {
			frame := append([]byte(nil), full[:cut]...)
			want := expectCut(base, l3, cut, false)
			check(t, f, frame, want, fmt.Sprintf("%s cut at %d", base, cut))
			if cut >= l3+ipHeaderLen(base) {
				fixLength(base, frame, l3)
				want = expectCut(base, l3, cut, true)
				check(t, f, frame, want, fmt.Sprintf("%s cut at %d, IP length fixed", base, cut))
			}
			n++
		}
		// and the whole packet is fine
		if r := f.mustRun(full, ""); r.Reason != compile.ReasonPolicyAccept {
			t.Errorf("%s whole: reason %s", base, r.Reason)
		}
	}
	t.Logf("%d truncations checked", n)
}

func ipHeaderLen(p *packet.Packet) int {
	if p.Src.Is4() {
		return 20 + len(p.IPv4Options)
	}
	return 40
}

// expectCut is the reason a frame of base cut at cut bytes must get.
func expectCut(p *packet.Packet, l3, cut int, fixed bool) compile.Reason {
	switch {
	case cut < l3:
		return compile.ReasonBadVLAN
	case cut < l3+ipHeaderLen(p):
		if p.Src.Is4() {
			return compile.ReasonBadIPv4
		}
		return compile.ReasonBadIPv6
	case !fixed:
		if p.Src.Is4() {
			return compile.ReasonBadIPv4
		}
		return compile.ReasonBadIPv6
	}
	off := l3 + ipHeaderLen(p)
	for _, e := range p.IPv6Ext {
		off += e.Len
		if cut < off {
			return compile.ReasonBadExtHdr
		}
	}
	if p.Src.Is6() && p.IsFragment() {
		off += 8 // the fragment header
		if cut < off {
			return compile.ReasonBadExtHdr
		}
	}
	if p.FragOffset != 0 {
		return compile.ReasonPolicyAccept // no L4 header expected
	}
	need := map[uint8]int{6: 20, 17: 8, 1: 8, 58: 8}[p.Proto]
	if cut-off < need {
		return compile.ReasonBadL4
	}
	return compile.ReasonPolicyAccept
}

// fixLength rewrites the IPv4 total length / IPv6 payload length (and the
// IPv4 checksum, which the program does not check anyway) to fit the frame.
func fixLength(p *packet.Packet, frame []byte, l3 int) {
	if p.Src.Is4() {
		binary.BigEndian.PutUint16(frame[l3+2:], uint16(len(frame)-l3))
		return
	}
	binary.BigEndian.PutUint16(frame[l3+4:], uint16(len(frame)-l3-40))
}

func check(t *testing.T, f *fixture, frame []byte, want compile.Reason, what string) {
	t.Helper()
	r := f.mustRun(frame, "")
	wantAct := uint32(datapath.XDPDrop)
	if want == compile.ReasonPolicyAccept {
		wantAct = datapath.XDPPass
	}
	if r.Reason != want || r.XDPAction != wantAct {
		t.Errorf("%s: reason %s action %d, want %s action %d", what, r.Reason, r.XDPAction, want, wantAct)
	}
}

// TestMalformedHeaders: hand-broken headers and over-deep stacks.
func TestMalformedHeaders(t *testing.T) {
	f := newFixture(t)
	f.installText("-P INPUT ACCEPT\n")
	tcp := v4pkt(6, "10.0.0.1", "10.0.0.2", 1, 22)
	edit := func(fn func(b []byte)) []byte { b := tcp.Bytes(); fn(b); return b }
	deepVLAN := v4pkt(6, "10.0.0.1", "10.0.0.2", 1, 22)
	deepVLAN.VLANs = []uint16{1, 2, 3}
	maxVLAN := v4pkt(6, "10.0.0.1", "10.0.0.2", 1, 22)
	maxVLAN.VLANs = []uint16{1, 2}
	deepExt := v4pkt(6, "0.0.0.0", "0.0.0.0", 1, 22)
	deepExt.Src, deepExt.Dst = netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	for i := 0; i < 9; i++ {
		deepExt.IPv6Ext = append(deepExt.IPv6Ext, packet.ExtHdr{Type: 60, Len: 8})
	}
	maxExt := *deepExt
	maxExt.IPv6Ext = deepExt.IPv6Ext[:8]
	cases := []struct {
		name  string
		frame []byte
		want  compile.Reason
	}{
		{"IHL 4", edit(func(b []byte) { b[14] = 0x44 }), compile.ReasonBadIPv4},
		{"IHL 0", edit(func(b []byte) { b[14] = 0x40 }), compile.ReasonBadIPv4},
		{"IHL 15 beyond the packet", edit(func(b []byte) { b[14] = 0x4f }), compile.ReasonBadIPv4},
		{"version 5 with EtherType IPv4", edit(func(b []byte) { b[14] = 0x55 }), compile.ReasonBadIPv4},
		{"total length below IHL", edit(func(b []byte) { binary.BigEndian.PutUint16(b[16:], 19) }), compile.ReasonBadIPv4},
		{"total length past the frame", edit(func(b []byte) { binary.BigEndian.PutUint16(b[16:], 1500) }), compile.ReasonBadIPv4},
		{"TCP data offset 4", edit(func(b []byte) { b[34+12] = 0x40 }), compile.ReasonBadL4},
		{"TCP data offset past the packet", edit(func(b []byte) { b[34+12] = 0xf0 }), compile.ReasonBadL4},
		{"three VLAN tags", deepVLAN.Bytes(), compile.ReasonVLANDepth},
		{"two VLAN tags are fine", maxVLAN.Bytes(), compile.ReasonPolicyAccept},
		{"nine extension headers", deepExt.Bytes(), compile.ReasonExtHdrDepth},
		{"eight extension headers are fine", maxExt.Bytes(), compile.ReasonPolicyAccept},
		{"padding is not a header", func() []byte {
			// IPv4 total length says 20: the TCP header lies in Ethernet padding
			b := tcp.Bytes()
			binary.BigEndian.PutUint16(b[16:], 20)
			return b
		}(), compile.ReasonBadL4},
	}
	for _, c := range cases {
		check(t, f, c.frame, c.want, c.name)
	}
}

// TestShortFrames: the kernel refuses to run XDP on frames shorter than an
// Ethernet header (EINVAL), so zero-length and sub-14-byte frames never
// reach the program; the parser bounds-checks them anyway.
func TestShortFrames(t *testing.T) {
	f := newFixture(t)
	f.installText("-P INPUT ACCEPT\n")
	for _, n := range []int{0, 1, 13} {
		_, err := f.run(make([]byte, n), "")
		if !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%d-byte frame: err %v, want EINVAL", n, err)
		}
	}
}
