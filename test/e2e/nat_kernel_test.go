package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os/exec"
	"testing"

	"github.com/xdpfw/xdpfw/internal/nat"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/testutil"
)

// TestNATRewriteLikeKernel holds the data plane's rewrite (bpf/lib/nat.h,
// run through internal/nat's harness) to the kernel's NAT: the first
// packets of TCP, UDP (with a checksum and without) and ping connections
// cross a router whose kernel translates them (MASQUERADE out of rb, port
// forwards with DNAT); for each frame the server's side receives, the
// harness rewrites the frame the client sent to the tuple the kernel chose,
// the router's TTL decrement is applied as ip_decrease_ttl does, and the
// IPv4 header and L4 segment must be the kernel's byte for byte (a
// checksum may be the other form of zero, which verifies as well).
func TestNATRewriteLikeKernel(t *testing.T) {
	h := natHarness(t)
	x := newRouter(t) // a: the LAN (ra, 10.200.1.0/24), b: the WAN (rb, 10.200.2.0/24)
	kernelNAT(t, x.r, "-A", "PREROUTING", "-d", x.la.srv4, "-p", "tcp", "--dport", "80", "-j", "DNAT", "--to-destination", x.lb.cli4+":8080")
	kernelNAT(t, x.r, "-A", "PREROUTING", "-d", x.la.srv4, "-p", "udp", "--dport", "53", "-j", "DNAT", "--to-destination", x.lb.cli4+":5353")
	kernelNAT(t, x.r, "-A", "POSTROUTING", "-o", "rb", "-j", "MASQUERADE")
	capB := newCapture(t, x.b, "xb")
	cli, wan, lan := netip.MustParseAddr(x.la.cli4), netip.MustParseAddr(x.lb.cli4), netip.MustParseAddr(x.la.srv4)
	payload := func(i int) []byte { return []byte(fmt.Sprintf("nat flow %d, some bytes to sum", i)) }
	flows := []*packet.Packet{
		{Src: cli, Dst: wan, Proto: packet.ProtoTCP, SPort: 40001, DPort: 9000, TCPFlags: packet.TCPSyn},
		{Src: cli, Dst: wan, Proto: packet.ProtoUDP, SPort: 40002, DPort: 9001},
		{Src: cli, Dst: wan, Proto: packet.ProtoUDP, SPort: 40003, DPort: 9002}, // sent without a checksum
		{Src: cli, Dst: wan, Proto: packet.ProtoICMP, ICMPType: 8},
		{Src: cli, Dst: lan, Proto: packet.ProtoTCP, SPort: 40004, DPort: 80, TCPFlags: packet.TCPSyn}, // DNAT + MASQUERADE
		{Src: cli, Dst: lan, Proto: packet.ProtoUDP, SPort: 40005, DPort: 53},
		{Src: cli, Dst: wan, Proto: packet.ProtoTCP, SPort: 40006, DPort: 443, TCPFlags: packet.TCPSyn, TCPOptions: []byte{2, 4, 5, 0xb4}},
	}
	ra, xa := macOf(t, x.r, "ra"), macOf(t, x.a, "xa")
	for i, p := range flows {
		p.SrcMAC, p.DstMAC, p.TTL, p.Payload = xa, ra, 64, payload(i)
		f := p.Bytes()
		if i == 2 {
			f[14+20+6], f[14+20+7] = 0, 0
		}
		sendFrames(t, x.la, f)
		tag := payload(i)
		got := capB.next(func(q *packet.Packet) bool { return bytes.Equal(q.Payload, tag) })
		if got == nil {
			t.Fatalf("flow %d (%s): the kernel did not forward it to b", i, p)
		}
		q, _ := packet.Decode(got)
		rw := nat.Rw{Src: q.Src, Dst: q.Dst, SPort: q.SPort, DPort: q.DPort}
		ipOff := 14
		if q.Proto == packet.ProtoICMP { // the echo id, kept or not, is the request's source "port"
			rw.SPort = binary.BigEndian.Uint16(got[ipOff+20+4:])
		}
		want, ok, err := h.Rewrite(f, rw)
		if err != nil || !ok {
			t.Fatalf("flow %d: the harness did not rewrite it (%v)", i, err)
		}
		decreaseTTL(want[ipOff:])
		n := int(binary.BigEndian.Uint16(got[ipOff+2:])) // the IP datagram, not the Ethernet padding
		g, w := got[ipOff:ipOff+n], want[ipOff:ipOff+n]
		if d := diffChecksumsAside(g, w); d != "" {
			t.Errorf("flow %d (%s) translated to %+v:\nkernel  %x\nxdpfw   %x\n%s", i, p, rw, g, w, d)
		}
		t.Logf("flow %d: %s:%d > %s:%d became %s", i, p.Src, p.SPort, p.Dst, p.DPort, q)
	}
}

