package nat

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"

	"github.com/cilium/ebpf"
)

// Harness runs the data plane's rewrite (bpf/lib/nat.h fw_nat_rewrite4) on
// frames, through its test program (bpf/test/nat_rewrite.c) and
// BPF_PROG_TEST_RUN: for the tests that hold it to its Go twin and to the
// kernel's NAT. It is no part of the firewall.
type Harness struct{ objs natrwObjects }

// NewHarness loads the test program (root, or CAP_BPF).
func NewHarness() (*Harness, error) {
	h := &Harness{}
	if err := loadNatrwObjects(&h.objs, nil); err != nil {
		return nil, fmt.Errorf("loading the nat rewrite harness: %w", err)
	}
	return h, nil
}

// Close releases the program and its maps.
func (h *Harness) Close() error { return h.objs.Close() }

// Rewrite returns the Ethernet + IPv4 frame as fw_nat_rewrite4 rewrites it
// to carry rw's addresses and ports; false (and the frame unchanged) when
// it refuses.
func (h *Harness) Rewrite(frame []byte, rw Rw) ([]byte, bool, error) {
	return h.run(h.objs.NatRewriteTest, frame, rw)
}

// RewriteError returns the frame, an ICMP error, as
// fw_nat_rewrite4_icmp_error rewrites it: its outer header to carry outer's
// addresses, the packet it quotes inner's addresses and ports; false (and
// the frame unchanged) when it refuses.
func (h *Harness) RewriteError(frame []byte, outer, inner Rw) ([]byte, bool, error) {
	return h.run(h.objs.NatRewriteErrorTest, frame, outer, inner)
}

// Bind translates the first packet of a connection, frame, to leave with
// out's tuple: both directions' bindings are recorded (fw_nat_bind4), then
// the frame rewritten; false (the frame unchanged) when refused: the reply
// tuple is another connection's, or the packet cannot be translated.
func (h *Harness) Bind(frame []byte, out Rw) ([]byte, bool, error) {
	return h.run(h.objs.NatBindTest, frame, out)
}

// Apply translates a later packet of a bound connection, in either
// direction, by the binding of the tuple it arrives with; false (the frame
// unchanged) when it has none.
func (h *Harness) Apply(frame []byte) ([]byte, bool, error) {
	return h.run(h.objs.NatApplyTest, frame)
}

// run puts rws in nat_rw_spec and runs prog on frame.
func (h *Harness) run(prog *ebpf.Program, frame []byte, rws ...Rw) ([]byte, bool, error) {
	for i, rw := range rws {
		s, d := rw.Src.As4(), rw.Dst.As4()
		// the struct's fields hold network order; its Go twin stores them little-endian
		spec := natrwFwNatRw{Saddr: binary.LittleEndian.Uint32(s[:]), Daddr: binary.LittleEndian.Uint32(d[:]),
			Sport: bits.ReverseBytes16(rw.SPort), Dport: bits.ReverseBytes16(rw.DPort)}
		if err := h.objs.NatRwSpec.Put(uint32(i), &spec); err != nil {
			return nil, false, err
		}
	}
	opts := ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+64)}
	ret, err := prog.Run(&opts)
	if err != nil {
		return nil, false, err
	}
	const xdpTX = 3
	return opts.DataOut, ret == xdpTX, nil
}

// Claim source-translates the UDP datagram frame to the address to and a
// port of lo..hi as fw_nat_claim picks and claims it (the harness keeps
// the claims until ResetClaims); 0 when none was free.
func (h *Harness) Claim(frame []byte, to netip.Addr, lo, hi uint16) (uint16, error) {
	if _, _, err := h.run(h.objs.NatClaimTest, frame, Rw{Src: to, Dst: to, SPort: lo, DPort: hi}); err != nil {
		return 0, err
	}
	var port uint32
	err := h.objs.NatClaimPort.Lookup(uint32(0), &port)
	return uint16(port), err
}

// Claimed returns the reply tuples claimed so far, with the rewrite of each
// (back to the client).
func (h *Harness) Claimed() (map[natrwFwNatTuple]Rw, error) {
	out := map[natrwFwNatTuple]Rw{}
	var k natrwFwNatTuple
	var v natrwFwNatRw
	it := h.objs.NatClaimed.Iterate()
	for it.Next(&k, &v) {
		var s, d [4]byte
		binary.LittleEndian.PutUint32(s[:], v.Saddr)
		binary.LittleEndian.PutUint32(d[:], v.Daddr)
		out[k] = Rw{Src: netip.AddrFrom4(s), Dst: netip.AddrFrom4(d), SPort: bits.ReverseBytes16(v.Sport), DPort: bits.ReverseBytes16(v.Dport)}
	}
	return out, it.Err()
}
