// Package packet is an abstract model of the packets xdpfw filters, with a
// byte-exact builder (Packet.Bytes), a decoder (Decode) and classic pcap /
// pcapng file support (ReadFrames, WritePcap).
//
// The model is deliberately small: it covers exactly what the firewall looks
// at (Ethernet, 802.1Q/802.1ad tags, IPv4 with options and fragments, IPv6 with
// extension headers and fragments, TCP, UDP, ICMP, ICMPv6). Everything the
// model does not describe is emitted with fixed, documented values so that the
// same Packet always produces the same bytes.
package packet

import "net/netip"

// EtherTypes and TPIDs used by the builder and the decoder.
const (
	EtherTypeIPv4           uint16 = 0x0800 // IPv4
	EtherTypeARP            uint16 = 0x0806 // ARP
	EtherTypeIPv6           uint16 = 0x86dd // IPv6
	EtherType8021Q          uint16 = 0x8100 // 802.1Q VLAN tag (C-tag)
	EtherTypeQinQ           uint16 = 0x88a8 // 802.1ad service tag (S-tag)
	EtherTypePPPoE          uint16 = 0x8864 // PPPoE session stage (RFC 2516)
	EtherTypePPPoEDiscovery uint16 = 0x8863 // PPPoE discovery stage (RFC 2516)
)

// PPP protocol numbers of a PPPoE session frame's payload.
const (
	PPPIPv4 uint16 = 0x0021 // IPv4
	PPPIPv6 uint16 = 0x0057 // IPv6
	PPPLCP  uint16 = 0xc021 // link control protocol
)

// IP protocol numbers the model gives a structured L4 header (or, for the
// extension header numbers, treats as IPv6 extension headers).
const (
	ProtoHopByHop uint8 = 0  // IPv6 hop-by-hop options extension header
	ProtoICMP     uint8 = 1  // ICMP (for IPv4)
	ProtoTCP      uint8 = 6  // TCP
	ProtoUDP      uint8 = 17 // UDP
	ProtoRouting  uint8 = 43 // IPv6 routing extension header
	ProtoFragment uint8 = 44 // IPv6 fragment extension header
	ProtoAH       uint8 = 51 // IP authentication header
	ProtoICMPv6   uint8 = 58 // ICMPv6
	ProtoDestOpts uint8 = 60 // IPv6 destination options extension header
)

// TCP flag bits for Packet.TCPFlags.
const (
	TCPFin uint8 = 0x01 // FIN
	TCPSyn uint8 = 0x02 // SYN
	TCPRst uint8 = 0x04 // RST
	TCPPsh uint8 = 0x08 // PSH
	TCPAck uint8 = 0x10 // ACK
	TCPUrg uint8 = 0x20 // URG
	TCPEce uint8 = 0x40 // ECE
	TCPCwr uint8 = 0x80 // CWR
)

// Fixed values the builder writes into fields the model does not describe.
const (
	DefaultTTL   uint8  = 64         // TTL / hop limit used when Packet.TTL is 0
	IPv4ID       uint16 = 0x1c46     // IPv4 identification
	IPv6FragID   uint32 = 0x0badcafe // IPv6 fragment header identification
	TCPSeq       uint32 = 0x11223344 // TCP sequence number
	TCPAckNum    uint32 = 0x55667788 // TCP acknowledgment number
	TCPWindow    uint16 = 64240      // TCP window
	ICMPEchoID   uint16 = 0x4242     // ICMP / ICMPv6 identifier (bytes 4-5 of the header)
	ICMPEchoSeq  uint16 = 0x0001     // ICMP / ICMPv6 sequence number (bytes 6-7 of the header)
	RoutingType  uint8  = 253        // routing type of emitted routing headers (RFC 4727 experimental), segments left 0
	AHSPI        uint32 = 0x00001000 // SPI of emitted authentication headers
	AHSeq        uint32 = 1          // sequence number of emitted authentication headers
	minFrameSize        = 60         // minimum Ethernet frame size without FCS
)

// Header sizes.
const (
	ethHeaderLen  = 14
	vlanTagLen    = 4
	ipv4HeaderLen = 20
	ipv6HeaderLen = 40
	tcpHeaderLen  = 20
	udpHeaderLen  = 8
	icmpHeaderLen = 8
	fragHeaderLen = 8
)

// ExtHdr is one IPv6 extension header to emit before the upper layer.
//
// Type is the header's protocol number: 0 hop-by-hop, 43 routing, 44
// fragment, 60 destination options, 51 AH. Len is the total size in bytes
// including the 2-byte head (next header, length); it must be a multiple of 8
// (AH: a multiple of 4, at least 12). Len 0 means the minimum size (8; AH 12).
// Len is ignored for the fragment header, which is always 8 bytes and, when
// listed here, is an atomic fragment (offset 0, M clear).
//
// Options headers are filled with padding options, routing headers use
// RoutingType with segments left 0, AH headers use AHSPI/AHSeq and a zero ICV.
// Any other Type is emitted in the generic RFC 6564 format (8-byte units).
type ExtHdr struct {
	Type uint8 // extension header protocol number
	Len  int   // total length in bytes including the 2-byte head
	// Routing is what a routing header holds after its 2-byte head (its
	// type, segments left, ...), instead of RoutingType, 0 and zeros;
	// cut to Len.
	Routing []byte
}