// decreaseTTL does to the IPv4 header ip what the kernel's
// ip_decrease_ttl does when it forwards (an incremental checksum update,
// in the host's order, as the kernel computes it).
func decreaseTTL(ip []byte) {
	c := uint32(binary.LittleEndian.Uint16(ip[10:]))
	c += uint32(binary.LittleEndian.Uint16([]byte{1, 0})) // htons(0x0100)
	if c >= 0xffff {
		c++
	}
	binary.LittleEndian.PutUint16(ip[10:], uint16(c))
	ip[8]--
}

// diffChecksumsAside says how two IPv4 datagrams differ, taking the two
// forms of a zero checksum (0x0000, 0xffff) of the IP header and of the
// TCP, UDP (not 0: none) or ICMP segment as equal; "" when they do not.
func diffChecksumsAside(g, w []byte) string {
	if len(g) != len(w) {
		return fmt.Sprintf("lengths %d and %d", len(g), len(w))
	}
	g, w = bytes.Clone(g), bytes.Clone(w)
	hl := int(g[0]&0xf) * 4
	at := []int{10}
	switch g[9] {
	case 6:
		at = append(at, hl+16)
	case 17:
		at = append(at, hl+6)
	case 1:
		at = append(at, hl+2)
	}
	for _, o := range at {
		a, b := binary.BigEndian.Uint16(g[o:]), binary.BigEndian.Uint16(w[o:])
		if a != b && a^b == 0xffff && (a == 0 || b == 0) && !(g[9] == 17 && o == hl+6) {
			copy(w[o:o+2], g[o:o+2])
		}
	}
	for i := range g {
		if g[i] != w[i] {
			return fmt.Sprintf("first difference at byte %d of the datagram", i)
		}
	}
	return ""
}

