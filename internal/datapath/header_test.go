package datapath_test

import (
	"net/netip"
	"testing"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
)

// TestHeaderMatches runs crafted frames through the program against one
// rule each (-m iprange, length, ttl, hl, dscp, tos, ecn), at the edges
// the kernel's modules define, and requires the reference matcher to say
// the same.
func TestHeaderMatches(t *testing.T) {
	f := newFixture(t)
	mod := func(p *packet.Packet, fn func(*packet.Packet)) *packet.Packet { fn(p); return p }
	udp4 := func(fn func(*packet.Packet)) *packet.Packet {
		return mod(v4pkt(packet.ProtoUDP, "10.0.0.7", "10.9.9.9", 1000, 53), fn)
	}
	udp6 := func(fn func(*packet.Packet)) *packet.Packet {
		p := v4pkt(packet.ProtoUDP, "10.0.0.7", "10.9.9.9", 1000, 53)
		p.Src, p.Dst = netip.MustParseAddr("2001:db8::7"), netip.MustParseAddr("2001:db8::99")
		return mod(p, fn)
	}
	tcp4 := func(flags uint8, fn func(*packet.Packet)) *packet.Packet {
		return mod(v4pkt(packet.ProtoTCP, "10.0.0.7", "10.9.9.9", 1000, 80), func(p *packet.Packet) { p.TCPFlags = flags; fn(p) })
	}
	none := func(*packet.Packet) {}
	ttl := func(v uint8) func(*packet.Packet) { return func(p *packet.Packet) { p.TTL = v } }
	tos := func(v uint8) func(*packet.Packet) { return func(p *packet.Packet) { p.TOS = v } }
	src := func(a string) func(*packet.Packet) { return func(p *packet.Packet) { p.Src = netip.MustParseAddr(a) } }
	dst := func(a string) func(*packet.Packet) { return func(p *packet.Packet) { p.Dst = netip.MustParseAddr(a) } }
	opts := func(b ...byte) func(*packet.Packet) { return func(p *packet.Packet) { p.TCPOptions = b } }
	// rth gives the packet a routing header of type typ, segments left
	// segs, n bytes; behind a hop-by-hop header when hop is 1.
	rth := func(hop int, typ, segs uint8, n int) func(*packet.Packet) {
		return func(p *packet.Packet) {
			if hop == 1 {
				p.IPv6Ext = append(p.IPv6Ext, packet.ExtHdr{Type: 0, Len: 8})
			}
			p.IPv6Ext = append(p.IPv6Ext, packet.ExtHdr{Type: 43, Len: n, Routing: []byte{typ, segs}})
		}
	}
	cases := []struct {
		name  string
		rule  string
		pkt   *packet.Packet
		match bool
	}{
		// -m length: IPv4's total length (the UDP datagram with 7 bytes: 35)
		{"length v4", "-m length --length 35", udp4(none), true},
		{"length v4 one more", "-m length --length 36:100", udp4(none), false},
		{"length v4 one less", "-m length --length 0:34", udp4(none), false},
		{"length v4 padded frame: the padding is no length", "-m length --length 35", udp4(func(p *packet.Packet) { p.PadTo60 = true }), true},
		{"length v4 negated", "-m length ! --length 35", udp4(none), false},
		{"length v4 negated other", "-m length ! --length 36", udp4(none), true},
		// IPv6: the payload length + 40 (the header), extension headers included
		{"length v6 counts the header", "-m length --length 55", udp6(none), true},
		{"length v6 not the payload alone", "-m length --length 15", udp6(none), false},
		{"length v6 with an extension header", "-m length --length 63", udp6(func(p *packet.Packet) { p.IPv6Ext = []packet.ExtHdr{{Type: 60, Len: 8}} }), true},
		{"length reversed never matches", "-m length --length 100:10", udp4(none), false},
		// -m ttl / -m hl
		{"ttl eq", "-m ttl --ttl-eq 64", udp4(ttl(64)), true},
		{"ttl eq other", "-m ttl --ttl-eq 64", udp4(ttl(63)), false},
		{"ttl ne", "-m ttl ! --ttl-eq 64", udp4(ttl(63)), true},
		{"ttl ne same", "-m ttl ! --ttl-eq 64", udp4(ttl(64)), false},
		{"ttl lt below", "-m ttl --ttl-lt 64", udp4(ttl(63)), true},
		{"ttl lt equal", "-m ttl --ttl-lt 64", udp4(ttl(64)), false},
		{"ttl gt above", "-m ttl --ttl-gt 64", udp4(ttl(65)), true},
		{"ttl gt equal", "-m ttl --ttl-gt 64", udp4(ttl(64)), false},
		{"ttl gt 254", "-m ttl --ttl-gt 254", udp4(ttl(255)), true},
		{"ttl lt 1 (TTL 1)", "-m ttl --ttl-lt 1", udp4(ttl(1)), false},
		{"ttl gt 255 never", "-m ttl --ttl-gt 255", udp4(ttl(255)), false},
		{"ttl rule is IPv4 only", "-m ttl --ttl-gt 0", udp6(ttl(64)), false},
		{"hl eq", "-m hl --hl-eq 1", udp6(ttl(1)), true},
		{"hl lt", "-m hl --hl-lt 2", udp6(ttl(2)), false},
		{"hl gt", "-m hl --hl-gt 254", udp6(ttl(255)), true},
		{"hl ne", "-m hl ! --hl-eq 255", udp6(ttl(255)), false},
		{"hl rule is IPv6 only", "-m hl --hl-gt 0", udp4(ttl(64)), false},
		// -m dscp: the top six bits of the TOS / traffic class byte
		{"dscp EF", "-m dscp --dscp 46", udp4(tos(0xb8)), true},
		{"dscp EF with ECN bits", "-m dscp --dscp 46", udp4(tos(0xbb)), true},
		{"dscp other", "-m dscp --dscp 46", udp4(tos(0xb4)), false},
		{"dscp EF v6 (traffic class across two header bytes)", "-m dscp --dscp-class EF", udp6(tos(0xb8)), true},
		{"dscp v6 other", "-m dscp --dscp-class EF", udp6(tos(0xbc)), false},
		{"dscp negated", "-m dscp ! --dscp-class AF41", udp4(tos(0x88)), false},
		{"dscp negated other", "-m dscp ! --dscp-class AF41", udp4(tos(0)), true},
		// -m tos: (byte & mask) == value
		{"tos name (mask 0x3f)", "-m tos --tos Minimize-Delay", udp4(tos(0x10)), true},
		{"tos name ignores the top bits", "-m tos --tos Minimize-Delay", udp4(tos(0xd0)), true},
		{"tos name tests the ECN bits", "-m tos --tos Minimize-Delay", udp4(tos(0x12)), false},
		{"tos v6", "-m tos --tos 0x10/0x3f", udp6(tos(0x50)), true},
		{"tos value, mask 0xff", "-m tos --tos 8", udp4(tos(0x09)), false},
		{"tos negated", "-m tos ! --tos 8", udp4(tos(0x09)), true},
		// -m ecn
		{"ecn ip ect 3", "-m ecn --ecn-ip-ect 3", udp4(tos(0xff)), true},
		{"ecn ip ect 3, have 2", "-m ecn --ecn-ip-ect 3", udp4(tos(0x02)), false},
		{"ecn ip v6 (the low bits of the traffic class)", "-m ecn --ecn-ip-ect 3", udp6(tos(0x03)), true},
		{"ecn ip v6 other", "-m ecn --ecn-ip-ect 1", udp6(tos(0x02)), false},
		{"ecn ip negated", "-m ecn ! --ecn-ip-ect 0", udp4(tos(0)), false},
		{"ecn ece", "-p tcp -m ecn --ecn-tcp-ece", tcp4(0x42, none), true},
		{"ecn ece clear", "-p tcp -m ecn --ecn-tcp-ece", tcp4(0x02, none), false},
		{"ecn ece and cwr", "-p tcp -m ecn --ecn-tcp-ece --ecn-tcp-cwr", tcp4(0xc2, none), true},
		{"ecn ece and cwr, cwr clear", "-p tcp -m ecn --ecn-tcp-ece --ecn-tcp-cwr", tcp4(0x42, none), false},
		{"ecn not cwr", "-p tcp -m ecn ! --ecn-tcp-cwr", tcp4(0x02, none), true},
		{"ecn not cwr, cwr set", "-p tcp -m ecn ! --ecn-tcp-cwr", tcp4(0x82, none), false},
		// -m iprange
		{"iprange low end", "-m iprange --src-range 10.0.0.5-10.0.0.9", udp4(src("10.0.0.5")), true},
		{"iprange high end", "-m iprange --src-range 10.0.0.5-10.0.0.9", udp4(src("10.0.0.9")), true},
		{"iprange below", "-m iprange --src-range 10.0.0.5-10.0.0.9", udp4(src("10.0.0.4")), false},
		{"iprange above", "-m iprange --src-range 10.0.0.5-10.0.0.9", udp4(src("10.0.0.10")), false},
		{"iprange negated outside", "-m iprange ! --src-range 10.0.0.5-10.0.0.9", udp4(src("10.0.0.4")), true},
		{"iprange negated inside", "-m iprange ! --src-range 10.0.0.5-10.0.0.9", udp4(src("10.0.0.7")), false},
		{"iprange reversed never", "-m iprange --src-range 10.0.0.9-10.0.0.1", udp4(src("10.0.0.5")), false},
		{"iprange reversed negated always", "-m iprange ! --src-range 10.0.0.9-10.0.0.1", udp4(src("10.0.0.5")), true},
		{"iprange and -s", "-s 10.0.0.0/29 -m iprange --src-range 10.0.0.5-10.0.0.20", udp4(src("10.0.0.6")), true},
		{"iprange and -s, outside -s", "-s 10.0.0.0/29 -m iprange --src-range 10.0.0.5-10.0.0.20", udp4(src("10.0.0.9")), false},
		{"iprange dst", "-m iprange --dst-range 10.9.9.0-10.9.9.9", udp4(none), true},
		{"iprange v6 across words, low", "-m iprange --src-range 2001:db8::ffff:ffff-2001:db8::1:0:5", udp6(src("2001:db8::ffff:ffff")), true},
		{"iprange v6 across words, carry", "-m iprange --src-range 2001:db8::ffff:ffff-2001:db8::1:0:5", udp6(src("2001:db8::1:0:0")), true},
		{"iprange v6 across words, high", "-m iprange --src-range 2001:db8::ffff:ffff-2001:db8::1:0:5", udp6(src("2001:db8::1:0:5")), true},
		{"iprange v6 above", "-m iprange --src-range 2001:db8::ffff:ffff-2001:db8::1:0:5", udp6(src("2001:db8::1:0:6")), false},
		{"iprange v6 below", "-m iprange --src-range 2001:db8::ffff:ffff-2001:db8::1:0:5", udp6(src("2001:db8::ffff:fffe")), false},
		{"iprange v6 other /32", "-m iprange --src-range 2001:db8::ffff:ffff-2001:db8::1:0:5", udp6(src("2001:db9::1:0:0")), false},
		{"iprange v6 negated", "-m iprange ! --dst-range ::-::ffff", udp6(dst("::1")), false},
		{"iprange v6 negated outside", "-m iprange ! --dst-range ::-::ffff", udp6(none), true},
		// -m rt: the first routing header; none: no match, negated or not
		{"rt any", "-m rt", udp6(rth(0, 253, 0, 8)), true},
		{"rt none", "-m rt", udp6(none), false},
		{"rt type 0", "-m rt --rt-type 0", udp6(rth(0, 0, 1, 24)), true},
		{"rt type other", "-m rt --rt-type 0", udp6(rth(0, 2, 1, 24)), false},
		{"rt type negated", "-m rt ! --rt-type 0", udp6(rth(0, 2, 1, 24)), true},
		{"rt negated, no header", "-m rt ! --rt-type 0", udp6(none), false},
		{"rt behind hop-by-hop", "-m rt --rt-type 2 --rt-segsleft 1", udp6(rth(1, 2, 1, 24)), true},
		{"rt segsleft range", "-m rt --rt-segsleft 2:5", udp6(rth(0, 4, 5, 8)), true},
		{"rt segsleft outside", "-m rt --rt-segsleft 2:5", udp6(rth(0, 4, 6, 8)), false},
		{"rt len in bytes", "-m rt --rt-len 24", udp6(rth(0, 4, 0, 24)), true},
		{"rt len other", "-m rt --rt-len 24", udp6(rth(0, 4, 0, 16)), false},
		{"rt type 256 never", "-m rt --rt-type 256", udp6(rth(0, 0, 0, 8)), false},
		{"rt ! type 256 always", "-m rt ! --rt-type 256", udp6(rth(0, 0, 0, 8)), true},
		{"rt with tcp (the walk to it)", "-p tcp -m rt --rt-type 4", mod(udp6(func(p *packet.Packet) { p.Proto = packet.ProtoTCP }), rth(1, 4, 0, 8)), true},
		// -m tcpmss: the first whole MSS option; none: only negated matches
		{"mss", "-p tcp -m tcpmss --mss 1460", tcp4(0x02, opts(2, 4, 0x05, 0xb4)), true},
		{"mss other", "-p tcp -m tcpmss --mss 1460", tcp4(0x02, opts(2, 4, 0x05, 0xb5)), false},
		{"mss range", "-p tcp -m tcpmss --mss 1:536", tcp4(0x02, opts(2, 4, 0x02, 0x18)), true},
		{"mss range above", "-p tcp -m tcpmss --mss 1:535", tcp4(0x02, opts(2, 4, 0x02, 0x18)), false},
		{"mss after NOPs and a timestamp", "-p tcp -m tcpmss --mss 1460", tcp4(0x02, opts(1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 2, 4, 0x05, 0xb4)), true},
		{"mss after an EOL (the walk goes on)", "-p tcp -m tcpmss --mss 1460", tcp4(0x02, opts(0, 2, 4, 0x05, 0xb4)), true},
		{"mss with a bad length is none", "-p tcp -m tcpmss --mss 0:65535", tcp4(0x02, opts(2, 3, 0x05, 0xb4)), false},
		{"no options: no mss", "-p tcp -m tcpmss --mss 0:65535", tcp4(0x02, none), false},
		{"no mss: negated matches", "-p tcp -m tcpmss ! --mss 1460", tcp4(0x02, opts(4, 2, 1, 3, 3, 7)), true},
		{"mss negated", "-p tcp -m tcpmss ! --mss 1460", tcp4(0x02, opts(2, 4, 0x05, 0xb4)), false},
		{"mss v6", "-p tcp -m tcpmss --mss 1440", mod(udp6(func(p *packet.Packet) { p.Proto, p.DPort = packet.ProtoTCP, 80 }), opts(2, 4, 0x05, 0xa0)), true},
		{"mss in the last option bytes", "-p tcp -m tcpmss --mss 1460", tcp4(0x02, opts(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 4, 0x05, 0xb4)), true},
	}
	// (a non-first fragment never meets these tests: it takes the verdict
	// of its datagram's first fragment, lib/frag.h; TestFragmentSequences)
	for _, tc := range cases {
		f.installText("-P INPUT DROP\n-A INPUT " + tc.rule + " -j ACCEPT\n")
		r := f.mustRun(tc.pkt.Bytes(), "eth0")
		got := r.XDPAction == datapath.XDPPass && r.RuleID == f.ids[0]
		if !got && (r.XDPAction != datapath.XDPDrop || r.Reason != compile.ReasonPolicyDrop) {
			t.Errorf("%s: %s: unexpected result %+v", tc.name, tc.pkt, r)
			continue
		}
		if got != tc.match {
			t.Errorf("%s: %q on %s: data plane says match %v, want %v", tc.name, tc.rule, tc.pkt, got, tc.match)
		}
		if d := compile.Decide(f.rs, compile.RefPacketOf(tc.pkt, "eth0")); (d.Rule == 0) != tc.match {
			t.Errorf("%s: %q on %s: reference matcher says rule %d, want match %v", tc.name, tc.rule, tc.pkt, d.Rule, tc.match)
		}
	}
}