// Packet is the abstract description of one Ethernet frame.
//
// The IP version is decided by Src and Dst (both IPv4 or both IPv6). A frame
// with NonIP set carries no IP header at all.
type Packet struct {
	SrcMAC, DstMAC [6]byte // Ethernet addresses

	// VLANs are the VLAN IDs (12 bits), outermost first. With two or more
	// tags the outermost tag uses TPID 0x88a8 (802.1ad QinQ) and the inner
	// ones 0x8100, unless TPID8100 is set.
	VLANs    []uint16
	TPID8100 bool // use TPID 0x8100 for every tag
	// PCPs are the tags' priority code points (802.1p, 0-7), outermost
	// first; a tag without one has PCP 0.
	PCPs []uint8

	// NonIP, if non-zero, is the EtherType of a non-IP frame (e.g. 0x0806
	// ARP): the frame carries Payload right after the EtherType. With
	// PPPoE it is the PPP protocol (e.g. PPPLCP) instead.
	NonIP uint16

	// PPPoE carries the packet in a PPPoE session frame (RFC 2516) of
	// session PPPoESID after the VLAN tags: EtherType 0x8864, version and
	// type 1, code 0, the session id, the length (the PPP protocol field
	// and the IP packet, padding excluded), the PPP protocol (0x0021 IPv4,
	// 0x0057 IPv6, or NonIP).
	PPPoE    bool
	PPPoESID uint16

	Src, Dst netip.Addr // IP addresses; both IPv4 or both IPv6
	Proto    uint8      // L4 protocol: 6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6, anything else = opaque payload

	SPort, DPort uint16 // TCP/UDP ports
	TCPFlags     uint8  // TCP flags (TCPFin, TCPSyn, ...)
	// TCPOptions are raw TCP option bytes, zero-padded (EOL) by the builder
	// to a multiple of 4; the data offset grows accordingly (at most 40
	// bytes). Decode does not read them back.
	TCPOptions         []byte
	ICMPType, ICMPCode uint8 // ICMP/ICMPv6 type and code
	TTL                uint8 // IPv4 TTL / IPv6 hop limit; 0 means DefaultTTL
	TOS                uint8 // IPv4 TOS / IPv6 traffic class (DSCP << 2 | ECN)

	// FragOffset is the fragment offset in 8-byte units and MoreFragments
	// the MF bit. A non-zero offset means no L4 header is emitted (Payload
	// only). For IPv6 any fragmentation is emitted as a fragment extension
	// header after IPv6Ext.
	FragOffset    uint16
	MoreFragments bool
	// FragID, when non-zero, is the datagram's identification: IPv4's
	// (low 16 bits) or the IPv6 fragment header's; 0 means IPv4ID or
	// IPv6FragID. The decoder sets it when the frame has another.
	FragID uint32

	// IPv4Options are raw IPv4 option bytes, zero-padded (EOL) by the builder
	// to a multiple of 4; the IHL grows accordingly (at most 40 bytes).
	IPv4Options []byte

	// IPv6Ext are IPv6 extension headers emitted in order before the
	// fragment header (if any) and the L4 header.
	IPv6Ext []ExtHdr

	// Payload follows the L4 header (or the IP header when no L4 header is
	// emitted, or the EtherType for NonIP frames).
	Payload []byte

	// PadTo60 zero-pads the frame to the 60-byte Ethernet minimum (the IP
	// lengths do not include the padding).
	PadTo60 bool
}

// IsIP reports whether the packet describes an IP frame (NonIP unset and a
// valid source address).
func (p *Packet) IsIP() bool {
	return p.NonIP == 0 && p.Src.IsValid()
}

// IsIPv6 reports whether the packet is an IPv6 packet.
func (p *Packet) IsIPv6() bool {
	return p.IsIP() && !p.Src.Is4()
}

// L3Offset is where the IP header starts in the frame p encodes (or was
// decoded from): after the Ethernet header, the VLAN tags and a PPPoE
// session header.
func (p *Packet) L3Offset() int {
	n := ethHeaderLen + vlanTagLen*len(p.VLANs)
	if p.PPPoE {
		n += 8 // PPPoE header and PPP protocol
	}
	return n
}

// IsFragment reports whether the packet is an IP fragment (MF set or a
// non-zero offset).
func (p *Packet) IsFragment() bool {
	return p.IsIP() && (p.FragOffset != 0 || p.MoreFragments)
}

// L4Present reports whether the builder emits an L4 header: the frame is an
// IP packet, not a non-first fragment, and Proto is one with a modelled
// header (TCP, UDP, ICMP, ICMPv6). Opaque protocols carry Payload only.
func (p *Packet) L4Present() bool {
	if !p.IsIP() || p.FragOffset != 0 {
		return false
	}
	_, ok := l4HeaderLen(p.Proto)
	return ok
}

// l4HeaderLen returns the size of the modelled L4 header for proto.
func l4HeaderLen(proto uint8) (int, bool) {
	switch proto {
	case ProtoTCP:
		return tcpHeaderLen, true
	case ProtoUDP:
		return udpHeaderLen, true
	case ProtoICMP, ProtoICMPv6:
		return icmpHeaderLen, true
	}
	return 0, false
}

// PCP is the priority code point of tag i (PCPs; 0 when it has none).
func (p *Packet) PCP(i int) uint8 {
	if i < len(p.PCPs) {
		return p.PCPs[i]
	}
	return 0
}
