package packet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// LinkTypeEthernet is the pcap / pcapng link type of Ethernet captures, the
// only one ReadFrames accepts.
const LinkTypeEthernet = 1

// Magic numbers of capture files, as read in the file's own byte order.
const (
	pcapMagicMicro  = 0xa1b2c3d4
	pcapMagicNano   = 0xa1b23c4d
	pcapngSHB       = 0x0a0d0d0a
	pcapngByteOrder = 0x1a2b3c4d
)

// pcapng block types.
const (
	blockIDB = 0x00000001 // Interface Description Block
	blockOPB = 0x00000002 // (obsolete) Packet Block
	blockSPB = 0x00000003 // Simple Packet Block
	blockEPB = 0x00000006 // Enhanced Packet Block
)

// maxRecord bounds a single record or block, so a corrupt length cannot
// make ReadFrames allocate without limit.
const maxRecord = 64 << 20

// ReadFrames reads every packet of a capture file: classic pcap (either byte
// order, microsecond or nanosecond magic) or pcapng (Section Header,
// Interface Description, Enhanced Packet, Simple Packet and obsolete Packet
// blocks; other blocks are skipped; sections may differ in byte order). The
// link type must be Ethernet; any other is an error naming it.
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
// options.
func ReadCapture(r io.Reader) ([]Record, error) {
	var magic [4]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil {
		return nil, fmt.Errorf("pcap: reading magic: %w", err)
	}
	switch m := binary.BigEndian.Uint32(magic[:]); m {
	case pcapMagicMicro, pcapMagicNano:
		return readPcap(r, binary.BigEndian, m == pcapMagicNano)
	case swap32(pcapMagicMicro), swap32(pcapMagicNano):
		return readPcap(r, binary.LittleEndian, m == swap32(pcapMagicNano))
	case pcapngSHB:
		return readPcapng(r)
	}
	return nil, fmt.Errorf("pcap: unknown capture file format (magic % x)", magic)
}

// swap32 reverses the byte order of v.
func swap32(v uint32) uint32 {
	return v>>24 | (v>>8)&0xff00 | (v<<8)&0xff0000 | v<<24
}

// readPcap reads a classic pcap file after its magic number.
func readPcap(r io.Reader, bo binary.ByteOrder, nano bool) ([]Record, error) {
	var hdr [20]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("pcap: reading file header: %w", unexpectedEOF(err))
	}
	if lt := bo.Uint32(hdr[16:]) & 0xffff; lt != LinkTypeEthernet {
		return nil, fmt.Errorf("pcap: link type %s not supported, want Ethernet (1)", linkTypeName(lt))
	}
	var recs []Record
	for {
		var rec [16]byte
		if _, err := io.ReadFull(r, rec[:]); err != nil {
			if err == io.EOF {
				return recs, nil
			}
			return nil, fmt.Errorf("pcap: record %d header: %w", len(recs)+1, unexpectedEOF(err))
		}
		n := bo.Uint32(rec[8:])
		if n > maxRecord {
			return nil, fmt.Errorf("pcap: record %d claims %d bytes", len(recs)+1, n)
		}
		data := make([]byte, n)
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, fmt.Errorf("pcap: record %d data: %w", len(recs)+1, unexpectedEOF(err))
		}
		frac := int64(bo.Uint32(rec[4:]))
		if !nano {
			frac *= 1000
		}
		recs = append(recs, Record{Data: data, OrigLen: int(max(bo.Uint32(rec[12:]), n)),
			Time: time.Unix(int64(bo.Uint32(rec[0:])), frac).UTC()})
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

// pcapngSection is the state of the pcapng section being read.
type pcapngSection struct {
	bo     binary.ByteOrder
	ifaces []pcapngIface // by interface ID
}

// pcapngIface is what an Interface Description Block says.
type pcapngIface struct {
	linkType uint32
	snapLen  uint32
	name     string // if_name
	tsUnit   int64  // nanoseconds per timestamp unit (if_tsresol; default 1000); 0: finer than 1 ns
	tsPer    int64  // timestamp units per nanosecond when tsUnit is 0
}

// pcapng option codes.
const (
	optEnd      = 0
	optComment  = 1
	optIfName   = 2 // IDB
	optTSResol  = 9 // IDB
	optEPBFlags = 2 // EPB
)

// options walks the options of a block body from off, calling fn for each.
func (s *pcapngSection) options(b []byte, fn func(code uint16, val []byte)) {
	for len(b) >= 4 {
		code, n := s.bo.Uint16(b), int(s.bo.Uint16(b[2:]))
		if code == optEnd || 4+n > len(b) {
			return
		}
		fn(code, b[4:4+n])
		b = b[4+(n+3)&^3:]
	}
}