// TestNATICMPErrorLikeKernel holds the data plane's rewrite of ICMP
// errors (lib/nat.h fw_nat_rewrite4_icmp_error) to the kernel's: b answers
// translated packets with ICMP errors (a closed UDP port, a TCP SYN and a
// ping it rejects, a closed port behind a DNAT port forward); the router's
// kernel translates each error back for the client, outer header and
// quoted packet. The harness, given the error as b sent it (captured on
// rb) and the addresses and ports the kernel gave it, must produce the
// error the client received, byte for byte (plus the router's TTL
// decrement), checksums of the quoted packet and of the ICMP message
// included.
func TestNATICMPErrorLikeKernel(t *testing.T) {
	h := natHarness(t)
	x := newRouter(t)
	kernelNAT(t, x.r, "-A", "PREROUTING", "-d", x.la.srv4, "-p", "udp", "--dport", "53", "-j", "DNAT", "--to-destination", x.lb.cli4+":5353")
	kernelNAT(t, x.r, "-A", "POSTROUTING", "-o", "rb", "-j", "MASQUERADE")
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	for _, c := range [][]string{
		{"sysctl", "-qw", "net.ipv4.icmp_ratelimit=0"},
		{"iptables", "-A", "INPUT", "-p", "tcp", "--dport", "9100", "-j", "REJECT", "--reject-with", "icmp-host-prohibited"},
		{"iptables", "-A", "INPUT", "-p", "icmp", "--icmp-type", "echo-request", "-j", "REJECT", "--reject-with", "icmp-net-unreachable"},
	} {
		if out, err := x.b.Exec(ctx, c[0], c[1:]...); err != nil {
			t.Fatalf("%s in %s: %v\n%s", c, x.b, err, out)
		}
	}
	capR := newCapture(t, x.r, "rb") // the errors as b sends them
	capA := newCapture(t, x.a, "xa") // and as the client receives them
	cli, wan, lan := netip.MustParseAddr(x.la.cli4), netip.MustParseAddr(x.lb.cli4), netip.MustParseAddr(x.la.srv4)
	flows := []*packet.Packet{
		{Src: cli, Dst: wan, Proto: packet.ProtoUDP, SPort: 41001, DPort: 9999}, // closed: port unreachable
		{Src: cli, Dst: wan, Proto: packet.ProtoTCP, SPort: 41002, DPort: 9100, TCPFlags: packet.TCPSyn},
		{Src: cli, Dst: wan, Proto: packet.ProtoICMP, ICMPType: 8},
		{Src: cli, Dst: lan, Proto: packet.ProtoUDP, SPort: 41003, DPort: 53},   // DNAT to b:5353, closed
		{Src: cli, Dst: wan, Proto: packet.ProtoUDP, SPort: 41004, DPort: 9998}, // sent without a checksum
	}
	ra, xa := macOf(t, x.r, "ra"), macOf(t, x.a, "xa")
	isErr := func(q *packet.Packet) bool { return q.Proto == packet.ProtoICMP && q.ICMPType == 3 }
	for i, p := range flows {
		p.SrcMAC, p.DstMAC, p.TTL, p.Payload = xa, ra, 64, []byte(fmt.Sprintf("icmp error flow %d", i))
		f := p.Bytes()
		if i == 4 {
			f[14+20+6], f[14+20+7] = 0, 0
		}
		sendFrames(t, x.la, f)
		sent := capR.next(isErr)
		got := capA.next(isErr)
		if sent == nil || got == nil {
			t.Fatalf("flow %d (%s): no ICMP error (from b on rb: %v, at the client: %v)", i, p, sent != nil, got != nil)
		}
		const ip = 14
		qi := ip + int(got[ip]&0xf)*4 + 8 // the quoted packet, in the error the client got
		ql4 := qi + int(got[qi]&0xf)*4
		outer := nat.Rw{Src: netip.AddrFrom4([4]byte(got[ip+12 : ip+16])), Dst: netip.AddrFrom4([4]byte(got[ip+16 : ip+20]))}
		inner := nat.Rw{Src: netip.AddrFrom4([4]byte(got[qi+12 : qi+16])), Dst: netip.AddrFrom4([4]byte(got[qi+16 : qi+20])),
			SPort: binary.BigEndian.Uint16(got[ql4:]), DPort: binary.BigEndian.Uint16(got[ql4+2:])}
		if got[qi+9] == packet.ProtoICMP {
			inner.SPort = binary.BigEndian.Uint16(got[ql4+4:]) // the quoted echo request's id
			inner.DPort = inner.SPort
		}
		want, ok, err := h.RewriteError(sent, outer, inner)
		if err != nil || !ok {
			t.Fatalf("flow %d: the harness did not rewrite the error (%v)\n%x", i, err, sent)
		}
		decreaseTTL(want[ip:])
		n := int(binary.BigEndian.Uint16(got[ip+2:]))
		if d := diffChecksumsAside(got[ip:ip+n], want[ip:ip+n]); d != "" {
			t.Errorf("flow %d (%s): the error translated to outer %+v, inner %+v:\nkernel  %x\nxdpfw   %x\n%s", i, p, outer, inner, got[ip:ip+n], want[ip:ip+n], d)
		}
		q, _ := packet.Decode(got)
		t.Logf("flow %d: %s: the client got %s quoting %s:%d > %s:%d", i, p, q, inner.Src, inner.SPort, inner.Dst, inner.DPort)
	}
}

