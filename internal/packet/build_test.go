package packet

import (
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"
)

var (
	v4a = netip.MustParseAddr("10.0.0.1")
	v4b = netip.MustParseAddr("10.0.0.2")
)

// TestVLANTPIDs checks the TPIDs of single, QinQ and TPID8100 tag stacks.
func TestVLANTPIDs(t *testing.T) {
	cases := []struct {
		vlans    []uint16
		tpid8100 bool
		want     []uint16 // TPIDs, outermost first
	}{
		{[]uint16{10}, false, []uint16{0x8100}},
		{[]uint16{100, 10}, false, []uint16{0x88a8, 0x8100}},
		{[]uint16{100, 10}, true, []uint16{0x8100, 0x8100}},
		{[]uint16{1, 2, 3}, false, []uint16{0x88a8, 0x8100, 0x8100}},
	}
	for _, c := range cases {
		p := Packet{VLANs: c.vlans, TPID8100: c.tpid8100, Src: v4a, Dst: v4b, Proto: ProtoUDP}
		b := p.Bytes()
		for i, tpid := range c.want {
			off := 12 + 4*i
			if got := binary.BigEndian.Uint16(b[off:]); got != tpid {
				t.Errorf("%v: tag %d TPID %#x, want %#x", p, i, got, tpid)
			}
			if got := binary.BigEndian.Uint16(b[off+2:]); got != c.vlans[i] {
				t.Errorf("%v: tag %d TCI %d, want %d", p, i, got, c.vlans[i])
			}
		}
		if et := binary.BigEndian.Uint16(b[12+4*len(c.want):]); et != EtherTypeIPv4 {
			t.Errorf("%v: inner EtherType %#x", p, et)
		}
	}
}

// TestPadTo60 checks that PadTo60 pads short frames only and leaves IP lengths alone.
func TestPadTo60(t *testing.T) {
	p := Packet{Src: v4a, Dst: v4b, Proto: ProtoUDP, SPort: 1, DPort: 2}
	if n := len(p.Bytes()); n != 42 {
		t.Fatalf("unpadded UDP frame is %d bytes, want 42", n)
	}
	p.PadTo60 = true
	b := p.Bytes()
	if len(b) != 60 {
		t.Fatalf("padded frame is %d bytes, want 60", len(b))
	}
	if tl := binary.BigEndian.Uint16(b[16:]); tl != 28 {
		t.Errorf("IPv4 total length %d includes padding, want 28", tl)
	}
	p.Payload = make([]byte, 100)
	if n := len(p.Bytes()); n != 142 {
		t.Errorf("large padded frame is %d bytes, want 142", n)
	}
}

// TestL4Present checks when an L4 header is emitted.
func TestL4Present(t *testing.T) {
	cases := []struct {
		p    Packet
		want bool
	}{
		{Packet{Src: v4a, Dst: v4b, Proto: ProtoTCP}, true},
		{Packet{Src: v4a, Dst: v4b, Proto: ProtoUDP, MoreFragments: true}, true},
		{Packet{Src: v4a, Dst: v4b, Proto: ProtoUDP, FragOffset: 1}, false},
		{Packet{Src: v6a, Dst: v6b, Proto: ProtoICMPv6}, true},
		{Packet{Src: v6a, Dst: v6b, Proto: 47}, false},
		{Packet{NonIP: EtherTypeARP, Src: v4a, Dst: v4b, Proto: ProtoTCP}, false},
		{Packet{}, false},
	}
	for _, c := range cases {
		if got := c.p.L4Present(); got != c.want {
			t.Errorf("%v: L4Present = %v, want %v", c.p, got, c.want)
		}
	}
}

