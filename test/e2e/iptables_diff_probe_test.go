package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// The probes of the differential test against real iptables
// (iptables_diff_test.go).

// probe is one crafted frame and the chain it reaches on every side.
type probe struct {
	pkt   *packet.Packet
	frame []byte
	chain rules.Chain
	iface string            // where it comes in (diffIngress)
	known *knownDiff        // the back ends disagree on it (knownDiffs)
	state uint8             // its connection state (compile.CTNew...): the state phase sets it
	addrs compile.AddrTable // the local routing table it meets (-m addrtype)
}

func (p *probe) String() string {
	s := fmt.Sprintf("%s in %s (%s)", p.pkt, p.iface, p.chain)
	if p.known != nil {
		s += " [known difference " + p.known.name + "]"
	}
	return s
}

// Protocols with ports besides TCP and UDP.
const (
	protoSCTP    = 132
	protoUDPLite = 136
)

// ref is what the reference matcher knows of p.
func (p *probe) ref() compile.RefPacket {
	rp := compile.RefPacketOf(p.pkt, p.iface)
	rp.Chain, rp.CTState, rp.Addrs, rp.Sets = p.chain, p.state, p.addrs, diffRefSets
	if p.chain == rules.ChainForward {
		rp.OutIface = "eth1" // the default route's device (setPhase)
	}
	return rp
}

// diffRefSets is diffSets as the reference reads them.
var diffRefSets = refSets()

