package packet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// ErrTruncated is wrapped by Decode errors for frames that end inside a
// header or before the length a header announces.
var ErrTruncated = errors.New("truncated")

// truncated returns an error wrapping ErrTruncated naming what was cut.
func truncated(what string, need, have int) error {
	return fmt.Errorf("packet: %w %s: need %d bytes, have %d", ErrTruncated, what, need, have)
}

// Decode parses an Ethernet frame (no FCS) back into the model: Ethernet,
// 802.1Q / 802.1ad tags, IPv4 with options and fragments, IPv6 with
// hop-by-hop, routing, fragment, destination options and AH extension
// headers, then TCP, UDP, ICMP and ICMPv6. For every frame Bytes produces,
// Decode returns an equal Packet (with TTL 0 read back as DefaultTTL, IPv4
// options padded, extension header lengths made explicit, and PadTo60 set
// only when padding was actually added).
//
// A TTL / hop limit of 0 decodes as 0, which the builder reads as
// DefaultTTL. What else the model cannot express is normalised: PCP/DEI bits and unusual
// TPID orders, IP identification, flow label, DF, TCP sequence
// numbers and options (skipped), ICMP identifier and sequence, option and
// extension header contents, and bytes after the end of the IP packet.
// Checksums are not verified. Extension headers after a first-fragment
// header are listed in IPv6Ext after the ones before it.
func Decode(frame []byte) (Packet, error) { return decode(frame, false) }

// DecodeCut is Decode for a frame cut short at a snap length (the first
// bytes of a packet, as a capture or a log event holds them): the lengths
// the IP and UDP headers announce may run past the end. A header cut
// short keeps the fields that fit before the cut (addresses once the fixed
// IP header is there, ports once 4 bytes of TCP or UDP are, TCP flags
// after 14, ICMP type and code after 2) and makes the error wrap
// ErrTruncated. Other errors are Decode's.
func DecodeCut(frame []byte) (Packet, error) { return decode(frame, true) }

func decode(frame []byte, cut bool) (Packet, error) {
	var p Packet
	if len(frame) < ethHeaderLen {
		return p, truncated("Ethernet header", ethHeaderLen, len(frame))
	}
	copy(p.DstMAC[:], frame[0:6])
	copy(p.SrcMAC[:], frame[6:12])
	et := binary.BigEndian.Uint16(frame[12:])
	rest := frame[ethHeaderLen:]
	var tpids []uint16
	for et == EtherType8021Q || et == EtherTypeQinQ {
		if len(rest) < vlanTagLen {
			return p, truncated("VLAN tag", vlanTagLen, len(rest))
		}
		tpids = append(tpids, et)
		tci := binary.BigEndian.Uint16(rest)
		p.VLANs = append(p.VLANs, tci&0x0fff)
		if pcp := uint8(tci >> 13); pcp != 0 {
			p.PCPs = append(p.PCPs, make([]uint8, len(p.VLANs)-1-len(p.PCPs))...)
			p.PCPs = append(p.PCPs, pcp)
		}
		et = binary.BigEndian.Uint16(rest[2:])
		rest = rest[vlanTagLen:]
	}
	if len(tpids) >= 2 && tpids[0] == EtherType8021Q {
		p.TPID8100 = true
	}

	if et == EtherTypePPPoE {
		if len(rest) < 8 {
			return p, truncated("PPPoE header", 8, len(rest))
		}
		n := int(binary.BigEndian.Uint16(rest[4:]))
		if n < 2 || len(rest) < 6+n {
			return p, truncated("PPPoE payload", 6+max(n, 2), len(rest))
		}
		p.PPPoE, p.PPPoESID = true, binary.BigEndian.Uint16(rest[2:])
		switch proto := binary.BigEndian.Uint16(rest[6:]); proto {
		case PPPIPv4:
			et = EtherTypeIPv4
		case PPPIPv6:
			et = EtherTypeIPv6
		default:
			p.NonIP, p.Payload = proto, clone(rest[8:6+n])
			return p, nil
		}
		if tail := rest[6+n:]; len(tail) > 0 && len(frame) == minFrameSize && allZero(tail) {
			p.PadTo60 = true
		}
		rest = rest[8 : 6+n]
	}

	var (
		end int // bytes of rest used by the IP packet
		err error
	)
	switch et {
	case EtherTypeIPv4:
		end, err = p.decodeIPv4(rest, cut)
	case EtherTypeIPv6:
		end, err = p.decodeIPv6(rest, cut)
	case 0:
		return p, errors.New("packet: EtherType 0 cannot be represented")
	default:
		p.NonIP = et
		p.Payload = clone(rest)
		return p, nil
	}
	if err != nil {
		return p, err
	}
	if tail := rest[end:]; len(tail) > 0 && len(frame) == minFrameSize && allZero(tail) {
		p.PadTo60 = true
	}
	return p, nil
}

