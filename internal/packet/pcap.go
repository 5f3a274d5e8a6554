package packet

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// LinkTypeEthernet is the pcap / pcapng link type of Ethernet captures, the
// only one ReadFrames accepts.
const LinkTypeEthernet = 1

// Magic numbers of capture files, read big-endian (the byte order a file
// uses decides which of a magic and its swap32 it shows).
const (
	pcapMagicMicro = 0xa1b2c3d4
	pcapMagicNano  = 0xa1b23c4d
	pcapngSHB      = 0x0a0d0d0a
)

// ReadFrames reads every packet of a capture file: classic pcap (either byte
// order, microsecond or nanosecond magic) or pcapng (Section Header,
// Interface Description, Enhanced Packet, Simple Packet and obsolete Packet
// blocks; other blocks are skipped; sections may differ in byte order),
// read by gopacket's pcapgo, which reads a record as its bytes arrive, so a
// corrupt length in a small file allocates little. The link type must be
// Ethernet; any other is an error naming it.
func ReadFrames(r io.Reader) ([][]byte, error) {
	recs, err := ReadCapture(r)
	if err != nil {
		return nil, err
	}
	frames := make([][]byte, len(recs))
	for i := range recs {
		frames[i] = recs[i].Data
	}
	return frames, nil
}

// Record is one packet of a capture file, with what the file says of it.
type Record struct {
	Data    []byte    // the captured bytes
	OrigLen int       // the packet's length when captured (>= len(Data))
	Time    time.Time // when it was captured
	// pcapng only: the interface (its index in its section, and its
	// if_name option), and the packet block's epb_flags and opt_comment
	// options.
	Iface   int
	IfName  string
	Flags   uint32
	Comment string
}

// ReadCapture is ReadFrames with each packet's length, time, interface and
// options. gopacket's pcapgo does the reading.
func ReadCapture(r io.Reader) ([]Record, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("pcap: reading magic: %w", err)
	}
	switch m := binary.BigEndian.Uint32(magic); m {
	case pcapMagicMicro, pcapMagicNano, swap32(pcapMagicMicro), swap32(pcapMagicNano):
		return readPcap(br)
	case pcapngSHB:
		return readPcapng(br)
	}
	return nil, fmt.Errorf("pcap: unknown capture file format (magic % x)", magic)
}

// swap32 reverses the byte order of v.
func swap32(v uint32) uint32 {
	return v>>24 | (v>>8)&0xff00 | (v<<8)&0xff0000 | v<<24
}

// readPcap reads a classic pcap file.
func readPcap(r io.Reader) ([]Record, error) {
	pr, err := pcapgo.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("pcap: reading file header: %w", unexpectedEOF(err))
	}
	if lt := pr.LinkType(); lt != layers.LinkTypeEthernet {
		return nil, fmt.Errorf("pcap: link type %s not supported, want Ethernet (1)", linkTypeName(uint32(lt)))
	}
	var recs []Record
	for {
		data, ci, err := pr.ReadPacketData()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("pcap: record %d: %w", len(recs)+1, unexpectedEOF(err))
		}
		recs = append(recs, Record{Data: data, OrigLen: max(ci.Length, len(data)), Time: ci.Timestamp.UTC()})
	}
}

// unexpectedEOF turns io.EOF into io.ErrUnexpectedEOF: inside a header or
// record, the end of the file is a truncation.
func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readPcapng reads a pcapng file.
func readPcapng(r io.Reader) ([]Record, error) {
	pr, err := pcapgo.NewNgReader(r, pcapgo.NgReaderOptions{WantMixedLinkType: true})
	if err != nil {
		return nil, fmt.Errorf("pcapng: %w", unexpectedEOF(err))
	}
	var recs []Record
	for {
		data, ci, opts, err := pr.ReadPacketDataWithOptions()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("pcapng: packet %d: %w", len(recs)+1, unexpectedEOF(err))
		}
		ifc, err := pr.Interface(ci.InterfaceIndex)
		if err != nil {
			return nil, fmt.Errorf("pcapng: packet %d: %w", len(recs)+1, err)
		}
		if ifc.LinkType != layers.LinkTypeEthernet {
			return nil, fmt.Errorf("pcapng: interface %d has link type %s, want Ethernet (1)", ci.InterfaceIndex, linkTypeName(uint32(ifc.LinkType)))
		}
		rec := Record{Data: data, OrigLen: max(ci.Length, len(data)), Time: ci.Timestamp.UTC(), Iface: ci.InterfaceIndex, IfName: ifc.Name}
		if len(opts.Comments) > 0 {
			rec.Comment = opts.Comments[0]
		}
		if opts.Flags != nil {
			rec.Flags = opts.Flags.ToUint32()
		}
		recs = append(recs, rec)
	}
}

// linkTypeName names a link type for error messages, e.g. "LINUX_SLL (113)".
func linkTypeName(lt uint32) string {
	names := map[uint32]string{
		0:   "NULL",
		1:   "ETHERNET",
		101: "RAW",
		105: "IEEE802_11",
		108: "LOOP",
		113: "LINUX_SLL",
		127: "IEEE802_11_RADIOTAP",
		228: "IPV4",
		229: "IPV6",
		276: "LINUX_SLL2",
	}
	if n, ok := names[lt]; ok {
		return fmt.Sprintf("%s (%d)", n, lt)
	}
	return fmt.Sprintf("%d", lt)
}

// pcapEpoch is the timestamp of the first packet WritePcap writes; each
// further packet is one millisecond later.
var pcapEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// WritePcap writes frames as a classic little-endian, microsecond pcap file
// (pcapgo) with link type Ethernet and snap length 262144. Timestamps are
// fixed (2024-01-01 00:00:00 UTC plus one millisecond per packet), so the
// same frames always give the same file.
func WritePcap(w io.Writer, frames [][]byte) error {
	pw := pcapgo.NewWriter(w)
	if err := pw.WriteFileHeader(262144, layers.LinkTypeEthernet); err != nil {
		return fmt.Errorf("pcap: writing file header: %w", err)
	}
	for i, f := range frames {
		ci := gopacket.CaptureInfo{Timestamp: pcapEpoch.Add(time.Duration(i) * time.Millisecond), CaptureLength: len(f), Length: len(f)}
		if err := pw.WritePacket(ci, f); err != nil {
			return fmt.Errorf("pcap: writing record %d: %w", i+1, err)
		}
	}
	return nil
}
