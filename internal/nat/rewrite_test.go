package nat

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/testutil"
)

// randomFrame returns a random Ethernet + IPv4 frame: TCP, UDP (its
// checksum 0 a fifth of the time), ICMP echo request or reply, another
// ICMP message, GRE; IPv4 options sometimes; a fragment sometimes; a
// payload of 0 to 99 bytes.
func randomFrame(r *rand.Rand) []byte {
	addr := func() netip.Addr { return netip.AddrFrom4([4]byte{10, 200, byte(r.IntN(256)), byte(r.IntN(256))}) }
	p := packet.Packet{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2}, Src: addr(), Dst: addr(),
		Proto: []uint8{6, 6, 17, 17, 1, 47}[r.IntN(6)], SPort: uint16(r.UintN(65536)), DPort: uint16(r.UintN(65536)),
		TCPFlags: packet.TCPSyn, TTL: uint8(1 + r.IntN(255))}
	if p.Proto == 1 {
		p.ICMPType = []uint8{8, 0, 3, 11}[r.IntN(4)]
	}
	if r.IntN(5) == 0 {
		p.IPv4Options = []byte{1, 1, 1, 1}
	}
	switch r.IntN(12) {
	case 0:
		p.MoreFragments = true
	case 1:
		p.FragOffset = uint16(1 + r.IntN(100))
	}
	p.Payload = make([]byte, r.IntN(100))
	for i := range p.Payload {
		p.Payload[i] = byte(r.UintN(256))
	}
	f := p.Bytes()
	if p.Proto == 17 && r.IntN(5) == 0 && p.FragOffset == 0 {
		l4 := 14 + int(f[14]&0xf)*4
		f[l4+6], f[l4+7] = 0, 0 // no checksum (IPv4 allows it)
	}
	if p.Proto == 1 && (p.ICMPType == 8 || p.ICMPType == 0) && p.FragOffset == 0 {
		// a random echo id: the builder writes a fixed one
		l4 := 14 + int(f[14]&0xf)*4
		binary.BigEndian.PutUint16(f[l4+4:], uint16(r.UintN(65536)))
		f[l4+2], f[l4+3] = 0, 0
		binary.BigEndian.PutUint16(f[l4+2:], packet.Checksum(f[l4:]))
	}
	return f
}

// randomRw returns a rewrite of frame f's tuple: each field kept or changed.
func randomRw(r *rand.Rand, f []byte) Rw {
	ip := f[14:]
	l4 := ip[int(ip[0]&0xf)*4:]
	rw := Rw{Src: netip.AddrFrom4([4]byte(ip[12:16])), Dst: netip.AddrFrom4([4]byte(ip[16:20]))}
	if len(l4) >= 4 {
		rw.SPort, rw.DPort = binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:])
	}
	if ip[9] == 1 && len(l4) >= 6 {
		rw.SPort = binary.BigEndian.Uint16(l4[4:])
		rw.DPort = rw.SPort
	}
	if r.IntN(2) == 0 {
		rw.Src = netip.AddrFrom4([4]byte{192, 0, 2, byte(r.IntN(256))})
	}
	if r.IntN(2) == 0 {
		rw.Dst = netip.AddrFrom4([4]byte{198, 51, 100, byte(r.IntN(256))})
	}
	if r.IntN(2) == 0 {
		rw.SPort = uint16(r.UintN(65536))
	}
	if r.IntN(2) == 0 {
		rw.DPort = uint16(r.UintN(65536))
	}
	return rw
}

// csumFields are the offsets in frame f of the IPv4 checksum and of the L4
// checksum fw_nat_rewrite4 updates (-1: none).
func csumFields(f []byte) (int, int) {
	hl := int(f[14]&0xf) * 4
	l4 := 14 + hl
	switch f[23] {
	case 6:
		return 24, l4 + 16
	case 17:
		return 24, l4 + 6
	case 1:
		return 24, l4 + 2
	}
	return 24, -1
}