// time converts a packet block's timestamp on interface id.
func (s *pcapngSection) time(id uint32, hi, lo uint32) time.Time {
	ts := int64(hi)<<32 | int64(lo)
	i := s.ifaces[id]
	if i.tsUnit == 0 {
		return time.Unix(0, ts/i.tsPer).UTC()
	}
	return time.Unix(0, ts*i.tsUnit).UTC()
}

// readPcapng reads a pcapng file whose first block type has been consumed.
func readPcapng(r io.Reader) ([]Record, error) {
	var (
		recs  []Record
		sec   *pcapngSection
		first = true
	)
	for blockNo := 1; ; blockNo++ {
		var head [8]byte
		if first {
			binary.BigEndian.PutUint32(head[:], pcapngSHB)
			if _, err := io.ReadFull(r, head[4:]); err != nil {
				return nil, fmt.Errorf("pcapng: block 1 header: %w", unexpectedEOF(err))
			}
			first = false
		} else if _, err := io.ReadFull(r, head[:]); err != nil {
			if err == io.EOF {
				return recs, nil
			}
			return nil, fmt.Errorf("pcapng: block %d header: %w", blockNo, unexpectedEOF(err))
		}

		if binary.BigEndian.Uint32(head[:]) == pcapngSHB {
			// The byte order is only known after reading the byte-order
			// magic that follows the (byte-order dependent) length.
			var bom [4]byte
			if _, err := io.ReadFull(r, bom[:]); err != nil {
				return nil, fmt.Errorf("pcapng: block %d byte-order magic: %w", blockNo, unexpectedEOF(err))
			}
			sec = &pcapngSection{}
			switch {
			case binary.BigEndian.Uint32(bom[:]) == pcapngByteOrder:
				sec.bo = binary.BigEndian
			case binary.LittleEndian.Uint32(bom[:]) == pcapngByteOrder:
				sec.bo = binary.LittleEndian
			default:
				return nil, fmt.Errorf("pcapng: block %d: bad byte-order magic % x", blockNo, bom)
			}
			total := sec.bo.Uint32(head[4:])
			if _, err := readBlockBody(r, sec.bo, total, 4, blockNo); err != nil {
				return nil, err
			}
			continue
		}
		if sec == nil {
			return nil, errors.New("pcapng: file does not start with a section header block")
		}
		typ := sec.bo.Uint32(head[:])
		body, err := readBlockBody(r, sec.bo, sec.bo.Uint32(head[4:]), 0, blockNo)
		if err != nil {
			return nil, err
		}
		rec, err := sec.block(typ, body, blockNo)
		if err != nil {
			return nil, err
		}
		if rec != nil {
			recs = append(recs, *rec)
		}
	}
}

// readBlockBody reads the rest of a block of total length total whose first
// 8+consumed bytes were already read, checks the trailing length copy, and
// returns the body (without the consumed bytes and the trailing length).
func readBlockBody(r io.Reader, bo binary.ByteOrder, total uint32, consumed int, blockNo int) ([]byte, error) {
	if total < uint32(12+consumed) || total%4 != 0 || total > maxRecord {
		return nil, fmt.Errorf("pcapng: block %d: bad block length %d", blockNo, total)
	}
	buf := make([]byte, int(total)-8-consumed)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("pcapng: block %d body: %w", blockNo, unexpectedEOF(err))
	}
	body, trailer := buf[:len(buf)-4], buf[len(buf)-4:]
	if t := bo.Uint32(trailer); t != total {
		return nil, fmt.Errorf("pcapng: block %d: trailing length %d does not match %d", blockNo, t, total)
	}
	return body, nil
}

