package compile

import (
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// Protocols with ports besides TCP and UDP, which the packet builder writes
// as payload (the caller puts the ports in front).
const (
	protoSCTP    = 132
	protoUDPLite = 136
)

// RefPacketOf returns what the reference matcher knows of a frame the
// packet builder makes of p, arriving on iface (the device the kernel
// sees it arrive by: for a PPPoE session frame, the session's ppp device), in INPUT and state NEW
// (the caller sets Chain and CTState): the fields the data plane's parser
// extracts (and -m length, ttl, tos, tcpmss and rt read). A non-first fragment has no L4 header; SCTP and UDP-Lite
// ports are the payload's first four bytes.
func RefPacketOf(p *packet.Packet, iface string) RefPacket {
	rp := RefPacket{
		Chain: rules.ChainInput, InIface: iface, Src: p.Src, Dst: p.Dst, Proto: p.Proto,
		SrcMAC: p.SrcMAC, DstMAC: p.DstMAC, Fragment: p.FragOffset != 0, FirstFragment: p.FragOffset == 0 && p.MoreFragments,
		PPPoE: p.PPPoE, Len: uint32(IPLenOf(p)), TTL: p.TTL, TOS: p.TOS, CTProto: p.Proto, MSS: tcpMSS(p.TCPOptions),
	}
	if rp.TTL == 0 {
		rp.TTL = packet.DefaultTTL
	}
	if len(p.VLANs) > 0 {
		rp.Tagged, rp.VLAN, rp.VLANPrio = true, p.VLANs[0], p.PCP(0)
	}
	for _, e := range p.IPv6Ext { // all before a fragment header: the first routing header
		if e.Type == 43 && p.Src.Is6() {
			rp.RT, rp.RTType, rp.RTLen = true, packet.RoutingType, uint16(max(e.Len, 8))
			if len(e.Routing) >= 2 {
				rp.RTType, rp.RTSegsLeft = e.Routing[0], e.Routing[1]
			}
			break
		}
	}
	switch p.Proto {
	case packet.ProtoTCP, packet.ProtoUDP, packet.ProtoICMP, packet.ProtoICMPv6, protoSCTP, protoUDPLite:
		rp.L4 = !rp.Fragment
	}
	if rp.L4 {
		switch p.Proto {
		case packet.ProtoTCP:
			rp.SPort, rp.DPort, rp.TCPFlags = p.SPort, p.DPort, p.TCPFlags
		case packet.ProtoUDP, protoSCTP, protoUDPLite:
			rp.SPort, rp.DPort = p.SPort, p.DPort
		default:
			rp.ICMPType, rp.ICMPCode = p.ICMPType, p.ICMPCode
		}
	}
	return rp
}

// TTLSeen is the TTL (hop limit) -m ttl / -m hl test: in FORWARD one less
// than the packet arrived with, as Linux decrements it before the FORWARD
// hook (ip_forward, ip6_forward); the data plane does the same (xdp_fw.c).
func (p *RefPacket) TTLSeen() uint8 {
	if p.Chain == rules.ChainForward && p.TTL > 0 {
		return p.TTL - 1
	}
	return p.TTL
}

// tcpMSS is the MSS option of TCP options opts (as the builder pads them)
// as the kernel's xt_tcpmss finds it, or NoMSS.
func tcpMSS(opts []byte) uint32 {
	o := append([]byte(nil), opts...)
	for len(o)%4 != 0 {
		o = append(o, 0)
	}
	o = o[:min(len(o), 40)]
	for i := 0; i < len(o); {
		if o[i] == 2 && len(o)-i >= 4 && o[i+1] == 4 {
			return uint32(o[i+2])<<8 | uint32(o[i+3])
		}
		if o[i] < 2 || i+1 >= len(o) || o[i+1] == 0 {
			i++
		} else {
			i += int(o[i+1])
		}
	}
	return NoMSS
}

// IPLenOf is the length of the IP packet the builder makes of p as -m
// length reads it (IPv4: the total length; IPv6: the payload length + 40).
func IPLenOf(p *packet.Packet) int {
	q := *p
	q.PadTo60 = false // the padding is no part of the IP packet
	q.PPPoE = false   // the IP packet within
	return len(q.Bytes()) - 14 - 4*len(q.VLANs)
}
