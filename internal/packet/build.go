package packet

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Bytes returns the full Ethernet frame (no FCS): Ethernet header, VLAN tags,
// IP header with correct lengths and IPv4 header checksum, the L4 header with
// its checksum (pseudo-header included for TCP, UDP and ICMPv6) and Payload.
// The frame is padded to 60 bytes only when PadTo60 is set.
//
// Bytes panics when the packet cannot be encoded (see Encode); packets are
// test inputs written by hand, so this is a programming error.
func (p *Packet) Bytes() []byte {
	b, err := p.Encode()
	if err != nil {
		panic(err)
	}
	return b
}

// Encode is Bytes returning an error instead of panicking when the packet
// cannot be encoded: missing or mixed address families, a VLAN ID over 4095,
// IPv4 options longer than 40 bytes, a fragment offset over 8191, an invalid
// extension header length, or an IP packet longer than 65535 bytes.
func (p *Packet) Encode() ([]byte, error) {
	b := make([]byte, 0, 128+len(p.Payload))
	b = append(b, p.DstMAC[:]...)
	b = append(b, p.SrcMAC[:]...)
	for i, vid := range p.VLANs {
		if vid > 0x0fff {
			return nil, fmt.Errorf("packet: VLAN ID %d out of range (0-4095)", vid)
		}
		if p.PCP(i) > 7 {
			return nil, fmt.Errorf("packet: VLAN PCP %d out of range (0-7)", p.PCP(i))
		}
		tpid := EtherType8021Q
		if i == 0 && len(p.VLANs) >= 2 && !p.TPID8100 {
			tpid = EtherTypeQinQ
		}
		b = binary.BigEndian.AppendUint16(b, tpid)
		b = binary.BigEndian.AppendUint16(b, uint16(p.PCP(i))<<13|vid)
	}

	var err error
	if p.PPPoE {
		q := *p
		q.PPPoE, q.VLANs, q.PadTo60 = false, nil, false
		inner, err := q.Encode()
		if err != nil {
			return nil, err
		}
		proto := p.NonIP
		switch binary.BigEndian.Uint16(inner[12:]) {
		case EtherTypeIPv4:
			proto = PPPIPv4
		case EtherTypeIPv6:
			proto = PPPIPv6
		}
		payload := inner[14:]
		b = binary.BigEndian.AppendUint16(b, EtherTypePPPoE)
		b = append(b, 0x11, 0)
		b = binary.BigEndian.AppendUint16(b, p.PPPoESID)
		b = binary.BigEndian.AppendUint16(b, uint16(2+len(payload)))
		b = binary.BigEndian.AppendUint16(b, proto)
		b = append(b, payload...)
		if p.PadTo60 && len(b) < minFrameSize {
			b = append(b, make([]byte, minFrameSize-len(b))...)
		}
		return b, nil
	}
	switch {
	case p.NonIP != 0:
		b = binary.BigEndian.AppendUint16(b, p.NonIP)
		b = append(b, p.Payload...)
	case !p.Src.IsValid() || !p.Dst.IsValid():
		return nil, errors.New("packet: Src and Dst must both be set (or NonIP)")
	case p.Src.Is4() != p.Dst.Is4():
		return nil, fmt.Errorf("packet: Src %v and Dst %v are of different IP versions", p.Src, p.Dst)
	case p.Src.Is4():
		b = binary.BigEndian.AppendUint16(b, EtherTypeIPv4)
		b, err = p.appendIPv4(b)
	default:
		b = binary.BigEndian.AppendUint16(b, EtherTypeIPv6)
		b, err = p.appendIPv6(b)
	}
	if err != nil {
		return nil, err
	}
	if p.PadTo60 && len(b) < minFrameSize {
		b = append(b, make([]byte, minFrameSize-len(b))...)
	}
	return b, nil
}

// ttl returns the TTL / hop limit to emit.
// fragID is the identification to write: FragID, or def.
func (p *Packet) fragID(def uint32) uint32 {
	if p.FragID != 0 {
		return p.FragID
	}
	return def
}

func (p *Packet) ttl() uint8 {
	if p.TTL == 0 {
		return DefaultTTL
	}
	return p.TTL
}

// paddedIPv4Options returns the IPv4 options padded with zeros (EOL) to a
// multiple of 4 bytes.
func (p *Packet) paddedIPv4Options() []byte {
	n := (len(p.IPv4Options) + 3) &^ 3
	opts := make([]byte, n)
	copy(opts, p.IPv4Options)
	return opts
}

