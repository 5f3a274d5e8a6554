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
	var magic [4]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil {
		return nil, fmt.Errorf("pcap: reading magic: %w", err)
	}
	switch binary.BigEndian.Uint32(magic[:]) {
	case pcapMagicMicro, pcapMagicNano:
		return readPcap(r, binary.BigEndian)
	case swap32(pcapMagicMicro), swap32(pcapMagicNano):
		return readPcap(r, binary.LittleEndian)
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
func readPcap(r io.Reader, bo binary.ByteOrder) ([][]byte, error) {
	var hdr [20]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("pcap: reading file header: %w", unexpectedEOF(err))
	}
	if lt := bo.Uint32(hdr[16:]) & 0xffff; lt != LinkTypeEthernet {
		return nil, fmt.Errorf("pcap: link type %s not supported, want Ethernet (1)", linkTypeName(lt))
	}
	var frames [][]byte
	for {
		var rec [16]byte
		if _, err := io.ReadFull(r, rec[:]); err != nil {
			if err == io.EOF {
				return frames, nil
			}
			return nil, fmt.Errorf("pcap: record %d header: %w", len(frames)+1, unexpectedEOF(err))
		}
		n := bo.Uint32(rec[8:])
		if n > maxRecord {
			return nil, fmt.Errorf("pcap: record %d claims %d bytes", len(frames)+1, n)
		}
		data := make([]byte, n)
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, fmt.Errorf("pcap: record %d data: %w", len(frames)+1, unexpectedEOF(err))
		}
		frames = append(frames, data)
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
	bo        binary.ByteOrder
	linkTypes []uint32 // per interface ID
	snapLens  []uint32 // per interface ID
}

// readPcapng reads a pcapng file whose first block type has been consumed.
func readPcapng(r io.Reader) ([][]byte, error) {
	var (
		frames [][]byte
		sec    *pcapngSection
		first  = true
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
				return frames, nil
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
		frame, err := sec.block(typ, body, blockNo)
		if err != nil {
			return nil, err
		}
		if frame != nil {
			frames = append(frames, frame)
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
// data for packet blocks and nil for everything else.
func (s *pcapngSection) block(typ uint32, body []byte, blockNo int) ([]byte, error) {
	short := func(need int) error {
		return fmt.Errorf("pcapng: block %d (type %d): body of %d bytes, need %d", blockNo, typ, len(body), need)
	}
	switch typ {
	case blockIDB:
		if len(body) < 8 {
			return nil, short(8)
		}
		s.linkTypes = append(s.linkTypes, uint32(s.bo.Uint16(body)))
		s.snapLens = append(s.snapLens, s.bo.Uint32(body[4:]))
		return nil, nil
	case blockEPB:
		if len(body) < 20 {
			return nil, short(20)
		}
		if err := s.checkInterface(s.bo.Uint32(body), blockNo); err != nil {
			return nil, err
		}
		n := s.bo.Uint32(body[12:])
		if uint64(n) > uint64(len(body)-20) {
			return nil, short(20 + int(n))
		}
		return copyData(body[20 : 20+n]), nil
	case blockOPB:
		if len(body) < 20 {
			return nil, short(20)
		}
		if err := s.checkInterface(uint32(s.bo.Uint16(body)), blockNo); err != nil {
			return nil, err
		}
		n := s.bo.Uint32(body[12:])
		if uint64(n) > uint64(len(body)-20) {
			return nil, short(20 + int(n))
		}
		return copyData(body[20 : 20+n]), nil
	case blockSPB:
		if len(body) < 4 {
			return nil, short(4)
		}
		if err := s.checkInterface(0, blockNo); err != nil {
			return nil, err
		}
		// The captured length is the original length capped by the
		// interface's snap length and by the data present in the block.
		n := uint64(s.bo.Uint32(body))
		if snap := uint64(s.snapLens[0]); snap != 0 && n > snap {
			n = snap
		}
		n = min(n, uint64(len(body)-4))
		return copyData(body[4 : 4+n]), nil
	}
	return nil, nil
}

// checkInterface verifies that a packet block's interface exists and is an
// Ethernet interface.
func (s *pcapngSection) checkInterface(id uint32, blockNo int) error {
	if uint64(id) >= uint64(len(s.linkTypes)) {
		return fmt.Errorf("pcapng: block %d: packet for undeclared interface %d", blockNo, id)
	}
	if lt := s.linkTypes[id]; lt != LinkTypeEthernet {
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
