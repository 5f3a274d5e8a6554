package nat

import (
	"math/bits"
	"net/netip"
	"testing"

	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/testutil"
)

// TestClaimPorts: fw_nat_claim (lib/nat.h), the port choice of SNAT and
// MASQUERADE, keeps a connection's own port where it is free and in the
// range, as the kernel does, gives every connection to one destination a
// port of its own (the reply tuples are unique keys, claimed with
// BPF_NOEXIST), records how to rewrite the answers back, and says so when
// the range has no free port left.
func TestClaimPorts(t *testing.T) {
	testutil.RequireRoot(t)
	h, err := NewHarness()
	if err != nil {
		t.Fatalf("%+v", err)
	}
	defer h.Close()
	to := netip.MustParseAddr("192.0.2.1")
	server := netip.MustParseAddr("198.51.100.9")
	udp := func(src string, sport uint16) []byte {
		return (&packet.Packet{Src: netip.MustParseAddr(src), Dst: server, Proto: packet.ProtoUDP, SPort: sport, DPort: 53}).Bytes()
	}
	claim := func(src string, sport, lo, hi uint16) uint16 {
		t.Helper()
		p, err := h.Claim(udp(src, sport), to, lo, hi)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := claim("10.0.0.1", 5000, 1024, 65535); p != 5000 {
		t.Fatalf("the first connection from port 5000 got port %d, want its own", p)
	}
	if p := claim("10.0.0.2", 5000, 1024, 65535); p == 5000 || p < 1024 {
		t.Fatalf("a second connection from port 5000 to the same server got port %d, want another one of 1024-65535", p)
	}
	if p := claim("10.0.0.3", 80, 1024, 65535); p < 1024 {
		t.Fatalf("port 80 out of the range 1024-65535 got %d", p)
	}
	// a range of 4 ports: 4 connections, then none free
	seen := map[uint16]bool{}
	for i := range 4 {
		p := claim("10.0.1."+string(rune('1'+i)), 6000, 2000, 2003)
		if p < 2000 || p > 2003 || seen[p] {
			t.Fatalf("connection %d in 2000-2003 got port %d (already: %v)", i, p, seen)
		}
		seen[p] = true
	}
	if p := claim("10.0.1.9", 6000, 2000, 2003); p != 0 {
		t.Fatalf("a fifth connection in a range of 4 ports got port %d, want none", p)
	}
	// many connections from one port to one server: each its own port
	seen = map[uint16]bool{}
	for i := range 500 {
		src := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}).String()
		p := claim(src, 7000, 1024, 65535)
		if p < 1024 || seen[p] {
			t.Fatalf("connection %d got port %d, taken or out of range", i, p)
		}
		seen[p] = true
	}
	claimed, err := h.Claimed()
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 3+4+500 {
		t.Fatalf("%d reply tuples claimed, want %d", len(claimed), 3+4+500)
	}
	for k, back := range claimed {
		if k.Proto != 17 || back.Src != server || back.Dst.As4()[0] != 10 || bits.ReverseBytes16(k.Sport) != 53 {
			t.Fatalf("claimed %+v -> %+v: not an answer from the server back to a client", k, back)
		}
	}
}