// appendIPv4 appends the IPv4 header, L4 segment and payload.
func (p *Packet) appendIPv4(b []byte) ([]byte, error) {
	opts := p.paddedIPv4Options()
	if len(opts) > 40 {
		return nil, fmt.Errorf("packet: IPv4 options are %d bytes, at most 40 fit", len(opts))
	}
	if p.FragOffset > 0x1fff {
		return nil, fmt.Errorf("packet: fragment offset %d out of range (0-8191)", p.FragOffset)
	}
	seg := p.segment()
	hlen := ipv4HeaderLen + len(opts)
	total := hlen + len(seg)
	if total > 0xffff {
		return nil, fmt.Errorf("packet: IPv4 packet of %d bytes exceeds 65535", total)
	}
	h := make([]byte, hlen)
	h[0] = 0x40 | byte(hlen/4)
	h[1] = p.TOS
	binary.BigEndian.PutUint16(h[2:], uint16(total))
	binary.BigEndian.PutUint16(h[4:], uint16(p.fragID(uint32(IPv4ID))))
	frag := p.FragOffset
	if p.MoreFragments {
		frag |= 0x2000
	}
	binary.BigEndian.PutUint16(h[6:], frag)
	h[8] = p.ttl()
	h[9] = p.Proto
	src, dst := p.Src.As4(), p.Dst.As4()
	copy(h[12:], src[:])
	copy(h[16:], dst[:])
	copy(h[20:], opts)
	binary.BigEndian.PutUint16(h[10:], Checksum(h))
	b = append(b, h...)
	return append(b, seg...), nil
}

// appendIPv6 appends the IPv6 header, extension headers, L4 segment and
// payload.
func (p *Packet) appendIPv6(b []byte) ([]byte, error) {
	if p.FragOffset > 0x1fff {
		return nil, fmt.Errorf("packet: fragment offset %d out of range (0-8191)", p.FragOffset)
	}
	types := make([]uint8, 0, len(p.IPv6Ext)+1)
	for _, e := range p.IPv6Ext {
		types = append(types, e.Type)
	}
	if p.IsFragment() {
		types = append(types, ProtoFragment)
	}
	next := func(i int) uint8 {
		if i+1 < len(types) {
			return types[i+1]
		}
		return p.Proto
	}

	var ext []byte
	for i, e := range p.IPv6Ext {
		var err error
		ext, err = appendExtHdr(ext, e, next(i))
		if err != nil {
			return nil, err
		}
	}
	if p.IsFragment() {
		off := p.FragOffset << 3
		if p.MoreFragments {
			off |= 1
		}
		ext = append(ext, next(len(types)-1), 0)
		ext = binary.BigEndian.AppendUint16(ext, off)
		ext = binary.BigEndian.AppendUint32(ext, p.fragID(IPv6FragID))
	}

	seg := p.segment()
	plen := len(ext) + len(seg)
	if plen > 0xffff {
		return nil, fmt.Errorf("packet: IPv6 payload of %d bytes exceeds 65535", plen)
	}
	first := p.Proto
	if len(types) > 0 {
		first = types[0]
	}
	h := make([]byte, ipv6HeaderLen)
	h[0] = 0x60 | p.TOS>>4
	h[1] = p.TOS << 4
	binary.BigEndian.PutUint16(h[4:], uint16(plen))
	h[6] = first
	h[7] = p.ttl()
	src, dst := p.Src.As16(), p.Dst.As16()
	copy(h[8:], src[:])
	copy(h[24:], dst[:])
	b = append(b, h...)
	b = append(b, ext...)
	return append(b, seg...), nil
}

// extHdrLen returns the emitted size of e, or an error when Len is invalid.
func extHdrLen(e ExtHdr) (int, error) {
	switch e.Type {
	case ProtoFragment:
		return fragHeaderLen, nil
	case ProtoAH:
		n := e.Len
		if n == 0 {
			n = 12
		}
		if n < 12 || n%4 != 0 || n > (255+2)*4 {
			return 0, fmt.Errorf("packet: AH length %d must be a multiple of 4 in 12..1028", e.Len)
		}
		return n, nil
	default:
		n := e.Len
		if n == 0 {
			n = 8
		}
		if n < 8 || n%8 != 0 || n > 256*8 {
			return 0, fmt.Errorf("packet: extension header %d length %d must be a multiple of 8 in 8..2048", e.Type, e.Len)
		}
		return n, nil
	}
}

