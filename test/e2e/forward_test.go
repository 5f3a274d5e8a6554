package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/testutil"
)

// vethPeerReady makes iface in ns fit to be a veth peer of the fast path
// (--forward xdp-veth, docs/forward.md): it sends finished checksums (tx
// off: XDP sees no checksum offload state, a redirected frame would leave
// with the checksum unfinished) and receives frames redirected to its
// peer (veth delivers those only through a NAPI queue, there when the
// receiving end has an XDP program or GRO on).
func vethPeerReady(t *testing.T, ns *testutil.NetNS, iface string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	if out, err := ns.Exec(ctx, "ethtool", "-K", iface, "tx", "off", "gro", "on"); err != nil {
		t.Fatalf("ethtool -K %s tx off gro on in %s: %v\n%s", iface, ns, err, out)
	}
}

// fwdBed is a router namespace r between a client c (link lc, rc0 - xc0,
// 10.200.1.0/24), a server s (ls, rs0 - xs0, 10.200.2.0/24) and a host x
// behind a device xdpfw is not attached to (lx, rx0 - xx0,
// 10.200.3.0/24); IPv6 alike (fd00:200:N::/64). xdpfw runs on rc0 and rs0.
type fwdBed struct {
	r, c, s, x *testutil.NetNS
	lc, ls, lx *link
	f          *fw
}

const fwdRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A FORWARD -i rc0 -p tcp -m tcp --dport 80 -j ACCEPT
-A FORWARD -i rc0 -p udp -m udp --dport 5000 -j ACCEPT
-A FORWARD -i rc0 -p icmp -j ACCEPT
-A FORWARD -i rc0 -p ipv6-icmp -j ACCEPT
COMMIT
`

func newFwdBed(t *testing.T, forward string, loadArgs ...string) *fwdBed {
	t.Helper()
	testutil.RequireRoot(t)
	b := &fwdBed{r: testutil.NewNetNS(t), c: testutil.NewNetNS(t), s: testutil.NewNetNS(t), x: testutil.NewNetNS(t)}
	b.lc = newLink(t, b.r, "rc0", b.c, "xc0", 1)
	b.ls = newLink(t, b.r, "rs0", b.s, "xs0", 2)
	b.lx = newLink(t, b.r, "rx0", b.x, "xx0", 3)
	for _, l := range []*link{b.lc, b.ls, b.lx} {
		if forward == "xdp-veth" {
			vethPeerReady(t, l.cli, l.cliIf)
		}
		ipOut(t, "-n", l.cli.Name, "route", "add", "default", "via", l.srv4)
		ipOut(t, "-n", l.cli.Name, "-6", "route", "add", "default", "via", l.srv6)
	}
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	if out, err := b.r.Exec(ctx, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"); err != nil {
		t.Fatalf("forwarding: %v\n%s", err, out)
	}
	b.f = newFW(t, b.r)
	args := append([]string{"load", "-i", "rc0", "-i", "rs0"}, loadArgs...)
	if forward != "" {
		args = append(args, "--forward", forward)
	}
	b.f.mustRun(append(args, writeRules(t, "router.rules", fwdRules))...)
	return b
}

// fwdStatus is status --json's forwarding part.
type fwdStatus struct {
	Forward struct {
		Mode     string              `json:"mode"`
		Ports    []string            `json:"ports"`
		Counters map[string]counters `json:"counters"`
	} `json:"forward"`
}

func (b *fwdBed) counters(t *testing.T) map[string]counters {
	t.Helper()
	var s fwdStatus
	b.f.decode(&s, "status", "--json")
	return s.Forward.Counters
}

// wantCounts checks that the forwarding counters moved by want from before
// (every reason not named: not at all).
func wantCounts(t *testing.T, what string, before, after map[string]counters, want map[string]uint64) {
	t.Helper()
	for how, a := range after {
		if d := a.Packets - before[how].Packets; d != want[how] {
			t.Errorf("%s: forwarded %s: %d packets, want %d (before %v, after %v)", what, how, d, want[how], before, after)
		}
	}
}

func macOf(t *testing.T, ns *testutil.NetNS, iface string) [6]byte {
	t.Helper()
	var mac [6]byte
	err := ns.Do(func() error {
		i, err := net.InterfaceByName(iface)
		if err == nil {
			copy(mac[:], i.HardwareAddr)
		}
		return err
	})
	if err != nil {
		t.Fatalf("MAC of %s in %s: %v", iface, ns, err)
	}
	return mac
}

// capture reads the frames an interface receives (AF_PACKET).
type capture struct{ fd int }

func newCapture(t *testing.T, ns *testutil.NetNS, iface string) *capture {
	t.Helper()
	proto := int(binary.BigEndian.Uint16(binary.NativeEndian.AppendUint16(nil, unix.ETH_P_ALL))) // htons
	c := &capture{fd: -1}
	err := ns.Do(func() error {
		i, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, proto)
		if err != nil {
			return err
		}
		c.fd = fd
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: i.Index}); err != nil {
			return err
		}
		tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
		return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	})
	if c.fd >= 0 {
		t.Cleanup(func() { unix.Close(c.fd) })
	}
	if err != nil {
		t.Fatalf("capture on %s in %s: %v", iface, ns, err)
	}
	return c
}

// next returns the next frame received (not sent) that match accepts,
// waiting at most arriveTimeout; nil if none came.
func (c *capture) next(match func(p *packet.Packet) bool) []byte {
	buf := make([]byte, 65536)
	for deadline := time.Now().Add(arriveTimeout); time.Now().Before(deadline); {
		n, from, err := unix.Recvfrom(c.fd, buf, 0)
		if err != nil {
			continue // the read timeout: look at the deadline
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		p, err := packet.Decode(buf[:n])
		if err == nil && match(&p) {
			return bytes.Clone(buf[:n])
		}
	}
	return nil
}

// udpTo is a UDP datagram from the client to dst, port 5000, with the
// router's MACs; tag is its payload.
func (b *fwdBed) udpTo(t *testing.T, dst netip.Addr, tag string, ttl uint8) *packet.Packet {
	src := netip.MustParseAddr(b.lc.cli4)
	if dst.Is6() {
		src = netip.MustParseAddr(b.lc.cli6)
	}
	return &packet.Packet{SrcMAC: macOf(t, b.c, "xc0"), DstMAC: macOf(t, b.r, "rc0"), Src: src, Dst: dst,
		Proto: packet.ProtoUDP, SPort: 4000, DPort: 5000, TTL: ttl, Payload: []byte(tag), PadTo60: true}
}

// answer sends, from the server, an answer to udpTo's flow to dst (port
// 5000 back to the client's 4000) and waits for it at the client: once a
// connection has been answered with the addresses it left with, no NAT
// translates it and the fast path may take it (lib/fwd.h fw_fwd_kernel).
func (b *fwdBed) answer(t *testing.T, dst netip.Addr, capC *capture) {
	t.Helper()
	cli := netip.MustParseAddr(b.lc.cli4)
	if dst.Is6() {
		cli = netip.MustParseAddr(b.lc.cli6)
	}
	a := &packet.Packet{SrcMAC: macOf(t, b.s, "xs0"), DstMAC: macOf(t, b.r, "rs0"), Src: dst, Dst: cli,
		Proto: packet.ProtoUDP, SPort: 5000, DPort: 4000, TTL: 64, Payload: []byte("answer"), PadTo60: true}
	sendFrames(t, b.ls, a.Bytes())
	if capC.next(isUDP("answer")) == nil {
		t.Fatalf("the answer from %s did not reach the client", dst)
	}
}

func isUDP(tag string) func(p *packet.Packet) bool {
	return func(p *packet.Packet) bool { return p.Proto == packet.ProtoUDP && string(p.Payload) == tag }
}

// wantForwarded checks a frame the server received for sent: the router's
// MACs, TTL / hop limit one less, valid checksums, no padding.
func (b *fwdBed) wantForwarded(t *testing.T, what string, sent *packet.Packet, got []byte) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: the server received nothing", what)
	}
	p, err := packet.Decode(got)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	want := *sent
	want.SrcMAC, want.DstMAC = macOf(t, b.r, "rs0"), macOf(t, b.s, "xs0")
	want.TTL = sent.TTL - 1
	want.PadTo60 = false
	if w := want.Bytes(); !bytes.Equal(got, w) {
		t.Errorf("%s: the server received\n%x\nwant\n%x", what, got, w)
	}
	if p.Src.Is4() {
		if packet.Checksum(got[14:34]) != 0 {
			t.Errorf("%s: IPv4 header checksum invalid: %x", what, got[14:34])
		}
		if packet.L4Checksum(p.Src, p.Dst, packet.ProtoUDP, got[34:]) != 0 {
			t.Errorf("%s: UDP checksum invalid", what)
		}
	} else if packet.L4Checksum(p.Src, p.Dst, packet.ProtoUDP, got[54:]) != 0 {
		t.Errorf("%s: UDP checksum invalid", what)
	}
}

// TestForwardFastPath: real TCP, UDP and ICMP over IPv4 and IPv6 through a
// router running xdpfw on both its interfaces, forwarded in XDP (the
// fast-path counter shows it), the frames the server gets exactly those
// the kernel forwards with --forward stack; the FORWARD rules count the
// same either way.
func TestForwardFastPath(t *testing.T) {
	b := newFwdBed(t, "xdp-veth")
	if s := b.counters(t); len(s) == 0 {
		t.Fatalf("status shows no forwarding counters")
	}
	var st fwdStatus
	b.f.decode(&st, "status", "--json")
	if st.Forward.Mode != "xdp-veth" || len(st.Forward.Ports) != 2 {
		t.Fatalf("status: forwarding %+v, want mode xdp-veth between rc0 and rs0", st.Forward)
	}

	before, after := b.realTraffic(t, "fast path")
	for how, c := range after {
		if d := c.Packets - before[how].Packets; how != "xdp" && how != "kernel-ct" && d > 0 && (how != "no-neighbour" || d > 2) {
			t.Errorf("forwarded %s: %d packets, want none (but a first packet per family without a neighbour, and those before an answer) (%v)", how, d, after)
		}
	}

	// The same frames through the fast path and through the kernel: what
	// the server receives is the same, byte for byte.
	// The flow is answered first (its first datagram and the answer go by
	// the kernel, or the fast path once answered): the measured datagram
	// is ESTABLISHED.
	estRule := "-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"
	newUDPSink(t, b.c, 4000)
	capC := newCapture(t, b.c, "xc0")
	frames := map[string][]byte{}
	for _, mode := range []string{"xdp-veth", "xdp", "stack"} {
		if mode != "xdp-veth" {
			b.f.mustRun("apply", "--forward", mode, writeRules(t, "router.rules", fwdRules))
		}
		// by the fast path; --forward xdp leaves veth devices to the kernel
		how := map[string]string{"xdp-veth": "xdp", "xdp": "not-attached", "stack": "stack"}[mode]
		for _, dst := range []string{b.ls.cli4, b.ls.cli6} {
			what := fmt.Sprintf("UDP to %s, --forward %s", dst, mode)
			sent := b.udpTo(t, netip.MustParseAddr(dst), "fwd", 64)
			capS := newCapture(t, b.s, "xs0")
			first := b.udpTo(t, netip.MustParseAddr(dst), "first-"+mode, 64)
			sendFrames(t, b.lc, first.Bytes())
			if capS.next(isUDP("first-"+mode)) == nil {
				t.Fatalf("%s: the first datagram did not reach the server", what)
			}
			b.answer(t, netip.MustParseAddr(dst), capC)
			c0, r0 := b.counters(t), b.f.list().rule(t, estRule).Counters.Packets
			sendFrames(t, b.lc, sent.Bytes())
			got := capS.next(isUDP("fwd"))
			b.wantForwarded(t, what, sent, got)
			frames[dst+mode] = got
			wantCounts(t, what, c0, b.counters(t), map[string]uint64{how: 1})
			if r := b.f.list().rule(t, estRule).Counters.Packets; r != r0+1 {
				t.Errorf("%s: the ESTABLISHED rule counted %d packets, want 1", what, r-r0)
			}
		}
	}
	for _, dst := range []string{b.ls.cli4, b.ls.cli6} {
		if !bytes.Equal(frames[dst+"xdp-veth"], frames[dst+"stack"]) {
			t.Errorf("to %s: the fast path sent\n%x\nthe kernel\n%x", dst, frames[dst+"xdp-veth"], frames[dst+"stack"])
		}
	}
	var st2 fwdStatus
	b.f.decode(&st2, "status", "--json")
	if st2.Forward.Mode != "stack" {
		t.Errorf("status after apply --forward stack: mode %q", st2.Forward.Mode)
	}
	// a plain apply keeps the mode in force
	b.f.mustRun("apply", writeRules(t, "router.rules", fwdRules))
	b.f.decode(&st2, "status", "--json")
	if st2.Forward.Mode != "stack" {
		t.Errorf("status after a plain apply: mode %q, want stack kept", st2.Forward.Mode)
	}
}

// TestForwardFallbacks: what the fast path cannot send as the kernel would
// goes to the kernel unchanged, counted by reason, and the kernel does
// what it does: ICMP time exceeded for TTL 1, frag-needed / packet too big
// for a packet over the egress MTU, neighbour resolution (the next packet
// takes the fast path), a device xdpfw is not attached to, and nothing
// forwarded at all while the host does not forward.
func TestForwardFallbacks(t *testing.T) {
	b := newFwdBed(t, "xdp-veth")
	newUDPSink(t, b.s, 5000) // no port unreachable coming back
	newUDPSink(t, b.c, 4000) // nor for the answers
	newUDPSink(t, b.x, 5000)
	srv4, srv6 := netip.MustParseAddr(b.ls.cli4), netip.MustParseAddr(b.ls.cli6)
	capC := newCapture(t, b.c, "xc0")
	capS := newCapture(t, b.s, "xs0")

	// no neighbour: the kernel resolves it and forwards; then the fast path
	for _, dst := range []netip.Addr{srv4, srv6} {
		ipOut(t, "-n", b.r.Name, "neigh", "flush", "dev", "rs0")
		c0 := b.counters(t)
		sent := b.udpTo(t, dst, "first", 64)
		sendFrames(t, b.lc, sent.Bytes())
		b.wantForwarded(t, "first packet to "+dst.String(), sent, capS.next(isUDP("first")))
		wantCounts(t, "first packet to "+dst.String(), c0, b.counters(t), map[string]uint64{"no-neighbour": 1})
		b.answer(t, dst, capC)
		c0 = b.counters(t)
		sent = b.udpTo(t, dst, "second", 64)
		sendFrames(t, b.lc, sent.Bytes())
		b.wantForwarded(t, "second packet to "+dst.String(), sent, capS.next(isUDP("second")))
		wantCounts(t, "second packet to "+dst.String(), c0, b.counters(t), map[string]uint64{"xdp": 1})
	}

	// TTL / hop limit 1: the kernel's time exceeded comes back
	for _, dst := range []netip.Addr{srv4, srv6} {
		c0 := b.counters(t)
		sendFrames(t, b.lc, b.udpTo(t, dst, "ttl1", 1).Bytes())
		icmp := capC.next(func(p *packet.Packet) bool {
			return (p.Proto == packet.ProtoICMP && p.ICMPType == 11) || (p.Proto == packet.ProtoICMPv6 && p.ICMPType == 3)
		})
		if icmp == nil {
			t.Errorf("TTL 1 to %s: no time exceeded came back", dst)
		}
		wantCounts(t, "TTL 1 to "+dst.String(), c0, b.counters(t), map[string]uint64{"ttl": 1})
	}

	// over the egress MTU: frag-needed (DF) / packet too big
	ipOut(t, "-n", b.r.Name, "link", "set", "rs0", "mtu", "1280")
	for _, dst := range []netip.Addr{srv4, srv6} {
		c0 := b.counters(t)
		p := b.udpTo(t, dst, "big", 64)
		p.Payload = bytes.Repeat([]byte{'b'}, 1300)
		f := p.Bytes()
		if dst.Is4() { // DF
			f[20] |= 0x40
			f[24], f[25] = 0, 0
			binary.BigEndian.PutUint16(f[24:], packet.Checksum(f[14:34]))
		}
		sendFrames(t, b.lc, f)
		icmp := capC.next(func(p *packet.Packet) bool {
			return (p.Proto == packet.ProtoICMP && p.ICMPType == 3 && p.ICMPCode == 4) || (p.Proto == packet.ProtoICMPv6 && p.ICMPType == 2)
		})
		if icmp == nil {
			t.Errorf("%d bytes to %s over MTU 1280: no frag-needed / packet too big came back", len(f), dst)
		}
		wantCounts(t, "over the MTU to "+dst.String(), c0, b.counters(t), map[string]uint64{"mtu": 1})
	}
	ipOut(t, "-n", b.r.Name, "link", "set", "rs0", "mtu", "1500")

	// back out by the device it came in by (to the client's own address,
	// whose neighbour the router knows by now): the kernel forwards it,
	// never the fast path, whose egress test sets up the redirect only
	// for another device (lib/fwd.h fw_fwd_why)
	for _, dst := range []string{b.lc.cli4, b.lc.cli6} {
		c0 := b.counters(t)
		sendFrames(t, b.lc, b.udpTo(t, netip.MustParseAddr(dst), "hairpin", 64).Bytes())
		if f := capC.next(isUDP("hairpin")); f == nil {
			t.Errorf("UDP to %s back by rc0: not forwarded", dst)
		} else if p, err := packet.Decode(f); err != nil || p.TTL != 63 {
			t.Errorf("UDP to %s back by rc0: TTL %d (%v), want 63 (forwarded once)", dst, p.TTL, err)
		}
		wantCounts(t, "back by rc0 to "+dst, c0, b.counters(t), map[string]uint64{"hairpin": 1})
	}

	// a device xdpfw is not attached to: the kernel forwards (the first
	// packet resolves the neighbour)
	capX := newCapture(t, b.x, "xx0")
	for _, dst := range []string{b.lx.cli4, b.lx.cli6} {
		for i, tag := range []string{"other0", "other1"} {
			c0 := b.counters(t)
			sent := b.udpTo(t, netip.MustParseAddr(dst), tag, 64)
			sendFrames(t, b.lc, sent.Bytes())
			if capX.next(isUDP(tag)) == nil {
				t.Errorf("UDP to %s by rx0: not forwarded", dst)
			}
			if i == 1 {
				wantCounts(t, "by rx0 to "+dst, c0, b.counters(t), map[string]uint64{"not-attached": 1})
			}
		}
	}

	// ip_forward off: INPUT, not FORWARD; nothing forwarded, nothing counted
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	if out, err := b.r.Exec(ctx, "sysctl", "-qw", "net.ipv4.ip_forward=0"); err != nil {
		t.Fatalf("ip_forward=0: %v\n%s", err, out)
	}
	c0 := b.counters(t)
	in0 := b.f.list().policy(t, "INPUT", "ipv4").Counters.Packets
	sendFrames(t, b.lc, b.udpTo(t, srv4, "off", 64).Bytes())
	if !poll(t.Context(), arriveTimeout, func() bool { return b.f.list().policy(t, "INPUT", "ipv4").Counters.Packets > in0 }) {
		t.Errorf("ip_forward=0: the packet was not judged in INPUT")
	}
	wantCounts(t, "ip_forward=0", c0, b.counters(t), nil)
}

// TestForwardGeneric: attached in generic mode to every device, the fast
// path forwards through the stack's transmit path (dev_queue_xmit): veth
// devices take part in the default mode, with no setup of their peers,
// checksum offload and all.
func TestForwardGeneric(t *testing.T) {
	b := newFwdBed(t, "", "--mode", "generic")
	var st fwdStatus
	b.f.decode(&st, "status", "--json")
	if st.Forward.Mode != "xdp" || len(st.Forward.Ports) != 2 {
		t.Fatalf("status: forwarding %+v, want mode xdp between rc0 and rs0", st.Forward)
	}
	b.realTraffic(t, "generic")
}

// realTraffic runs TCP, ping and UDP (20 datagrams), IPv4 and IPv6, from
// the client to the server, requires it all to arrive and most of it to
// be forwarded in XDP, and returns the forwarding counters before and
// after.
func (b *fwdBed) realTraffic(t *testing.T, what string) (before, after map[string]counters) {
	t.Helper()
	serveTCP(t, b.s, 80)
	sink := newUDPSink(t, b.s, 5000)
	before = b.counters(t)
	checkTCP(t, what,
		tcpProbe{from: b.c, addr: hostPort(b.ls.cli4, 80), ok: true},
		tcpProbe{from: b.c, addr: hostPort(b.ls.cli6, 80), ok: true})
	checkPing(t, what, b.c, b.ls.cli4, true)
	checkPing(t, what, b.c, b.ls.cli6, true)
	udp := newUDPSender(t, b.c, "")
	udp.send(t, hostPort(b.ls.cli4, 5000), "v4", 0, 20)
	udp.send(t, hostPort(b.ls.cli6, 5000), "v6", 0, 20)
	if sink.wait(t, "v4", 20) != 20 || sink.wait(t, "v6", 20) != 20 {
		t.Errorf("%s: UDP through the router: %d and %d of 20 datagrams arrived", what, sink.count("v4"), sink.count("v6"))
	}
	after = b.counters(t)
	// ping: 3 requests and 3 replies per family, the first request by
	// the kernel (no answer yet: it may be one the kernel translates);
	// TCP: after the first SYN of each family at least the SYN-ACK and
	// the ACK; the UDP datagrams, never answered, all by the kernel
	if d := after["xdp"].Packets - before["xdp"].Packets; d < 10+4 {
		t.Errorf("%s: TCP and ping through the router: %d packets forwarded in XDP, want at least %d (%v)", what, d, 10+4, after)
	}
	if d := after["kernel-ct"].Packets - before["kernel-ct"].Packets; d < 40 || d > 40+4 {
		t.Errorf("%s: %d packets forwarded by the kernel before an answer, want the 40 unanswered UDP datagrams and "+
			"at most the first packet of each TCP and ping flow (%v)", what, d, after)
	}
	return before, after
}
