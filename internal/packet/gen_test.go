package packet

import (
	"math/rand/v2"
	"net/netip"
	"slices"
)

// genOptions controls randPacket.
type genOptions struct {
	// wellFormed restricts the generator to packets an independent
	// dissector (tcpdump) parses without complaint: TCP/UDP on unassigned
	// ports, ICMP echo, valid IPv4 options, ARP requests, hop-by-hop only
	// first, no routing headers.
	wellFormed bool
}

// randAddrs returns a random IPv4 or IPv6 address pair.
func randAddrs(r *rand.Rand) (netip.Addr, netip.Addr) {
	if r.IntN(2) == 0 {
		var a, b [4]byte
		for i := range a {
			a[i], b[i] = byte(r.Uint32()), byte(r.Uint32())
		}
		return netip.AddrFrom4(a), netip.AddrFrom4(b)
	}
	var a, b [16]byte
	for i := range a {
		a[i], b[i] = byte(r.Uint32()), byte(r.Uint32())
	}
	a[0], b[0] = 0xfd, 0xfd // keep them out of the IPv4-mapped range
	return netip.AddrFrom16(a), netip.AddrFrom16(b)
}

// randBytes returns n random bytes (nil for n == 0).
func randBytes(r *rand.Rand, n int) []byte {
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// isExtType reports whether proto is an IPv6 extension header Decode walks.
func isExtType(proto uint8) bool {
	switch proto {
	case ProtoHopByHop, ProtoRouting, ProtoFragment, ProtoDestOpts, ProtoAH:
		return true
	}
	return false
}

// arpRequest is a well-formed ARP request body.
var arpRequest = []byte{
	0, 1, 8, 0, 6, 4, 0, 1, // Ethernet/IPv4, request
	2, 0, 0, 0, 0, 1, 10, 0, 0, 1, // sender
	0, 0, 0, 0, 0, 0, 10, 0, 0, 2, // target
}

// randPacket returns a random packet the builder can encode.
func randPacket(r *rand.Rand, o genOptions) Packet {
	var p Packet
	for i := range 6 {
		p.SrcMAC[i], p.DstMAC[i] = byte(r.Uint32()), byte(r.Uint32())
	}
	switch n := r.IntN(10); {
	case n < 5:
	case n < 8:
		p.VLANs = []uint16{uint16(r.IntN(4096))}
	default:
		p.VLANs = []uint16{uint16(r.IntN(4096)), uint16(r.IntN(4096))}
		if r.IntN(5) == 0 {
			p.VLANs = append(p.VLANs, uint16(r.IntN(4096)))
		}
		p.TPID8100 = r.IntN(2) == 0
	}
	p.PadTo60 = r.IntN(3) == 0

	if r.IntN(10) == 0 {
		if o.wellFormed {
			p.NonIP, p.Payload = EtherTypeARP, arpRequest
			return p
		}
		for p.NonIP == 0 || p.NonIP == EtherTypeIPv4 || p.NonIP == EtherTypeIPv6 ||
			p.NonIP == EtherType8021Q || p.NonIP == EtherTypeQinQ {
			p.NonIP = uint16(r.Uint32())
		}
		p.Payload = randBytes(r, r.IntN(64))
		return p
	}

	p.Src, p.Dst = randAddrs(r)
	v6 := p.Src.Is6()
	if r.IntN(2) == 0 {
		p.TTL = uint8(r.Uint32())
	}
	switch r.IntN(6) {
	case 0: // non-first fragment
		p.FragOffset = uint16(1 + r.IntN(0x1fff))
		p.MoreFragments = r.IntN(2) == 0
	case 1: // first fragment
		p.MoreFragments = true
	}

	icmp := ProtoICMP
	if v6 {
		icmp = ProtoICMPv6
	}
	switch n := r.IntN(10); {
	case n < 4:
		p.Proto = ProtoTCP
	case n < 7:
		p.Proto = ProtoUDP
	case n < 9 || o.wellFormed:
		p.Proto = icmp
	default:
		for {
			p.Proto = uint8(r.Uint32())
			if _, known := l4HeaderLen(p.Proto); known {
				continue
			}
			if v6 && isExtType(p.Proto) && p.FragOffset == 0 {
				continue // would be parsed as an extension header
			}
			break
		}
	}
	p.SPort, p.DPort = uint16(r.Uint32()), uint16(r.Uint32())
	p.TCPFlags = uint8(r.Uint32())
	p.ICMPType, p.ICMPCode = uint8(r.Uint32()), uint8(r.Uint32())
	if o.wellFormed {
		p.SPort, p.DPort = uint16(30000+r.IntN(10000)), uint16(30000+r.IntN(10000))
		p.ICMPCode = 0
		p.ICMPType = [2]uint8{8, 0}[r.IntN(2)]
		if v6 {
			p.ICMPType = [2]uint8{128, 129}[r.IntN(2)]
		}
	}

	if !v6 && r.IntN(3) == 0 {
		if o.wellFormed {
			p.IPv4Options = slices.Clone([][]byte{
				{1}, {0x94, 4, 0, 0}, {1, 1, 0x94, 4, 0, 0}, {1, 1, 1},
			}[r.IntN(4)])
		} else {
			p.IPv4Options = randBytes(r, 1+r.IntN(40))
		}
	}
	if v6 && r.IntN(2) == 0 {
		for i := range 1 + r.IntN(3) {
			e := ExtHdr{Type: []uint8{ProtoHopByHop, ProtoRouting, ProtoDestOpts, ProtoAH, ProtoFragment}[r.IntN(5)]}
			if o.wellFormed && (e.Type == ProtoRouting || (e.Type == ProtoHopByHop && i > 0)) {
				// tcpdump stops at unknown routing types and flags a
				// hop-by-hop header that is not first.
				e.Type = ProtoDestOpts
			}
			switch e.Type {
			case ProtoAH:
				e.Len = 12 + 4*r.IntN(8)
			case ProtoFragment:
				e.Len = 8
			default:
				e.Len = 8 * (1 + r.IntN(8))
				if r.IntN(20) == 0 {
					e.Len = 8 * (1 + r.IntN(256)) // exercise long option areas
				}
			}
			if r.IntN(8) == 0 && e.Type != ProtoAH && e.Type != ProtoFragment {
				e.Len = 0 // minimum
			}
			p.IPv6Ext = append(p.IPv6Ext, e)
		}
	}
	if r.IntN(4) != 0 {
		p.Payload = randBytes(r, r.IntN(300))
	}
	if r.IntN(8) == 0 {
		p.PPPoE, p.PPPoESID = true, uint16(r.Uint32())
	}
	return p
}

// normalize returns what Decode is expected to return for p.Bytes().
func normalize(p Packet) Packet {
	n := p
	if len(n.VLANs) == 0 {
		n.VLANs = nil
	}
	if len(n.VLANs) < 2 {
		n.TPID8100 = false
	}
	if len(n.Payload) == 0 {
		n.Payload = nil
	}
	if n.NonIP != 0 {
		if n.PadTo60 {
			n.Payload = p.Bytes()[14+4*len(p.VLANs):]
		}
		n.PadTo60 = false
		return n
	}
	if n.TTL == 0 {
		n.TTL = DefaultTTL
	}
	if n.IsIPv6() {
		n.IPv4Options = nil
		n.IPv6Ext = nil
		for _, e := range p.IPv6Ext {
			l, _ := extHdrLen(e)
			n.IPv6Ext = append(n.IPv6Ext, ExtHdr{Type: e.Type, Len: l})
		}
	} else {
		n.IPv6Ext = nil
		n.IPv4Options = nil
		if len(p.IPv4Options) > 0 {
			n.IPv4Options = p.paddedIPv4Options()
		}
	}
	if !n.L4Present() || (n.Proto != ProtoTCP && n.Proto != ProtoUDP) {
		n.SPort, n.DPort = 0, 0
	}
	if !n.L4Present() || n.Proto != ProtoTCP {
		n.TCPFlags = 0
	}
	if !n.L4Present() || (n.Proto != ProtoICMP && n.Proto != ProtoICMPv6) {
		n.ICMPType, n.ICMPCode = 0, 0
	}
	if n.PadTo60 {
		unpadded := p
		unpadded.PadTo60 = false
		n.PadTo60 = len(unpadded.Bytes()) < minFrameSize
	}
	return n
}