// TestConntrackOptions plays a UDP exchange and ICMP errors through real
// conntrack and checks what -m conntrack's --ctdir, --ctstatus and
// --ctproto see of each packet, as the kernel's xt_conntrack does: the
// first packet of a connection is not CONFIRMED yet; SEEN_REPLY from the
// reply on (that packet included); a RELATED error has the quoted
// connection's protocol and goes in the direction opposite the packet it
// quotes; a packet without a connection (INVALID, UNTRACKED) matches no
// such test, negated or not.
func TestConntrackOptions(t *testing.T) {
	f := newFixture(t)
	f.installText(`
-A INPUT -m conntrack --ctstate RELATED --ctproto udp --ctdir REPLY -j ACCEPT
-A INPUT -m conntrack --ctdir REPLY --ctstatus ASSURED -j ACCEPT
-A INPUT -m conntrack --ctdir REPLY -j ACCEPT
-A INPUT -m conntrack --ctdir ORIGINAL --ctstatus SEEN_REPLY -j ACCEPT
-A INPUT -m conntrack --ctstatus CONFIRMED -j ACCEPT
-A INPUT -m conntrack ! --ctstatus CONFIRMED --ctproto udp -j ACCEPT
-A INPUT -m conntrack ! --ctstatus CONFIRMED -j ACCEPT
-A INPUT -j ACCEPT
`)
	for _, p := range []ctPeer{ct4, ct6} {
		f.flushCT(t)
		q := &packet.Packet{Src: p.cli, Dst: p.srv, Proto: packet.ProtoUDP, SPort: 5353, DPort: 53, Payload: []byte("query")}
		a := &packet.Packet{Src: p.srv, Dst: p.cli, Proto: packet.ProtoUDP, SPort: 53, DPort: 5353, Payload: []byte("answer")}
		icmp, unreach := packet.ProtoICMP, uint8(3)
		if p.cli.Is6() {
			icmp, unreach = packet.ProtoICMPv6, 1
		}
		errAbout := func(from, to netip.Addr, quoted *packet.Packet) *packet.Packet {
			return &packet.Packet{Src: from, Dst: to, Proto: icmp, ICMPType: unreach, ICMPCode: 3, Payload: quoted.Bytes()[14:]}
		}
		synAck := &packet.Packet{Src: p.srv, Dst: p.cli, Proto: packet.ProtoTCP, SPort: 22, DPort: 40000, TCPFlags: packet.TCPSyn | packet.TCPAck}
		// ICMP that is neither query, answer nor error (router / neighbour
		// solicitation): UNTRACKED (a lone later fragment, UNTRACKED before,
		// now takes its datagram's verdict: docs/fragments.md)
		other := &packet.Packet{Src: p.cli, Dst: p.srv, Proto: icmp, ICMPType: 10}
		if p.cli.Is6() {
			other.ICMPType = 135
		}
		for _, s := range []struct {
			what string
			pkt  *packet.Packet
			rule int // 1-based
		}{
			{"first query: NEW, not confirmed", q, 6},
			{"second query: confirmed", q, 5},
			{"answer: reply direction, not assured", a, 3},
			{"query after the answer: original, seen reply", q, 4},
			{"answer, assured", a, 2},
			{"error quoting a query: RELATED, UDP, reply direction", errAbout(p.srv, p.cli, q), 1},
			{"error quoting an answer: original direction", errAbout(p.cli, p.srv, a), 4},
			{"INVALID: no connection, ! --ctstatus does not match", synAck, 8},
			{"UNTRACKED: no connection", other, 8},
		} {
			r := f.mustRun(s.pkt.Bytes(), "eth0")
			if r.RuleID != f.ids[s.rule-1] {
				t.Errorf("%s: %s: rule id %d (state %s), want rule %d", s.what, s.pkt, r.RuleID, compile.CTStateName(r.CTState), s.rule)
			}
		}
	}
}

