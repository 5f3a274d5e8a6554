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
// packet builder makes of p, arriving on iface, in INPUT and state NEW
// (the caller sets Chain and CTState): the fields the data plane's parser
// extracts. A non-first fragment has no L4 header; SCTP and UDP-Lite
// ports are the payload's first four bytes.
func RefPacketOf(p *packet.Packet, iface string) RefPacket {
	rp := RefPacket{
		Chain: rules.ChainInput, InIface: iface, Src: p.Src, Dst: p.Dst, Proto: p.Proto,
		SrcMAC: p.SrcMAC, DstMAC: p.DstMAC, Fragment: p.FragOffset != 0,
	}
	if len(p.VLANs) > 0 {
		rp.Tagged, rp.VLAN = true, p.VLANs[0]
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
