package packet

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"reflect"
	"testing"
)

// The expected frames below were computed with an independent script
// (Python struct + its own RFC 1071 checksum), not with this package.

var (
	mac1 = [6]byte{2, 0, 0, 0, 0, 1}
	mac2 = [6]byte{2, 0, 0, 0, 0, 2}
	v6a  = netip.MustParseAddr("fd00::1")
	v6b  = netip.MustParseAddr("fd00::2")
)

// vector is a hand-checked packet: the model, the exact frame, and the packet
// Decode returns for that frame (the model with defaults made explicit).
type vector struct {
	name    string
	pkt     Packet
	frame   string
	decoded Packet
}

// vectors returns the hand-checked vectors.
func vectors() []vector {
	tcpSYN := Packet{
		SrcMAC: mac1, DstMAC: mac2, VLANs: []uint16{10},
		Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		Proto: ProtoTCP, SPort: 1234, DPort: 80, TCPFlags: TCPSyn,
	}
	tcpSYNDec := tcpSYN
	tcpSYNDec.TTL = 64

	udp6 := Packet{
		SrcMAC: mac1, DstMAC: mac2, Src: v6a, Dst: v6b,
		Proto: ProtoUDP, SPort: 33333, DPort: 34444, Payload: []byte("hi"),
	}
	udp6Dec := udp6
	udp6Dec.TTL = 64

	icmpEcho := Packet{
		SrcMAC: mac1, DstMAC: mac2,
		Src: netip.MustParseAddr("192.168.1.1"), Dst: netip.MustParseAddr("192.168.1.2"),
		Proto: ProtoICMP, ICMPType: 8, TTL: 1, Payload: []byte("abcd"),
	}

	arp := Packet{
		SrcMAC: mac1, DstMAC: [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		NonIP: EtherTypeARP, Payload: []byte{0, 1, 8, 0, 6, 4, 0, 1}, PadTo60: true,
	}
	arpDec := arp
	arpDec.PadTo60 = false // padding of non-IP frames is part of the payload
	arpDec.Payload = append(append([]byte(nil), arp.Payload...), make([]byte, 60-14-8)...)

	frag6 := Packet{
		SrcMAC: mac1, DstMAC: mac2, VLANs: []uint16{100, 20},
		Src: v6a, Dst: v6b, Proto: ProtoTCP, SPort: 1, DPort: 2,
		FragOffset: 100, MoreFragments: true,
		IPv6Ext: []ExtHdr{{Type: ProtoHopByHop}}, Payload: []byte("xyz"),
	}
	frag6Dec := frag6
	frag6Dec.SPort, frag6Dec.DPort, frag6Dec.TTL = 0, 0, 64
	frag6Dec.IPv6Ext = []ExtHdr{{Type: ProtoHopByHop, Len: 8}}

	opts := Packet{
		SrcMAC: mac1, DstMAC: mac2,
		Src: netip.MustParseAddr("10.1.1.1"), Dst: netip.MustParseAddr("10.2.2.2"),
		Proto: ProtoUDP, SPort: 1000, DPort: 2000, MoreFragments: true,
		IPv4Options: []byte{0x94, 4, 0, 0, 1}, Payload: []byte("data"),
	}
	optsDec := opts
	optsDec.TTL = 64
	optsDec.IPv4Options = []byte{0x94, 4, 0, 0, 1, 0, 0, 0}

	icmp6 := Packet{
		SrcMAC: mac1, DstMAC: mac2, Src: v6a, Dst: v6b, TTL: 255,
		Proto: ProtoICMPv6, ICMPType: 128,
		IPv6Ext: []ExtHdr{{Type: ProtoAH, Len: 12}, {Type: ProtoDestOpts, Len: 16}},
	}

	rt6 := Packet{
		SrcMAC: mac1, DstMAC: mac2, Src: v6a, Dst: v6b,
		Proto: ProtoTCP, SPort: 40000, DPort: 443, TCPFlags: TCPAck, Payload: []byte("r"),
		IPv6Ext: []ExtHdr{{Type: ProtoRouting, Len: 24}, {Type: ProtoDestOpts}},
	}
	rt6Dec := rt6
	rt6Dec.TTL = 64
	rt6Dec.IPv6Ext = []ExtHdr{{Type: ProtoRouting, Len: 24}, {Type: ProtoDestOpts, Len: 8}}

	return []vector{
		{"tcpSYNVlan", tcpSYN, "0200000000020200000000018100000a0800450000281c46000040064a880a0000010a00000204d2005011223344556677885002faf08a780000", tcpSYNDec},
		{"udp6", udp6, "02000000000202000000000186dd60000000000a1140fd000000000000000000000000000001fd0000000000000000000000000000028235868c000a94aa6869", udp6Dec},
		{"icmpEcho", icmpEcho, "0200000000020200000000010800450000201c46000001011a44c0a80101c0a801020800f0f54242000161626364", icmpEcho},
		{"arpPadded", arp, "ffffffffffff020000000001080600010800060400010000000000000000000000000000000000000000000000000000000000000000000000000000", arpDec},
		{"ipv6FragQinQ", frag6, "02000000000202000000000188a800648100001486dd6000000000130040fd000000000000000000000000000001fd0000000000000000000000000000022c00010400000000060003210badcafe78797a", frag6Dec},
		{"ipv4OptsMF", opts, "0200000000020200000000010800470000281c462000401190750a0101010a020202940400000100000003e807d0000c045664617461", optsDec},
		{"icmp6AHDst", icmp6, "02000000000202000000000186dd60000000002433fffd000000000000000000000000000001fd0000000000000000000000000000023c01000000001000000000013a011e0c0000000000000000000000008000437542420001", icmp6},
		{"tcp6Routing", rt6, "02000000000202000000000186dd6000000000352b40fd000000000000000000000000000001fd0000000000000000000000000000023c02fd00000000000000000000000000000000000000000006000104000000009c4001bb11223344556677885010faf0998d000072", rt6Dec},
	}
}

// mustHex decodes a hex string or fails the test.
func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex: %v", err)
	}
	return b
}