// TestHdrOptEgress: the tc egress program (the OUTPUT chain) reads the
// MSS option and the routing header too, from the skb.
func TestHdrOptEgress(t *testing.T) {
	f := newFixture(t)
	f.installText("-A OUTPUT -p tcp -m tcpmss --mss 1:1000 -j DROP\n-A OUTPUT -m rt --rt-type 0 -j DROP\n")
	rt := func(typ uint8) []packet.ExtHdr { return []packet.ExtHdr{{Type: 43, Len: 8, Routing: []byte{typ, 0}}} }
	for _, tc := range []struct {
		opts []byte
		ext  []packet.ExtHdr
		want uint32
	}{
		{[]byte{2, 4, 0x02, 0x18}, nil, datapath.TCActShot}, // 536
		{[]byte{1, 1, 4, 2, 2, 4, 0x05, 0xb4}, nil, datapath.TCActOK},
		{nil, nil, datapath.TCActOK},
		{nil, rt(0), datapath.TCActShot},
		{nil, rt(2), datapath.TCActOK},
	} {
		p := &packet.Packet{Src: ct4.srv, Dst: ct4.cli, Proto: packet.ProtoTCP, SPort: 40001, DPort: 443,
			TCPFlags: packet.TCPSyn, TCPOptions: tc.opts}
		if tc.ext != nil {
			p.Src, p.Dst, p.IPv6Ext = ct6.srv, ct6.cli, tc.ext
		}
		var r datapath.TraceResult
		err := f.ns.Do(func() error {
			var err error
			r, err = f.dp.RecordEgress(p.Bytes(), datapath.NoCTState)
			return err
		})
		if err != nil || r.XDPAction != tc.want {
			t.Errorf("options %x, extension headers %v: %+v %v, want tc verdict %d", tc.opts, tc.ext, r, err, tc.want)
		}
	}
}