// TestRewrite4AgainstTwin: the data plane's rewrite (lib/nat.h, run by
// BPF_PROG_TEST_RUN in bpf/test/nat_rewrite.c) gives every random frame
// the addresses, ports and ICMP echo ids asked for, leaves every other byte
// as it was, and leaves checksums that verify: the bytes of Rewrite4's
// full recomputation, or its other form of zero; a UDP checksum of 0
// stays 0. What Rewrite4 refuses (later fragments) the data plane passes
// unchanged; a first fragment is rewritten as a whole packet.
func TestRewrite4AgainstTwin(t *testing.T) {
	testutil.RequireRoot(t)
	h, err := NewHarness()
	if err != nil {
		t.Fatalf("%+v", err)
	}
	defer h.Close()
	r := rand.New(rand.NewPCG(22, 16))
	refused, done := 0, 0
	// First a UDP datagram whose new checksum sums to zero, which must be
	// sent as 0xffff (0 means none): the rewrite's source port that gives
	// it, found with the twin.
	udp := packet.Packet{Src: netip.MustParseAddr("10.200.0.1"), Dst: netip.MustParseAddr("10.200.0.2"), Proto: 17,
		SPort: 1000, DPort: 53, Payload: []byte("x")}
	zeroFrame := udp.Bytes()
	zeroRw := Rw{Src: netip.MustParseAddr("192.0.2.1"), Dst: udp.Dst, DPort: 53}
	for p := range 65536 {
		zeroRw.SPort = uint16(p)
		w := bytes.Clone(zeroFrame)
		if Rewrite4(w[14:], zeroRw) == nil && binary.BigEndian.Uint16(w[14+20+6:]) == 0xffff {
			break
		}
	}
	for i := range 4001 {
		f, rw := zeroFrame, zeroRw
		if i > 0 {
			f = randomFrame(r)
			rw = randomRw(r, f)
		}
		out, ok, err := h.Rewrite(f, rw)
		if err != nil {
			t.Fatal(err)
		}
		want := bytes.Clone(f)
		werr := Rewrite4(want[14:], rw)
		if errors.Is(werr, ErrRefused) {
			if ok || !bytes.Equal(out, f) {
				t.Fatalf("frame %d: refused by the twin, but not by the data plane (rewrote: %v)\nin  %x\nout %x", i, ok, f, out)
			}
			refused++
			continue
		}
		if !ok {
			t.Fatalf("frame %d: the data plane refused what the twin rewrites\n%x", i, f)
		}
		ipc, l4c := csumFields(f)
		for _, c := range []int{ipc, l4c} {
			if c < 0 {
				continue
			}
			g, w := binary.BigEndian.Uint16(out[c:]), binary.BigEndian.Uint16(want[c:])
			zero := f[23] == 17 && c == l4c && binary.BigEndian.Uint16(f[c:]) == 0
			switch {
			case g == w:
			case zero:
				t.Fatalf("frame %d: a UDP checksum of 0 became %#x", i, g)
			case g^w == 0xffff && (g == 0 || w == 0): // +0 and -0: both verify
				if f[23] == 17 && c == l4c && g == 0 {
					t.Fatalf("frame %d: UDP checksum 0 written for a computed one", i)
				}
			default:
				t.Fatalf("frame %d: checksum at %d is %#04x, the full recomputation %#04x\nin   %x\nout  %x\nwant %x (%+v)", i, c, g, w, f, out, want, rw)
			}
			copy(out[c:c+2], want[c:c+2])
		}
		if !bytes.Equal(out, want) {
			t.Fatalf("frame %d (%+v):\nin   %x\nout  %x\nwant %x", i, rw, f, out, want)
		}
		done++
	}
	if refused == 0 || done < 3000 {
		t.Fatalf("%d rewritten, %d refused: the frames do not cover both", done, refused)
	}
	t.Logf("%d frames rewritten as the twin does, %d fragments refused", done, refused)
}