// Value pools of the probes (rules.RandomRuleSet draws from similar ones).
var (
	diffPoolV4  = []string{"10.0.0.1", "10.0.0.2", "10.1.2.3", "10.200.0.1", "192.168.1.10", "172.16.5.4", "8.8.8.8"}
	diffPoolV6  = []string{"2001:db8::1", "2001:db8::2", "2001:db8:1::10", "fd00::1", "fd00:1::2", "fe80::1"}
	diffPoolMAC = [][6]byte{{0x00, 0x11, 0x22, 0x33, 0x44, 0x55}, {2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
)

func dpick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }
func dchance(r *rand.Rand, pct int) bool { return r.IntN(100) < pct }

// genProbe makes a probe that reaches the chain it is meant for on every
// side. Most are built inside a random rule of that chain (its prefixes,
// the edges of its port ranges, its flags and ICMP type; from aim, a
// stream of its own, the edges of its header matches: aimHeaders), some
// of those with one field changed after; the rest are random. Then the addresses
// the kernel would not deliver to that chain (martians, multicast,
// link-local where routed, the local ones where forwarded) are replaced.
func genProbe(r, aim *rand.Rand, ref *rules.RuleSet, ph diffPhase) *probe {
	chain := rules.ChainInput
	if ph.forward && dchance(r, 65) {
		chain = rules.ChainForward
	}
	var in []*rules.Match
	for i := range ref.Rules {
		if c := ref.Rules[i].Chain; c == chain || c == rules.ChainUser { // a user chain: maybe reached from chain
			in = append(in, &ref.Rules[i].Match)
		}
	}
	m := &rules.Match{}
	if len(in) > 0 && dchance(r, 80) {
		m = dpick(r, in)
	}
	v6 := dchance(r, 50)
	if m.Family != rules.FamilyAny {
		v6 = m.Family == rules.FamilyIPv6
	}
	p := &packet.Packet{Payload: make([]byte, 8+r.IntN(diffPayloadMax))}
	for i := range p.Payload {
		p.Payload[i] = byte(r.UintN(256))
	}
	// The device it comes in on: one the rule names, mostly.
	dev := diffIngress[0]
	if dchance(r, 35) {
		dev = diffIngress[1]
	}
	if i := m.InIface; i != nil && !i.Invert && dchance(r, 70) {
		for _, d := range diffIngress {
			if d.name == i.Name || (i.Prefix && strings.HasPrefix(d.name, i.Name)) {
				dev = d
			}
		}
	}
	p.SrcMAC, p.DstMAC = dpick(r, diffPoolMAC), dev.mac
	if m.MACSrc != nil && dchance(r, 70) {
		p.SrcMAC = m.MACSrc.Addr
	}
	p.Src, p.Dst = probeAddr(r, m.Src, v6), probeAddr(r, m.Dst, v6)
	switch {
	case m.Proto != nil && !m.Proto.Invert && dchance(r, 90):
		p.Proto = m.Proto.Proto
	case v6:
		p.Proto = dpick(r, []uint8{6, 17, 58, 58, 47, 50, protoSCTP, protoUDPLite, 59})
	default:
		p.Proto = dpick(r, []uint8{6, 17, 1, 1, 47, 50, protoSCTP, protoUDPLite})
	}
	p.SPort, p.DPort = rules.RandomPortFor(r, m.SPort, m.Ports), rules.RandomPortFor(r, m.DPort, m.Ports)
	p.TCPFlags = uint8(r.UintN(256))
	if m.TCPFlags != nil && dchance(r, 70) {
		p.TCPFlags = m.TCPFlags.Comp | (p.TCPFlags &^ m.TCPFlags.Mask)
	}
	p.ICMPType, p.ICMPCode = uint8(r.UintN(256)), uint8(r.UintN(4))
	if m.ICMP != nil && !m.ICMP.Any && dchance(r, 80) {
		p.ICMPType = m.ICMP.Type
		if m.ICMP.Code >= 0 && dchance(r, 80) {
			p.ICMPCode = uint8(m.ICMP.Code)
		}
	}
	if dchance(r, 25) { // a near miss: one field changed
		switch r.IntN(6) {
		case 0:
			p.Src = probeAddr(r, nil, v6)
		case 1:
			p.Dst = probeAddr(r, nil, v6)
		case 2:
			p.SPort ^= 1 << r.IntN(16)
		case 3:
			p.DPort ^= 1 << r.IntN(16)
		case 4:
			p.TCPFlags ^= 1 << r.IntN(6)
		default:
			p.ICMPType ^= 1 << r.IntN(8)
		}
	}
	// ICMP belongs to its family; in IPv6 these numbers are extension
	// headers: build a real one of that type in front of a protocol.
	switch {
	case p.Proto == packet.ProtoICMPv6 && !v6:
		p.Proto = packet.ProtoICMP
	case p.Proto == packet.ProtoICMP && v6:
		p.Proto = packet.ProtoICMPv6
	case v6 && (p.Proto == 0 || p.Proto == 43 || p.Proto == 60):
		p.IPv6Ext = []packet.ExtHdr{{Type: p.Proto, Len: 8}}
		p.Proto = dpick(r, []uint8{6, 17, 47})
	case v6 && (p.Proto == 44 || p.Proto == 51):
		p.Proto = 47 // a fragment header comes from FragOffset; AH is not built
	}
	if p.Proto == protoSCTP || p.Proto == protoUDPLite {
		// the builder writes these as payload: a header with the ports
		hdr := []byte{byte(p.SPort >> 8), byte(p.SPort), byte(p.DPort >> 8), byte(p.DPort), 0, 0, 0, 0, 0, 0, 0, 0}
		p.Payload = append(hdr, p.Payload...)
	}
	if v6 && p.IPv6Ext == nil && dchance(r, 6) {
		if dchance(r, 50) {
			p.IPv6Ext = append(p.IPv6Ext, packet.ExtHdr{Type: 0, Len: 8}) // hop-by-hop comes first
		}
		for k := r.IntN(3); k > 0; k-- {
			p.IPv6Ext = append(p.IPv6Ext, packet.ExtHdr{Type: dpick(r, []uint8{43, 60}), Len: 8 * (1 + r.IntN(2))})
		}
	}
	if !v6 && dchance(r, 5) {
		p.IPv4Options = bytes.Repeat([]byte{1}, 4*(1+r.IntN(10))) // NOPs
	}
	// Fragments reach FORWARD one by one (no conntrack, no defrag), but
	// INPUT only reassembled (ip_local_deliver): none there. Only first
	// fragments are sent: xdpfw gives a later fragment its datagram's
	// verdict and drops one whose first fragment it has not seen
	// (docs/fragments.md), where this iptables, without conntrack, judges
	// each fragment alone; test/e2e/fragments_test.go compares whole
	// fragmented datagrams with iptables instead.
	if chain == rules.ChainForward {
		switch {
		case (m.Fragment != nil && dchance(r, 50)) || dchance(r, 8):
			p.FragOffset = uint16(1 + r.IntN(8191))
			if dchance(r, 30) {
				p.FragOffset = 1 + uint16(r.IntN(3))
			}
			p.MoreFragments = dchance(r, 50)
			p.FragOffset, p.MoreFragments = 0, true // the draws above keep the streams as they were
		case dchance(r, 5):
			p.MoreFragments = true
		}
	}
	aimHeaders(aim, p, m, chain)
	deliverable(r, p, chain, ph)
	return &probe{pkt: p, frame: p.Bytes(), chain: chain, iface: dev.name}
}

// aimHeaders gives p, aimed at rule match m of chain, header fields at the
// edges of m's header matches (-m ttl / hl, -m tos / dscp / ecn, -m
// length, -m tcpmss, -m iprange, -m rt, -m pkttype): the value each
// tests, the one just inside and the one just outside, sometimes any;
// fields m does not test are sometimes drawn anyway, so that rules that
// test them meet other values. From a stream of its own (r), so that the
// probes' other fields stay what they were for a seed.
func aimHeaders(r *rand.Rand, p *packet.Packet, m *rules.Match, chain rules.Chain) {
	v6 := p.Src.Is6()
	// TTL / hop limit: the value the rule compares (the one it sees: in
	// FORWARD one less than the packet arrives with), one off either
	// side. The kernel forwards nothing that arrives with 1 or 0, and the
	// builder writes its default for 0.
	lowest := 1
	if chain == rules.ChainForward {
		lowest = 2
	}
	seen := -1
	switch {
	case m.TTL != nil && dchance(r, 80):
		seen = int(m.TTL.Value) + r.IntN(3) - 1
	case dchance(r, 10):
		seen = dpick(r, []int{0, 1, 2, 63, 64, 65, 127, 128, 254, 255})
	}
	if seen >= 0 {
		if chain == rules.ChainForward {
			seen++
		}
		p.TTL = uint8(min(max(seen, lowest), 255))
	}
	// TOS / traffic class: the DSCP, TOS and IP ECN values the rule
	// tests, sometimes with a bit flipped.
	switch {
	case m.DSCP != nil && dchance(r, 80):
		p.TOS = m.DSCP.Value<<2 | uint8(r.IntN(4))
	case m.TOS != nil && dchance(r, 80):
		p.TOS = m.TOS.Value&m.TOS.Mask | uint8(r.UintN(256))&^m.TOS.Mask
	case dchance(r, 15):
		p.TOS = uint8(r.UintN(256))
	}
	if e := m.ECN; e != nil && e.IPECT >= 0 && dchance(r, 70) {
		p.TOS = p.TOS&^3 | uint8(e.IPECT)
	}
	if p.TOS != 0 && dchance(r, 15) {
		p.TOS ^= 1 << r.IntN(8)
	}
	// TCP's MSS option: an edge of the rule's range, or any; sometimes
	// after a NOP or another option, sometimes none.
	if p.Proto == packet.ProtoTCP && p.FragOffset == 0 && (m.MSS != nil && dchance(r, 80) || dchance(r, 8)) {
		mss := uint16(r.UintN(65536))
		if m.MSS != nil && dchance(r, 80) {
			mss = dpick(r, []uint16{m.MSS.Min, m.MSS.Max}) + uint16(r.IntN(3)) - 1
		}
		opt := []byte{2, 4, byte(mss >> 8), byte(mss)}
		switch r.IntN(4) {
		case 0:
			opt = append([]byte{1, 1}, opt...) // NOPs first
		case 1:
			opt = append([]byte{3, 3, 7}, opt...) // window scale first
		case 2:
			if dchance(r, 50) {
				opt = []byte{4, 2} // SACK permitted: no MSS
			}
		}
		p.TCPOptions = opt
	}
	// -m iprange: an edge of the range, inside or just outside.
	for _, x := range []struct {
		rg   *rules.IPRangeMatch
		addr *netip.Addr
	}{{m.SrcRange, &p.Src}, {m.DstRange, &p.Dst}} {
		if x.rg == nil || x.rg.From.Is6() != v6 || !dchance(r, 75) {
			continue
		}
		a := dpick(r, []netip.Addr{x.rg.From, x.rg.To})
		switch r.IntN(4) {
		case 0:
			if b := a.Prev(); b.IsValid() {
				a = b
			}
		case 1:
			if b := a.Next(); b.IsValid() {
				a = b
			}
		}
		*x.addr = a
	}
	// -m set: an address of an element of the set, or just outside it.
	for _, x := range []struct {
		sm   *rules.SetMatch
		addr *netip.Addr
	}{{m.SrcSet, &p.Src}, {m.DstSet, &p.Dst}} {
		if x.sm == nil || !dchance(r, 70) {
			continue
		}
		for _, set := range diffSets {
			if set.name == x.sm.Name && (set.family == rules.FamilyIPv6) == v6 {
				*x.addr = rules.RandomAddrIn(r, netip.MustParsePrefix(dpick(r, set.elems)))
			}
		}
	}
	// -m rt: a routing header of the type, segments left and length the
	// rule tests, one off, or none.
	if rt := m.RT; rt != nil && v6 && dchance(r, 75) {
		near := func(v uint32) byte { return byte(int(v) + r.IntN(3) - 1) }
		typ, segs, n := byte(dpick(r, []uint32{0, 2, 3, 4})), byte(r.IntN(4)), 8*(1+r.IntN(3))
		if rt.Type != nil && dchance(r, 80) {
			typ = near(rt.Type.V)
		}
		if rt.Segs != nil && dchance(r, 80) {
			segs = near(dpick(r, []uint32{rt.Segs.Lo, rt.Segs.Hi}))
		}
		if rt.Len != nil && rt.Len.V%8 == 0 && rt.Len.V > 0 && rt.Len.V <= 24 && dchance(r, 80) {
			n = int(rt.Len.V)
		}
		h := packet.ExtHdr{Type: 43, Len: n, Routing: []byte{typ, segs}}
		if i := slices.IndexFunc(p.IPv6Ext, func(e packet.ExtHdr) bool { return e.Type == 43 }); i >= 0 {
			p.IPv6Ext[i] = h
		} else {
			p.IPv6Ext = append(p.IPv6Ext, h)
		}
	}
	// -m pkttype: a broadcast or multicast frame, INPUT only (the kernel
	// forwards no frame that is not to its own MAC: ip_forward,
	// ip6_forward).
	if chain == rules.ChainInput && (m.PktType != nil && dchance(r, 60) || dchance(r, 4)) {
		p.DstMAC = dpick(r, [][6]byte{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, {0x01, 0, 0x5e, 0, 0, 1}, {0x33, 0x33, 0, 0, 0, 1}})
	}
	// -m length: the packet grown or cut (its payload) to an edge of the
	// rule's range, where it can be (the payload of SCTP and UDP-Lite
	// holds their header; at most the devices' MTU).
	if l := m.Length; l != nil && dchance(r, 80) {
		want := int(dpick(r, []uint16{l.Min, l.Max})) + r.IntN(3) - 1
		keep := 0
		if p.Proto == protoSCTP || p.Proto == protoUDPLite {
			keep = 12
		}
		n := len(p.Payload) + want - compile.IPLenOf(p)
		if n >= keep && want <= 1500 {
			for len(p.Payload) < n {
				p.Payload = append(p.Payload, byte(r.UintN(256)))
			}
			p.Payload = p.Payload[:n]
		}
	}
}

// deliverable replaces the addresses of p that would not reach chain in
// phase ph on a Linux host: not 0/8, 127/8, multicast or 240/4 in IPv4;
// not ::/96, ::ffff:0:0/96, multicast or link-local destinations in IPv6;
// routed ones are no local address and, in IPv6, come from no link-local
// source (ip6_forward refuses); INPUT in the forward phase is a local
// address.
func deliverable(r *rand.Rand, p *packet.Packet, chain rules.Chain, ph diffPhase) {
	v6 := p.Src.Is6()
	bad := func(a netip.Addr, dst bool) bool {
		if !v6 {
			b := a.As4()
			return b[0] == 0 || b[0] == 127 || b[0] >= 224 || (ph.forward && a == diffLocal4)
		}
		b := a.As16()
		switch {
		case b[0] == 0xff, netip.PrefixFrom(netip.IPv6Unspecified(), 96).Contains(a),
			netip.MustParsePrefix("::ffff:0:0/96").Contains(a), ph.forward && a == diffLocal6:
			return true
		case a.IsLinkLocalUnicast():
			return dst || chain == rules.ChainForward
		}
		return false
	}
	for bad(p.Src, false) {
		p.Src = freshAddr(r, v6)
	}
	if ph.forward && chain == rules.ChainInput {
		p.Dst = diffLocal4
		if v6 {
			p.Dst = diffLocal6
		}
		return
	}
	for bad(p.Dst, true) {
		p.Dst = freshAddr(r, v6)
	}
}

// freshAddr returns a random unicast address that every phase delivers.
func freshAddr(r *rand.Rand, v6 bool) netip.Addr {
	if v6 {
		return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0xd1, 0xff, 13: byte(r.UintN(256)), 14: byte(r.UintN(256)), 15: byte(1 + r.IntN(254))})
	}
	return netip.AddrFrom4([4]byte{byte(1 + r.IntN(126)), byte(r.UintN(256)), byte(r.UintN(256)), byte(1 + r.IntN(254))})
}