// TestBytesVectors compares built frames with independently computed bytes.
func TestBytesVectors(t *testing.T) {
	for _, v := range vectors() {
		t.Run(v.name, func(t *testing.T) {
			want := mustHex(t, v.frame)
			got := v.pkt.Bytes()
			if !bytes.Equal(got, want) {
				t.Errorf("%v\n got %x\nwant %x", v.pkt, got, want)
			}
		})
	}
}

// TestDecodeVectors decodes the hand-checked frames.
func TestDecodeVectors(t *testing.T) {
	for _, v := range vectors() {
		t.Run(v.name, func(t *testing.T) {
			got, err := Decode(mustHex(t, v.frame))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, v.decoded) {
				t.Errorf("Decode mismatch\n got %#v\nwant %#v", got, v.decoded)
			}
		})
	}
}

// TestDecodeForeign decodes frames the builder never produces: TCP options,
// a single 802.1ad tag, PCP bits, Ethernet trailers and an all-0x8100 QinQ.
func TestDecodeForeign(t *testing.T) {
	// TCP SYN with MSS option (data offset 6) and 1 byte of payload.
	tcpOpt := "020000000002020000000001" + "0800" +
		"4500002d0000400040060000" + "0a000001" + "0a000002" +
		"04d20050" + "00000001" + "00000000" + "6002ffff" + "00000000" + "020405b4" + "41"
	p, err := Decode(mustHex(t, tcpOpt))
	if err != nil {
		t.Fatal(err)
	}
	if p.SPort != 1234 || p.DPort != 80 || p.TCPFlags != TCPSyn || string(p.Payload) != "A" {
		t.Errorf("TCP with options decoded as %v payload %q", p, p.Payload)
	}

	// PCP 5 / DEI on an 0x8100 tag, then 0x8100 inner: QinQ with TPID8100.
	qinq := "020000000002020000000001" + "8100" + "b064" + "8100" + "0014" + "0806" + "0001"
	p, err = Decode(mustHex(t, qinq))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.VLANs, []uint16{100, 20}) || !p.TPID8100 || p.NonIP != EtherTypeARP {
		t.Errorf("QinQ 8100/8100 decoded as %#v", p)
	}

	// IPv4 UDP followed by a non-zero Ethernet trailer: ignored, no PadTo60.
	b := (&Packet{Src: netip.MustParseAddr("1.1.1.1"), Dst: netip.MustParseAddr("2.2.2.2"), Proto: ProtoUDP, SPort: 1, DPort: 2}).Bytes()
	b = append(b, 0xde, 0xad)
	p, err = Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if p.PadTo60 || len(p.Payload) != 0 || p.DPort != 2 {
		t.Errorf("trailer not ignored: %#v", p)
	}

	// IPv6 first fragment: L4 header parsed.
	first := Packet{Src: v6a, Dst: v6b, Proto: ProtoUDP, SPort: 7, DPort: 9, MoreFragments: true, Payload: []byte("x")}
	p, err = Decode(first.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !p.MoreFragments || p.FragOffset != 0 || p.DPort != 9 || !p.L4Present() {
		t.Errorf("first fragment decoded as %#v", p)
	}
}

// TestDecodeErrors checks that malformed frames are rejected with a precise error.
func TestDecodeErrors(t *testing.T) {
	good := vectors()[0].frame // VLAN TCP SYN
	cases := []struct {
		name, frame, want string
	}{
		{"short ethernet", "0200000000020200", "Ethernet header"},
		{"short vlan", "0200000000020200000000018100000a", "VLAN tag"},
		{"short ipv4", good[:2*(18+10)], "IPv4 header"},
		{"ipv4 total length beyond frame", good[:len(good)-2], "IPv4 packet"},
		{"short tcp", "02000000000202000000000108004500001c000000004006000" + "00a0000010a000002" + "04d2005011223344", "TCP header"},
		{"bad version", "020000000002020000000001080065000014000000004006000" + "00a0000010a000002", "IP version 6"},
		{"bad ihl", "020000000002020000000001080042000014000000004006000" + "00a0000010a000002", "header length 8"},
		{"short ipv6", "02000000000202000000000186dd6000", "IPv6 header"},
		{"ethertype 0", "0200000000020200000000010000", "EtherType 0"},
		{"udp length", "0200000000020200000000010800450000200000000040110000" + "0a0000010a000002" + "0001000200ff0000" + "00000000", "UDP length"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(mustHex(t, c.frame))
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte(c.want)) {
				t.Errorf("Decode error = %v, want one containing %q", err, c.want)
			}
		})
	}
}