// block interprets one non-SHB block of the section; it returns the packet
// of packet blocks and nil for everything else.
func (s *pcapngSection) block(typ uint32, body []byte, blockNo int) (*Record, error) {
	short := func(need int) error {
		return fmt.Errorf("pcapng: block %d (type %d): body of %d bytes, need %d", blockNo, typ, len(body), need)
	}
	switch typ {
	case blockIDB:
		if len(body) < 8 {
			return nil, short(8)
		}
		i := pcapngIface{linkType: uint32(s.bo.Uint16(body)), snapLen: s.bo.Uint32(body[4:]), tsUnit: 1000}
		s.options(body[8:], func(code uint16, val []byte) {
			switch {
			case code == optIfName:
				i.name = string(val)
			case code == optTSResol && len(val) >= 1:
				i.tsUnit, i.tsPer = tsResolution(val[0])
			}
		})
		s.ifaces = append(s.ifaces, i)
		return nil, nil
	case blockEPB:
		if len(body) < 20 {
			return nil, short(20)
		}
		id := s.bo.Uint32(body)
		if err := s.checkInterface(id, blockNo); err != nil {
			return nil, err
		}
		n := s.bo.Uint32(body[12:])
		if uint64(n) > uint64(len(body)-20) {
			return nil, short(20 + int(n))
		}
		rec := &Record{Data: copyData(body[20 : 20+n]), OrigLen: int(max(s.bo.Uint32(body[16:]), n)), Iface: int(id),
			IfName: s.ifaces[id].name, Time: s.time(id, s.bo.Uint32(body[4:]), s.bo.Uint32(body[8:]))}
		s.options(body[20+(n+3)&^3:], func(code uint16, val []byte) {
			switch {
			case code == optComment:
				rec.Comment = string(val)
			case code == optEPBFlags && len(val) == 4:
				rec.Flags = s.bo.Uint32(val)
			}
		})
		return rec, nil
	case blockOPB:
		if len(body) < 20 {
			return nil, short(20)
		}
		id := uint32(s.bo.Uint16(body))
		if err := s.checkInterface(id, blockNo); err != nil {
			return nil, err
		}
		n := s.bo.Uint32(body[12:])
		if uint64(n) > uint64(len(body)-20) {
			return nil, short(20 + int(n))
		}
		return &Record{Data: copyData(body[20 : 20+n]), OrigLen: int(max(s.bo.Uint32(body[16:]), n)), Iface: int(id),
			IfName: s.ifaces[id].name, Time: s.time(id, s.bo.Uint32(body[4:]), s.bo.Uint32(body[8:]))}, nil
	case blockSPB:
		if len(body) < 4 {
			return nil, short(4)
		}
		if err := s.checkInterface(0, blockNo); err != nil {
			return nil, err
		}
		// The captured length is the original length capped by the
		// interface's snap length and by the data present in the block.
		orig := uint64(s.bo.Uint32(body))
		n := orig
		if snap := uint64(s.ifaces[0].snapLen); snap != 0 && n > snap {
			n = snap
		}
		n = min(n, uint64(len(body)-4))
		return &Record{Data: copyData(body[4 : 4+n]), OrigLen: int(orig), IfName: s.ifaces[0].name}, nil
	}
	return nil, nil
}

// tsResolution reads if_tsresol: 10^-v seconds (high bit clear) or 2^-v
// seconds per unit, as nanoseconds per unit, or (0, units per nanosecond)
// for a unit finer than a nanosecond.
func tsResolution(v byte) (unit, per int64) {
	pow := func(b int64, e int) int64 {
		r := int64(1)
		for range e {
			r *= b
		}
		return r
	}
	exp := int(v & 0x7f)
	base := int64(10)
	if v&0x80 != 0 {
		base = 2
	}
	if base == 10 && exp <= 9 {
		return pow(10, 9-exp), 0
	}
	if base == 10 && exp <= 18 {
		return 0, pow(10, exp-9)
	}
	if base == 2 && exp <= 29 { // binary fractions (rare) to the nearest nanosecond
		return max(1, int64(1e9)>>exp), 0
	}
	if base == 2 && exp <= 62 {
		return 0, max(1, pow(2, exp)/1e9)
	}
	return 0, 1
}

// checkInterface verifies that a packet block's interface exists and is an
// Ethernet interface.
func (s *pcapngSection) checkInterface(id uint32, blockNo int) error {
	if uint64(id) >= uint64(len(s.ifaces)) {
		return fmt.Errorf("pcapng: block %d: packet for undeclared interface %d", blockNo, id)
	}
	if lt := s.ifaces[id].linkType; lt != LinkTypeEthernet {
		return fmt.Errorf("pcapng: interface %d has link type %s, want Ethernet (1)", id, linkTypeName(lt))
	}
	return nil
}

// copyData copies packet data out of a block buffer (never returning nil, so
// an empty packet is still a frame).
func copyData(b []byte) []byte {
	return append(make([]byte, 0, len(b)), b...)
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
// with link type Ethernet and snap length 262144. Timestamps are fixed
// (2024-01-01 00:00:00 UTC plus one millisecond per packet), so the same
// frames always give the same file.
func WritePcap(w io.Writer, frames [][]byte) error {
	le := binary.LittleEndian
	hdr := make([]byte, 24)
	le.PutUint32(hdr[0:], pcapMagicMicro)
	le.PutUint16(hdr[4:], 2) // version 2.4
	le.PutUint16(hdr[6:], 4)
	le.PutUint32(hdr[16:], 262144)
	le.PutUint32(hdr[20:], LinkTypeEthernet)
	if _, err := w.Write(hdr); err != nil {
		return fmt.Errorf("pcap: writing file header: %w", err)
	}
	for i, f := range frames {
		ts := pcapEpoch.Add(time.Duration(i) * time.Millisecond)
		rec := make([]byte, 16, 16+len(f))
		le.PutUint32(rec[0:], uint32(ts.Unix()))
		le.PutUint32(rec[4:], uint32(ts.Nanosecond()/1000))
		le.PutUint32(rec[8:], uint32(len(f)))
		le.PutUint32(rec[12:], uint32(len(f)))
		if _, err := w.Write(append(rec, f...)); err != nil {
			return fmt.Errorf("pcap: writing record %d: %w", i+1, err)
		}
	}
	return nil
}