// TestConntrackAddresses plays a UDP exchange through real conntrack
// against -m conntrack's address tests: without NAT, a connection's
// original source is the client in both directions of its packets.
func TestConntrackAddresses(t *testing.T) {
	f := newFixture(t)
	other := netip.MustParseAddr("10.200.0.9")
	f.installText(`
-A INPUT -m conntrack --ctstate NEW,ESTABLISHED --ctorigsrc 10.200.0.1 --ctorigdst 10.200.0.2 --ctdir REPLY -j ACCEPT
-A INPUT -m conntrack --ctstate NEW,ESTABLISHED --ctreplsrc 10.200.0.2 ! --ctrepldst 10.200.0.9 -j ACCEPT
-A INPUT -j ACCEPT
`)
	q := &packet.Packet{Src: ct4.cli, Dst: ct4.srv, Proto: packet.ProtoUDP, SPort: 5353, DPort: 53, Payload: []byte("query")}
	a := &packet.Packet{Src: ct4.srv, Dst: ct4.cli, Proto: packet.ProtoUDP, SPort: 53, DPort: 5353, Payload: []byte("answer")}
	o := &packet.Packet{Src: other, Dst: ct4.srv, Proto: packet.ProtoUDP, SPort: 5353, DPort: 53, Payload: []byte("query")}
	errPkt := &packet.Packet{Src: ct4.srv, Dst: ct4.cli, Proto: packet.ProtoICMP, ICMPType: 3, ICMPCode: 3, Payload: q.Bytes()[14:]}
	for _, s := range []struct {
		what string
		pkt  *packet.Packet
		rule int
	}{
		{"query: original direction, reply source the server, reply destination the client", q, 2},
		{"answer: reply direction, original source the client", a, 1},
		{"query from another client", o, 3},
		{"a RELATED error (no such rule takes RELATED)", errPkt, 3},
	} {
		if r := f.mustRun(s.pkt.Bytes(), "eth0"); r.RuleID != f.ids[s.rule-1] {
			t.Errorf("%s: %s: rule id %d (state %s), want rule %d", s.what, s.pkt, r.RuleID, compile.CTStateName(r.CTState), s.rule)
		}
	}
}