// appendExtHdr appends the extension header e whose next header is next.
func appendExtHdr(b []byte, e ExtHdr, next uint8) ([]byte, error) {
	n, err := extHdrLen(e)
	if err != nil {
		return nil, err
	}
	h := make([]byte, n)
	h[0] = next
	switch e.Type {
	case ProtoFragment:
		// Atomic fragment: offset 0, M clear.
		binary.BigEndian.PutUint32(h[4:], IPv6FragID)
	case ProtoAH:
		h[1] = byte(n/4 - 2)
		binary.BigEndian.PutUint32(h[4:], AHSPI)
		binary.BigEndian.PutUint32(h[8:], AHSeq)
	case ProtoHopByHop, ProtoDestOpts:
		h[1] = byte(n/8 - 1)
		fillOptions(h[2:])
	case ProtoRouting:
		h[1] = byte(n/8 - 1)
		h[2] = RoutingType
		h[3] = 0 // segments left
		copy(h[2:], e.Routing)
	default:
		h[1] = byte(n/8 - 1)
	}
	return append(b, h...), nil
}

// optExperimental is an RFC 4727 experimental option type whose action bits
// say "skip over this option", so receivers accept it.
const optExperimental = 0x1e

// fillOptions fills an options area (hop-by-hop, destination options) with
// options a receiver skips. Runs of padding stay at most 7 bytes (Linux drops
// longer ones, RFC 4942); larger areas use experimental skippable options
// (at most 8 of them, within Linux's default per-header option limit).
func fillOptions(o []byte) {
	for len(o) > 0 {
		switch n := len(o); {
		case n == 1:
			o[0] = 0 // Pad1
			return
		case n <= 7:
			o[0], o[1] = 1, byte(n-2) // PadN
			return
		default:
			k := min(n, 257)
			if n-k == 1 {
				k--
			}
			o[0], o[1] = optExperimental, byte(k-2)
			o = o[k:]
		}
	}
}

// segment returns the L4 header (when emitted) followed by Payload, with the
// L4 checksum filled in.
func (p *Packet) segment() []byte {
	if !p.L4Present() {
		return append([]byte(nil), p.Payload...)
	}
	hl, _ := l4HeaderLen(p.Proto)
	var opts []byte
	if p.Proto == ProtoTCP && len(p.TCPOptions) > 0 {
		opts = append(opts, p.TCPOptions...)
		for len(opts)%4 != 0 {
			opts = append(opts, 0) // EOL
		}
		opts = opts[:min(len(opts), 40)]
	}
	seg := make([]byte, hl+len(opts)+len(p.Payload))
	copy(seg[hl:], opts)
	copy(seg[hl+len(opts):], p.Payload)
	switch p.Proto {
	case ProtoTCP:
		binary.BigEndian.PutUint16(seg[0:], p.SPort)
		binary.BigEndian.PutUint16(seg[2:], p.DPort)
		binary.BigEndian.PutUint32(seg[4:], TCPSeq)
		binary.BigEndian.PutUint32(seg[8:], TCPAckNum)
		seg[12] = byte(5+len(opts)/4) << 4
		seg[13] = p.TCPFlags
		binary.BigEndian.PutUint16(seg[14:], TCPWindow)
		binary.BigEndian.PutUint16(seg[16:], L4Checksum(p.Src, p.Dst, p.Proto, seg))
	case ProtoUDP:
		binary.BigEndian.PutUint16(seg[0:], p.SPort)
		binary.BigEndian.PutUint16(seg[2:], p.DPort)
		binary.BigEndian.PutUint16(seg[4:], uint16(len(seg)))
		c := L4Checksum(p.Src, p.Dst, p.Proto, seg)
		if c == 0 {
			c = 0xffff // 0 means "no checksum" in UDP
		}
		binary.BigEndian.PutUint16(seg[6:], c)
	case ProtoICMP:
		seg[0], seg[1] = p.ICMPType, p.ICMPCode
		binary.BigEndian.PutUint16(seg[4:], ICMPEchoID)
		binary.BigEndian.PutUint16(seg[6:], ICMPEchoSeq)
		binary.BigEndian.PutUint16(seg[2:], Checksum(seg))
	case ProtoICMPv6:
		seg[0], seg[1] = p.ICMPType, p.ICMPCode
		binary.BigEndian.PutUint16(seg[4:], ICMPEchoID)
		binary.BigEndian.PutUint16(seg[6:], ICMPEchoSeq)
		binary.BigEndian.PutUint16(seg[2:], L4Checksum(p.Src, p.Dst, p.Proto, seg))
	}
	return seg
}