// TestEncodeErrors checks that unencodable packets make Encode fail and Bytes panic.
func TestEncodeErrors(t *testing.T) {
	cases := []struct {
		name string
		p    Packet
		want string
	}{
		{"no addresses", Packet{Proto: ProtoTCP}, "must both be set"},
		{"mixed families", Packet{Src: v4a, Dst: v6b}, "different IP versions"},
		{"vlan range", Packet{VLANs: []uint16{4096}, Src: v4a, Dst: v4b}, "VLAN ID 4096"},
		{"long options", Packet{Src: v4a, Dst: v4b, IPv4Options: make([]byte, 41)}, "at most 40"},
		{"frag offset", Packet{Src: v4a, Dst: v4b, FragOffset: 0x2000}, "fragment offset"},
		{"ext len", Packet{Src: v6a, Dst: v6b, IPv6Ext: []ExtHdr{{Type: ProtoHopByHop, Len: 12}}}, "multiple of 8"},
		{"ah len", Packet{Src: v6a, Dst: v6b, IPv6Ext: []ExtHdr{{Type: ProtoAH, Len: 10}}}, "AH length"},
		{"too long", Packet{Src: v4a, Dst: v4b, Proto: ProtoUDP, Payload: make([]byte, 65536)}, "exceeds 65535"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.p.Encode()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Encode error = %v, want one containing %q", err, c.want)
			}
			defer func() {
				if recover() == nil {
					t.Errorf("Bytes did not panic")
				}
			}()
			c.p.Bytes()
		})
	}
}

// TestUDPZeroChecksum finds a UDP packet whose checksum computes to 0 and
// checks it is sent as 0xffff (0 means "no checksum").
func TestUDPZeroChecksum(t *testing.T) {
	for i := range 1 << 16 {
		p := Packet{Src: v4a, Dst: v4b, Proto: ProtoUDP, SPort: 1, DPort: 2, Payload: []byte{byte(i >> 8), byte(i)}}
		b := p.Bytes()
		if binary.BigEndian.Uint16(b[40:]) == 0xffff {
			if c := L4Checksum(v4a, v4b, ProtoUDP, b[34:]); c != 0 {
				t.Fatalf("%v: 0xffff checksum does not verify", p)
			}
			return
		}
	}
	t.Fatal("no payload gave a zero UDP checksum")
}

// TestOptionFill checks that options areas stay within what Linux accepts:
// padding runs of at most 7 bytes and at most 8 other options.
func TestOptionFill(t *testing.T) {
	for n := 8; n <= 2048; n += 8 {
		h, err := appendExtHdr(nil, ExtHdr{Type: ProtoDestOpts, Len: n}, ProtoTCP)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != n || int(h[1]) != n/8-1 {
			t.Fatalf("len %d: header of %d bytes, length field %d", n, len(h), h[1])
		}
		o, opts, pad := h[2:], 0, 0
		for len(o) > 0 {
			if o[0] == 0 {
				pad++
				o = o[1:]
				continue
			}
			if len(o) < 2 || len(o) < 2+int(o[1]) {
				t.Fatalf("len %d: option overruns the header", n)
			}
			if o[0] == 1 {
				pad += 2 + int(o[1])
			} else {
				opts++
				if o[0]&0xc0 != 0 {
					t.Fatalf("len %d: option type %#x is not skippable", n, o[0])
				}
			}
			o = o[2+int(o[1]):]
		}
		if pad > 7 || opts > 8 {
			t.Errorf("len %d: %d padding bytes, %d options", n, pad, opts)
		}
	}
}

