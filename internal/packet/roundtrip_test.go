package packet

import (
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestRoundTripRandom builds random packets, decodes them back and checks model, lengths and checksums.
func TestRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		p := randPacket(r, genOptions{wellFormed: i%2 == 0})
		frame := p.Bytes()
		got, err := Decode(frame)
		if err != nil {
			t.Fatalf("packet %d %v: Decode: %v\nframe %x", i, p, err, frame)
		}
		want := normalize(p)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("packet %d %v: round trip mismatch\n got %#v\nwant %#v\nframe %x", i, p, got, want, frame)
		}
		if p.PadTo60 && len(frame) < minFrameSize {
			t.Fatalf("packet %d %v: PadTo60 frame is %d bytes", i, p, len(frame))
		}
		if !p.PadTo60 && len(frame) != unpaddedLen(p) {
			t.Fatalf("packet %d %v: frame is %d bytes, want %d", i, p, len(frame), unpaddedLen(p))
		}
		verifyChecksums(t, p, frame)
		// Decoding is stable: the decoded packet encodes to the same frame.
		if again := got.Bytes(); string(again) != string(frame) {
			t.Fatalf("packet %d %v: re-encoding the decoded packet differs\n got %x\nwant %x", i, p, again, frame)
		}
	}
}

// unpaddedLen computes the expected frame length from the model alone.
func unpaddedLen(p Packet) int {
	n := 14 + 4*len(p.VLANs) + len(p.Payload)
	if p.PPPoE {
		n += 8
	}
	if p.NonIP != 0 {
		return n
	}
	if p.IsIPv6() {
		n += 40
		for _, e := range p.IPv6Ext {
			l, _ := extHdrLen(e)
			n += l
		}
		if p.IsFragment() {
			n += 8
		}
	} else {
		n += 20 + (len(p.IPv4Options)+3)&^3
	}
	if p.L4Present() {
		l, _ := l4HeaderLen(p.Proto)
		n += l
	}
	return n
}

// verifyChecksums checks that every checksum in frame verifies (sums to 0).
func verifyChecksums(t *testing.T, p Packet, frame []byte) {
	t.Helper()
	if !p.IsIP() {
		return
	}
	ip := frame[14+4*len(p.VLANs):]
	if p.PPPoE {
		ip = ip[8:]
	}
	var seg []byte
	if p.IsIPv6() {
		off := 40
		for _, e := range p.IPv6Ext {
			l, _ := extHdrLen(e)
			off += l
		}
		if p.IsFragment() {
			off += 8
		}
		seg = ip[off : 40+int(binary.BigEndian.Uint16(ip[4:]))]
	} else {
		hl := int(ip[0]&0xf) * 4
		if c := Checksum(ip[:hl]); c != 0 {
			t.Fatalf("%v: IPv4 header checksum does not verify (%#x)", p, c)
		}
		seg = ip[hl:binary.BigEndian.Uint16(ip[2:])]
	}
	if !p.L4Present() {
		return
	}
	var c uint16
	switch p.Proto {
	case ProtoICMP:
		c = Checksum(seg)
	default:
		c = L4Checksum(p.Src, p.Dst, p.Proto, seg)
	}
	if c != 0 {
		t.Fatalf("%v: L4 checksum does not verify (%#x)", p, c)
	}
}