// decodeIPv4 parses an IPv4 packet and returns its total length (with
// cut, what of it the frame holds).
func (p *Packet) decodeIPv4(b []byte, cut bool) (int, error) {
	if len(b) < ipv4HeaderLen {
		return 0, truncated("IPv4 header", ipv4HeaderLen, len(b))
	}
	if v := b[0] >> 4; v != 4 {
		return 0, fmt.Errorf("packet: IPv4 EtherType but IP version %d", v)
	}
	hlen := int(b[0]&0x0f) * 4
	if hlen < ipv4HeaderLen {
		return 0, fmt.Errorf("packet: IPv4 header length %d below 20", hlen)
	}
	total := int(binary.BigEndian.Uint16(b[2:]))
	if total < hlen {
		return 0, fmt.Errorf("packet: IPv4 total length %d below header length %d", total, hlen)
	}
	if len(b) < total {
		if !cut || len(b) < hlen {
			if cut {
				p.ipv4Fixed(b)
			}
			return 0, truncated("IPv4 packet", total, len(b))
		}
		total = len(b)
	}
	p.ipv4Fixed(b)
	if hlen > ipv4HeaderLen {
		p.IPv4Options = clone(b[ipv4HeaderLen:hlen])
	}
	return total, p.decodeL4(b[hlen:total], cut)
}

// ipv4Fixed reads the fixed IPv4 header (20 bytes of b).
func (p *Packet) ipv4Fixed(b []byte) {
	if id := binary.BigEndian.Uint16(b[4:]); id != IPv4ID {
		p.FragID = uint32(id)
	}
	frag := binary.BigEndian.Uint16(b[6:])
	p.FragOffset = frag & 0x1fff
	p.MoreFragments = frag&0x2000 != 0
	p.TTL = b[8]
	p.TOS = b[1]
	p.Proto = b[9]
	p.Src = netip.AddrFrom4([4]byte(b[12:16]))
	p.Dst = netip.AddrFrom4([4]byte(b[16:20]))
}

// decodeIPv6 parses an IPv6 packet and returns its total length (with
// cut, what of it the frame holds).
func (p *Packet) decodeIPv6(b []byte, cut bool) (int, error) {
	if len(b) < ipv6HeaderLen {
		return 0, truncated("IPv6 header", ipv6HeaderLen, len(b))
	}
	if v := b[0] >> 4; v != 6 {
		return 0, fmt.Errorf("packet: IPv6 EtherType but IP version %d", v)
	}
	total := ipv6HeaderLen + int(binary.BigEndian.Uint16(b[4:]))
	if len(b) < total {
		if !cut {
			return 0, truncated("IPv6 packet", total, len(b))
		}
		total = len(b)
	}
	p.TTL = b[7]
	p.TOS = b[0]<<4 | b[1]>>4
	p.Src = netip.AddrFrom16([16]byte(b[8:24]))
	p.Dst = netip.AddrFrom16([16]byte(b[24:40]))
	next := b[6]
	rest := b[ipv6HeaderLen:total]
	for {
		switch next {
		case ProtoHopByHop, ProtoRouting, ProtoDestOpts, ProtoAH:
			if len(rest) < 2 {
				return 0, truncated("IPv6 extension header", 2, len(rest))
			}
			n := (int(rest[1]) + 1) * 8
			if next == ProtoAH {
				n = (int(rest[1]) + 2) * 4
				if n < 12 {
					return 0, fmt.Errorf("packet: AH of %d bytes, below the 12-byte minimum", n)
				}
			}
			if len(rest) < n {
				return 0, truncated("IPv6 extension header", n, len(rest))
			}
			p.IPv6Ext = append(p.IPv6Ext, ExtHdr{Type: next, Len: n})
			next, rest = rest[0], rest[n:]
		case ProtoFragment:
			if len(rest) < fragHeaderLen {
				return 0, truncated("IPv6 fragment header", fragHeaderLen, len(rest))
			}
			off := binary.BigEndian.Uint16(rest[2:])
			atomic := off&0xfff9 == 0
			if atomic || p.IsFragment() {
				p.IPv6Ext = append(p.IPv6Ext, ExtHdr{Type: ProtoFragment, Len: fragHeaderLen})
			} else {
				p.FragOffset = off >> 3
				p.MoreFragments = off&1 != 0
				if id := binary.BigEndian.Uint32(rest[4:]); id != IPv6FragID {
					p.FragID = id
				}
			}
			next, rest = rest[0], rest[fragHeaderLen:]
			if p.FragOffset != 0 {
				// Non-first fragment: what follows is not a header.
				p.Proto = next
				p.Payload = clone(rest)
				return total, nil
			}
		default:
			p.Proto = next
			return total, p.decodeL4(rest, cut)
		}
	}
}