// The state phase. Both sides track connections: the kernel's conntrack
// (loaded in a namespace while a rule uses -m conntrack) and xdpfw's. They
// are made to see the same thing: every probe opens a connection neither
// has seen in this run (its tuple is never used again, in either
// direction), of a kind both call NEW (a TCP SYN or bare ACK, picked up as
// Linux's nf_conntrack_tcp_loose=1 does; UDP; an ICMP or ICMPv6 echo
// request; ESP or protocol 253, which both track by addresses); then some
// UDP and echo probes get an answer in a later batch, ESTABLISHED when
// the reference matcher accepted the probe; otherwise a UDP answer is NEW
// and an echo reply INVALID (it opens nothing). The
// namespaces' own answers never leave them (OUTPUT drops; in xdpfw's, they
// go to lo), which the kernel's conntrack still sees, as an accepted
// answer; the crafted ones come later and find the same state.

const (
	tcpSYN = 0x02
	tcpACK = 0x10
)

// stateProbe makes p the first packet of a new connection (see above).
func (b *diffBed) stateProbe(r *rand.Rand, p *probe) {
	k := p.pkt
	v6 := k.Src.Is6()
	switch k.Proto {
	case packet.ProtoTCP:
		k.TCPFlags = dpick(r, []uint8{tcpSYN, tcpACK})
	case packet.ProtoUDP:
	case packet.ProtoICMP, packet.ProtoICMPv6:
		k.ICMPType, k.ICMPCode = 8, 0
		if v6 {
			k.ICMPType = 128
		}
	default:
		k.Proto = dpick(r, []uint8{50, 253})
	}
	// A packet from an address to itself: its answer is the same tuple
	// (UDP), or xdpfw and the kernel differ (an echo reply to itself: see
	// the report of issue 15's differential test). Not here.
	for k.Src == k.Dst {
		k.Src = freshAddr(r, v6)
	}
	for tries := 0; b.tuples[tupleKey(k)]; tries++ {
		if (k.Proto == packet.ProtoTCP || k.Proto == packet.ProtoUDP) && tries < 8 {
			k.SPort = uint16(1024 + r.IntN(64512))
		} else {
			k.Src = freshAddr(r, v6)
		}
	}
	b.tuples[tupleKey(k)] = true
	p.state, p.frame = compile.CTNew, k.Bytes()
}