// TestString checks the one-line summaries.
func TestString(t *testing.T) {
	cases := []struct {
		p    Packet
		want string
	}{
		{Packet{VLANs: []uint16{10}, Src: v4a, Dst: v4b, Proto: ProtoTCP, SPort: 1234, DPort: 80, TCPFlags: TCPSyn, Payload: make([]byte, 16)},
			"vlan 10 | 10.0.0.1:1234 > 10.0.0.2:80 tcp [SYN] len 74"},
		{Packet{VLANs: []uint16{100, 10}, Src: v6a, Dst: v6b, Proto: ProtoUDP, SPort: 53, DPort: 5353, IPv6Ext: []ExtHdr{{Type: ProtoHopByHop}}, MoreFragments: true},
			"qinq 100.10 | [fd00::1]:53 > [fd00::2]:5353 udp ext hbh(8) frag off 0 MF len 86"},
		{Packet{Src: v4a, Dst: v4b, Proto: ProtoTCP, SPort: 1, FragOffset: 185, TTL: 3, IPv4Options: []byte{1}},
			"10.0.0.1 > 10.0.0.2 tcp ttl 3 ipopts(4) frag off 185 len 38"},
		{Packet{Src: v4a, Dst: v4b, Proto: ProtoICMP, ICMPType: 8, PadTo60: true},
			"10.0.0.1 > 10.0.0.2 icmp type 8 code 0 pad len 60"},
		{Packet{Src: v6a, Dst: v6b, Proto: ProtoTCP, TCPFlags: TCPSyn | TCPAck},
			"[fd00::1]:0 > [fd00::2]:0 tcp [SYN,ACK] len 74"},
		{Packet{Src: v6a, Dst: v6b, Proto: 47},
			"fd00::1 > fd00::2 proto 47 len 54"},
		{Packet{NonIP: EtherTypeARP, Payload: arpRequest},
			"ethertype 0x0806 (arp) len 42"},
		{Packet{VLANs: []uint16{1, 2}, TPID8100: true, NonIP: 0x88b5},
			"vlan 1.2 | ethertype 0x88b5 len 22"},
		{Packet{VLANs: []uint16{10}, PCPs: []uint8{5}, Src: v4a, Dst: v4b, Proto: ProtoUDP, SPort: 1, DPort: 2},
			"vlan 10 pcp 5 | 10.0.0.1:1 > 10.0.0.2:2 udp len 46"},
		{Packet{VLANs: []uint16{100, 10}, PCPs: []uint8{0, 3}, NonIP: 0x88b5},
			"qinq 100.10 pcp 0.3 | ethertype 0x88b5 len 22"},
		{Packet{Src: v4a, Dst: v6b},
			"10.0.0.1 > fd00::2 proto 0 invalid: packet: Src 10.0.0.1 and Dst fd00::2 are of different IP versions"},
	}
	for _, c := range cases {
		if got := c.p.String(); got != c.want {
			t.Errorf("String() =\n  %q\nwant\n  %q", got, c.want)
		}
	}
	if got := TCPFlagsString(0); got != "none" {
		t.Errorf("TCPFlagsString(0) = %q", got)
	}
	if got := TCPFlagsString(0xff); got != "FIN,SYN,RST,PSH,ACK,URG,ECE,CWR" {
		t.Errorf("TCPFlagsString(0xff) = %q", got)
	}
}

// TestPPPoEFrame checks a PPPoE session frame byte by byte against RFC
// 2516's layout: EtherType 0x8864, version/type 0x11, code 0, session id,
// length (PPP protocol + IP packet, padding excluded), PPP protocol; and
// an LCP frame (NonIP with PPPoE) decodes back as one.
func TestPPPoEFrame(t *testing.T) {
	p := Packet{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2}, VLANs: []uint16{7},
		PPPoE: true, PPPoESID: 0x1234, Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("198.51.100.1"),
		Proto: ProtoUDP, SPort: 1, DPort: 2, PadTo60: true}
	b := p.Bytes()
	want := "020000000002020000000001" + "81000007" + "8864" + "1100" + "1234" + "001e" + "0021" + "45"
	if got := hex.EncodeToString(b[:len(want)/2]); got != want {
		t.Fatalf("frame starts %s, want %s", got, want)
	}
	if len(b) != 60 {
		t.Fatalf("frame is %d bytes, want 60 (padded)", len(b))
	}
	if d, err := Decode(b); err != nil || !d.PPPoE || d.PPPoESID != 0x1234 || d.DPort != 2 || !d.PadTo60 {
		t.Fatalf("Decode = %+v, %v", d, err)
	}
	lcp := Packet{PPPoE: true, PPPoESID: 1, NonIP: PPPLCP, Payload: []byte{9, 1, 0, 8, 1, 2, 3, 4}}
	if d, err := Decode(lcp.Bytes()); err != nil || d.NonIP != PPPLCP || !d.PPPoE || len(d.Payload) != 8 {
		t.Fatalf("LCP: Decode = %+v, %v", d, err)
	}
}