// decodeL4 parses the upper-layer segment of a packet whose Proto,
// FragOffset and addresses are already set. With cut, a header cut short
// keeps what fits (DecodeCut).
func (p *Packet) decodeL4(seg []byte, cut bool) error {
	if !p.L4Present() {
		p.Payload = clone(seg)
		return nil
	}
	if cut {
		if n, _ := l4HeaderLen(p.Proto); len(seg) < n {
			p.partialL4(seg)
			return truncated("L4 header", n, len(seg))
		}
	}
	switch p.Proto {
	case ProtoTCP:
		if len(seg) < tcpHeaderLen {
			return truncated("TCP header", tcpHeaderLen, len(seg))
		}
		doff := int(seg[12]>>4) * 4
		if doff < tcpHeaderLen {
			return fmt.Errorf("packet: TCP data offset %d below 20", doff)
		}
		if len(seg) < doff {
			if cut { // options cut: the fixed header is there
				p.partialL4(seg)
			}
			return truncated("TCP header", doff, len(seg))
		}
		p.SPort = binary.BigEndian.Uint16(seg[0:])
		p.DPort = binary.BigEndian.Uint16(seg[2:])
		p.TCPFlags = seg[13]
		p.Payload = clone(seg[doff:])
	case ProtoUDP:
		if len(seg) < udpHeaderLen {
			return truncated("UDP header", udpHeaderLen, len(seg))
		}
		ulen := int(binary.BigEndian.Uint16(seg[4:]))
		if cut && ulen > len(seg) {
			ulen = len(seg)
		}
		if ulen < udpHeaderLen || ulen > len(seg) {
			return fmt.Errorf("packet: UDP length %d outside 8..%d", ulen, len(seg))
		}
		p.SPort = binary.BigEndian.Uint16(seg[0:])
		p.DPort = binary.BigEndian.Uint16(seg[2:])
		p.Payload = clone(seg[udpHeaderLen:ulen])
	case ProtoICMP, ProtoICMPv6:
		if len(seg) < icmpHeaderLen {
			return truncated("ICMP header", icmpHeaderLen, len(seg))
		}
		p.ICMPType, p.ICMPCode = seg[0], seg[1]
		p.Payload = clone(seg[icmpHeaderLen:])
	}
	return nil
}

// partialL4 keeps the L4 fields that fit in a cut segment.
func (p *Packet) partialL4(seg []byte) {
	switch p.Proto {
	case ProtoTCP, ProtoUDP:
		if len(seg) >= 4 {
			p.SPort = binary.BigEndian.Uint16(seg[0:])
			p.DPort = binary.BigEndian.Uint16(seg[2:])
		}
		if p.Proto == ProtoTCP && len(seg) >= 14 {
			p.TCPFlags = seg[13]
		}
	case ProtoICMP, ProtoICMPv6:
		if len(seg) >= 2 {
			p.ICMPType, p.ICMPCode = seg[0], seg[1]
		}
	}
}

// clone copies b, returning nil for an empty slice.
func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// allZero reports whether every byte of b is zero.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
