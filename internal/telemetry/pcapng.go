package telemetry

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// PcapngWriter writes packets to a pcapng file (the format of Wireshark and
// tcpdump; https://www.ietf.org/archive/id/draft-ietf-opsawg-pcapng-02.html):
// a Section Header Block, an Interface Description Block for each
// interface as it first appears (link type Ethernet, nanosecond time
// stamps, its name), and an Enhanced Packet Block per packet with its
// captured and original lengths, its direction, and a comment.
type PcapngWriter struct {
	w      io.Writer
	snap   uint32
	ifaces map[string]uint32 // interface name -> interface id
	buf    []byte
}

// pcapng block types and options written.
const (
	pngSHB         = 0x0a0d0d0a
	pngIDB         = 0x00000001
	pngEPB         = 0x00000006
	pngByteOrder   = 0x1a2b3c4d
	pngOptEnd      = 0
	pngOptComment  = 1
	pngOptIfName   = 2 // IDB
	pngOptTSResol  = 9 // IDB
	pngOptEPBFlags = 2 // EPB
	pngOptShbAppl  = 4 // SHB: shb_userappl
	linkEthernet   = 1 // LINKTYPE_ETHERNET
	tsResolNano    = 9 // if_tsresol: 10^-9 s
	pngInbound     = 1 // epb_flags direction bits
	pngOutbound    = 2
)

var le = binary.LittleEndian

// NewPcapngWriter starts a pcapng file on w; snap is the interfaces' snap
// length (the most bytes a packet block holds; 0: unlimited).
func NewPcapngWriter(w io.Writer, snap int) (*PcapngWriter, error) {
	p := &PcapngWriter{w: w, snap: uint32(snap), ifaces: map[string]uint32{}}
	body := make([]byte, 16)
	le.PutUint32(body[0:], pngByteOrder)
	le.PutUint16(body[4:], 1) // version 1.0
	le.PutUint16(body[6:], 0)
	le.PutUint64(body[8:], ^uint64(0)) // section length: not given
	body = appendOpt(body, pngOptShbAppl, []byte("xdpfw log"))
	body = appendOpt(body, pngOptEnd, nil)
	if err := p.block(pngSHB, body); err != nil {
		return nil, fmt.Errorf("pcapng: writing the section header: %w", err)
	}
	return p, nil
}

// appendOpt appends one option (code, length, value padded to 4 bytes).
func appendOpt(b []byte, code uint16, val []byte) []byte {
	b = le.AppendUint16(b, code)
	b = le.AppendUint16(b, uint16(len(val)))
	b = append(b, val...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// block writes one block: type, total length, body, total length.
func (p *PcapngWriter) block(typ uint32, body []byte) error {
	n := uint32(12 + len(body))
	p.buf = le.AppendUint32(p.buf[:0], typ)
	p.buf = le.AppendUint32(p.buf, n)
	p.buf = append(p.buf, body...)
	p.buf = le.AppendUint32(p.buf, n)
	_, err := p.w.Write(p.buf)
	return err
}

// iface returns the id of the interface named name, writing its
// Interface Description Block first if it is new.
func (p *PcapngWriter) iface(name string) (uint32, error) {
	if id, ok := p.ifaces[name]; ok {
		return id, nil
	}
	body := make([]byte, 8)
	le.PutUint16(body[0:], linkEthernet)
	le.PutUint32(body[4:], p.snap)
	body = appendOpt(body, pngOptIfName, []byte(name))
	body = appendOpt(body, pngOptTSResol, []byte{tsResolNano})
	body = appendOpt(body, pngOptEnd, nil)
	if err := p.block(pngIDB, body); err != nil {
		return 0, fmt.Errorf("pcapng: writing the description of %s: %w", name, err)
	}
	id := uint32(len(p.ifaces))
	p.ifaces[name] = id
	return id, nil
}

// Packet is one packet to write.
type Packet struct {
	Iface    string    // the interface it arrived on or left by
	Outbound bool      // it left by Iface (egress)
	Time     time.Time // when it was seen
	Data     []byte    // the captured bytes
	OrigLen  int       // its length on the wire (>= len(Data))
	Comment  string    // a packet comment ("": none)
}

// WritePacket writes one packet.
func (p *PcapngWriter) WritePacket(pk Packet) error {
	id, err := p.iface(pk.Iface)
	if err != nil {
		return err
	}
	ts := uint64(pk.Time.UnixNano())
	body := make([]byte, 20, 20+len(pk.Data)+len(pk.Comment)+24)
	le.PutUint32(body[0:], id)
	le.PutUint32(body[4:], uint32(ts>>32))
	le.PutUint32(body[8:], uint32(ts))
	le.PutUint32(body[12:], uint32(len(pk.Data)))
	le.PutUint32(body[16:], uint32(max(pk.OrigLen, len(pk.Data))))
	body = append(body, pk.Data...)
	for len(body)%4 != 0 {
		body = append(body, 0)
	}
	flags := uint32(pngInbound)
	if pk.Outbound {
		flags = pngOutbound
	}
	body = appendOpt(body, pngOptEPBFlags, le.AppendUint32(nil, flags))
	if pk.Comment != "" {
		body = appendOpt(body, pngOptComment, []byte(pk.Comment))
	}
	body = appendOpt(body, pngOptEnd, nil)
	if err := p.block(pngEPB, body); err != nil {
		return fmt.Errorf("pcapng: writing a packet: %w", err)
	}
	return nil
}

// WriteEvent writes an event's packet bytes, with its text line as the
// packet's comment.
func (p *PcapngWriter) WriteEvent(e *Event, rs Rules, names IfName) error {
	return p.WritePacket(Packet{Iface: ifname(names, e.Ifindex), Outbound: e.Hook == HookEgress, Time: e.Time,
		Data: e.Data, OrigLen: e.PktLen, Comment: e.Line(rs, names)})
}