// stateReply returns, for some UDP and echo probes, the answer to p (see
// above for its state).
func (b *diffBed) stateReply(r *rand.Rand, ref *rules.RuleSet, p *probe) *probe {
	k := p.pkt
	if !(k.Proto == packet.ProtoUDP || k.Proto == packet.ProtoICMP || k.Proto == packet.ProtoICMPv6) || !dchance(r, 40) ||
		k.Src.IsLinkLocalUnicast() { // no link-local destination is delivered (deliverable)
		return nil
	}
	q := *k
	q.Src, q.Dst, q.SPort, q.DPort = k.Dst, k.Src, k.DPort, k.SPort
	q.SrcMAC, q.Payload = dpick(r, diffPoolMAC), append([]byte(nil), k.Payload...)
	switch k.Proto {
	case packet.ProtoICMP:
		q.ICMPType = 0
	case packet.ProtoICMPv6:
		q.ICMPType = 129
	}
	a := &probe{pkt: &q, frame: q.Bytes(), chain: p.chain, iface: p.iface, addrs: p.addrs}
	switch {
	case compile.Decide(ref, p.ref()).Verdict == rules.VerdictAccept:
		a.state = compile.CTEstablished
	case k.Proto == packet.ProtoUDP:
		a.state = compile.CTNew // a connection of its own
	default:
		a.state = compile.CTInvalid // an echo reply opens nothing
	}
	return a
}

// tupleKey names a connection, the same in both directions.
func tupleKey(k *packet.Packet) string {
	a, b := fmt.Sprintf("%s/%d", k.Src, k.SPort), fmt.Sprintf("%s/%d", k.Dst, k.DPort)
	if k.Proto != packet.ProtoTCP && k.Proto != packet.ProtoUDP {
		a, b = k.Src.String(), k.Dst.String()
	}
	if a > b {
		a, b = b, a
	}
	return fmt.Sprintf("%d %s %s", k.Proto, a, b)
}

func probeAddr(r *rand.Rand, am *rules.AddrMatch, v6 bool) netip.Addr {
	if am != nil && dchance(r, 75) {
		return rules.RandomAddrIn(r, am.Prefix)
	}
	if dchance(r, 70) {
		if v6 {
			return mustAddr(dpick(r, diffPoolV6))
		}
		return mustAddr(dpick(r, diffPoolV4))
	}
	return rules.RandomAddr(r, v6)
}