// natHarness is the data plane's NAT rewrite run by internal/nat's
// harness, for a test that holds it to the kernel's iptables NAT (skipped
// without iptables).
func natHarness(t *testing.T) *nat.Harness {
	t.Helper()
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("iptables is not installed: no kernel nat table")
	}
	h, err := nat.NewHarness()
	if err != nil {
		t.Fatalf("%+v", err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// TestNATBothWaysLikeKernel holds the data plane's bindings (lib/nat.h
// fw_nat_bind4, fw_nat_key4, fw_nat_pre, fw_nat_post) to the kernel's NAT
// over whole exchanges: for TCP, UDP and ping connections through a router
// that masquerades and forwards ports, the first packet is bound to the
// tuple the kernel gave it; then a second packet from the client and b's
// answer are each translated by one lookup of the tuple they arrive with,
// and must come out as the kernel forwarded them, byte for byte (plus the
// TTL decrement): the answer's destination back to the client, its source
// back to the address the client sent to.
func TestNATBothWaysLikeKernel(t *testing.T) {
	h := natHarness(t)
	x := newRouter(t)
	kernelNAT(t, x.r, "-A", "PREROUTING", "-d", x.la.srv4, "-p", "tcp", "--dport", "80", "-j", "DNAT", "--to-destination", x.lb.cli4+":8080")
	kernelNAT(t, x.r, "-A", "PREROUTING", "-d", x.la.srv4, "-p", "udp", "--dport", "53", "-j", "DNAT", "--to-destination", x.lb.cli4+":5353")
	kernelNAT(t, x.r, "-A", "POSTROUTING", "-o", "rb", "-j", "MASQUERADE")
	// b's own stack stays silent (a RST would end the TCP connection
	// before the answer crafted here): the answers are the test's
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	for _, proto := range []string{"tcp", "udp"} {
		if out, err := x.b.Exec(ctx, "iptables", "-A", "INPUT", "-p", proto, "-j", "DROP"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	capA, capB := newCapture(t, x.a, "xa"), newCapture(t, x.b, "xb")
	cli, wan, lan := netip.MustParseAddr(x.la.cli4), netip.MustParseAddr(x.lb.cli4), netip.MustParseAddr(x.la.srv4)
	flows := []*packet.Packet{
		{Src: cli, Dst: wan, Proto: packet.ProtoUDP, SPort: 42001, DPort: 9001},
		{Src: cli, Dst: wan, Proto: packet.ProtoTCP, SPort: 42002, DPort: 9000, TCPFlags: packet.TCPSyn},
		{Src: cli, Dst: wan, Proto: packet.ProtoICMP, ICMPType: 8},
		{Src: cli, Dst: lan, Proto: packet.ProtoTCP, SPort: 42003, DPort: 80, TCPFlags: packet.TCPSyn}, // DNAT + MASQUERADE
		{Src: cli, Dst: lan, Proto: packet.ProtoUDP, SPort: 42004, DPort: 53},
	}
	ra, xa := macOf(t, x.r, "ra"), macOf(t, x.a, "xa")
	rb, xb := macOf(t, x.r, "rb"), macOf(t, x.b, "xb")
	const ip = 14
	// cross sends f from link l and returns the frame the kernel
	// forwarded, as c captured it, having checked it against the harness's
	// rewrite of f by do (which may look at the kernel's)
	cross := func(what string, l *link, c *capture, f []byte, do func(f, got []byte) ([]byte, bool, error)) []byte {
		t.Helper()
		q, _ := packet.Decode(f)
		tag := bytes.Clone(q.Payload)
		sendFrames(t, l, f)
		got := c.next(func(d *packet.Packet) bool { return bytes.Equal(d.Payload, tag) })
		if got == nil {
			ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
			defer cancel()
			ct, _ := x.r.Exec(ctx, "cat", "/proc/net/nf_conntrack")
			t.Fatalf("%s: the kernel did not forward it\n%x\nthe router's conntrack:\n%s", what, f, ct)
		}
		want, ok, err := do(f, got)
		if err != nil || !ok {
			t.Fatalf("%s: the harness did not translate it (%v)", what, err)
		}
		decreaseTTL(want[ip:])
		n := int(binary.BigEndian.Uint16(got[ip+2:]))
		if d := diffChecksumsAside(got[ip:ip+n], want[ip:ip+n]); d != "" {
			t.Fatalf("%s:\nkernel  %x\nxdpfw   %x\n%s", what, got[ip:ip+n], want[ip:ip+n], d)
		}
		return got
	}
	apply := func(f, _ []byte) ([]byte, bool, error) { return h.Apply(f) }
	tuple := func(f []byte) nat.Rw {
		q, _ := packet.Decode(f)
		rw := nat.Rw{Src: q.Src, Dst: q.Dst, SPort: q.SPort, DPort: q.DPort}
		if q.Proto == packet.ProtoICMP {
			id := binary.BigEndian.Uint16(f[ip+20+4:])
			rw.SPort, rw.DPort = id, id
		}
		return rw
	}
	for i, p := range flows {
		p.SrcMAC, p.DstMAC, p.TTL = xa, ra, 64
		p.Payload = []byte(fmt.Sprintf("flow %d first", i))
		first := p.Bytes()
		if p.Proto == packet.ProtoICMP {
			setEchoID(first, 4242)
		}
		// bound to the tuple the kernel gave it
		cross(fmt.Sprintf("flow %d, first packet", i), x.la, capB, first,
			func(f, got []byte) ([]byte, bool, error) { return h.Bind(f, tuple(got)) })
		// a second packet the same way (a TCP SYN again: an ACK before
		// the answer would be INVALID to the kernel's conntrack), by its binding
		p.Payload = []byte(fmt.Sprintf("flow %d second", i))
		second := p.Bytes()
		if p.Proto == packet.ProtoICMP {
			setEchoID(second, 4242)
		}
		seen := cross(fmt.Sprintf("flow %d, second packet", i), x.la, capB, second, apply)
		// b's answer, to what it saw
		q, _ := packet.Decode(seen)
		ans := &packet.Packet{SrcMAC: xb, DstMAC: rb, Src: q.Dst, Dst: q.Src, Proto: q.Proto, SPort: q.DPort, DPort: q.SPort,
			TCPFlags: packet.TCPSyn | packet.TCPAck, TTL: 64, Payload: []byte(fmt.Sprintf("flow %d answer", i))}
		if q.Proto == packet.ProtoICMP {
			ans.ICMPType = 0
		}
		af := ans.Bytes()
		switch q.Proto {
		case packet.ProtoICMP:
			setEchoID(af, binary.BigEndian.Uint16(seen[ip+20+4:]))
		case packet.ProtoTCP: // a SYN-ACK acknowledges the SYN and its data (else conntrack finds it INVALID)
			seg := af[ip+20:]
			binary.BigEndian.PutUint32(seg[8:], packet.TCPSeq+1+uint32(len(p.Payload)))
			seg[16], seg[17] = 0, 0
			binary.BigEndian.PutUint16(seg[16:], packet.L4Checksum(ans.Src, ans.Dst, packet.ProtoTCP, seg))
		}
		back := cross(fmt.Sprintf("flow %d, the answer", i), x.lb, capA, af, apply)
		a, _ := packet.Decode(back)
		t.Logf("flow %d: %s, answered as %s", i, p, a)
	}
}
