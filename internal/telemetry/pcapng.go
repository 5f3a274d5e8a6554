package telemetry

import (
	"fmt"
	"io"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// PcapngWriter writes packets to a pcapng file (the format of Wireshark and
// tcpdump) through gopacket's pcapgo: a Section Header Block, an Interface
// Description Block for each interface as it first appears (link type
// Ethernet, nanosecond time stamps, its name), and an Enhanced Packet Block
// per packet with its captured and original lengths, its direction, and a
// comment. Flush must be called at the end (the file is written through a
// buffer).
type PcapngWriter struct {
	w      io.Writer
	snap   uint32
	ng     *pcapgo.NgWriter // nil until the first interface is known
	ifaces map[string]int   // interface name -> interface id
}

// NewPcapngWriter starts a pcapng file on w; snap is the interfaces' snap
// length (the most bytes a packet block holds; 0: unlimited).
func NewPcapngWriter(w io.Writer, snap int) (*PcapngWriter, error) {
	return &PcapngWriter{w: w, snap: uint32(snap), ifaces: map[string]int{}}, nil
}

// iface returns the id of the interface named name, declaring it first if
// it is new (and starting the file with the first one: pcapgo writes a
// section with its first interface).
func (p *PcapngWriter) iface(name string) (int, error) {
	if id, ok := p.ifaces[name]; ok {
		return id, nil
	}
	intf := pcapgo.NgInterface{Name: name, LinkType: layers.LinkTypeEthernet, SnapLength: p.snap, TimestampResolution: 9}
	id := 0
	var err error
	if p.ng == nil {
		opts := pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "xdpfw log"}}
		p.ng, err = pcapgo.NewNgWriterInterface(p.w, intf, opts)
	} else {
		id, err = p.ng.AddInterface(intf)
	}
	if err != nil {
		return 0, fmt.Errorf("pcapng: writing the description of %s: %w", name, err)
	}
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
	ci := gopacket.CaptureInfo{Timestamp: pk.Time, CaptureLength: len(pk.Data), Length: max(pk.OrigLen, len(pk.Data)), InterfaceIndex: id}
	flags := pcapgo.NgEpbFlags{Direction: pcapgo.NgEpbFlagDirectionInbound}
	if pk.Outbound {
		flags.Direction = pcapgo.NgEpbFlagDirectionOutbound
	}
	opts := pcapgo.NgPacketOptions{Flags: &flags}
	if pk.Comment != "" {
		opts.Comments = []string{pk.Comment}
	}
	if err := p.ng.WritePacketWithOptions(ci, pk.Data, opts); err != nil {
		return fmt.Errorf("pcapng: writing a packet: %w", err)
	}
	return nil
}

// Flush writes what is buffered. A file no packet was written to gets its
// section header then, with one interface named "none".
func (p *PcapngWriter) Flush() error {
	if p.ng == nil {
		if _, err := p.iface("none"); err != nil {
			return err
		}
	}
	return p.ng.Flush()
}

// WriteEvent writes an event's packet bytes, with its text line as the
// packet's comment.
func (p *PcapngWriter) WriteEvent(e *Event, rs Rules, names IfName) error {
	return p.WritePacket(Packet{Iface: ifname(names, e.Ifindex), Outbound: e.Hook == HookEgress, Time: e.Time,
		Data: e.Data, OrigLen: e.PktLen, Comment: e.Line(rs, names)})
}
