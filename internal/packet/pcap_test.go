package packet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// TestPcapWriteRead writes frames with WritePcap and reads them back with ReadFrames.
func TestPcapWriteRead(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	frames := [][]byte{{}}
	for range 50 {
		p := randPacket(r, genOptions{})
		frames = append(frames, p.Bytes())
	}
	var buf bytes.Buffer
	if err := WritePcap(&buf, frames); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if !bytes.Equal(b[:4], []byte{0xd4, 0xc3, 0xb2, 0xa1}) || binary.LittleEndian.Uint32(b[20:]) != 1 {
		t.Fatalf("unexpected file header % x", b[:24])
	}
	got, err := ReadFrames(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, frames) {
		t.Fatalf("read back %d frames, wrote %d; contents differ", len(got), len(frames))
	}

	empty := new(bytes.Buffer)
	if err := WritePcap(empty, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadFrames(empty); err != nil || len(got) != 0 {
		t.Fatalf("empty file: %d frames, %v", len(got), err)
	}
}

// byteOrder is binary.LittleEndian or binary.BigEndian (leOrder, beOrder).
type byteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

// The two byte orders as byteOrder values.
var (
	leOrder byteOrder = binary.LittleEndian
	beOrder byteOrder = binary.BigEndian
)

// classicPcap builds a classic pcap file by hand.
func classicPcap(bo byteOrder, magic, linkType uint32, frames ...[]byte) []byte {
	var b []byte
	b = bo.AppendUint32(b, magic)
	b = bo.AppendUint16(b, 2)
	b = bo.AppendUint16(b, 4)
	b = bo.AppendUint32(b, 0) // thiszone
	b = bo.AppendUint32(b, 0) // sigfigs
	b = bo.AppendUint32(b, 65535)
	b = bo.AppendUint32(b, linkType)
	for i, f := range frames {
		b = bo.AppendUint32(b, uint32(1700000000+i))
		b = bo.AppendUint32(b, 999999)
		b = bo.AppendUint32(b, uint32(len(f)))
		b = bo.AppendUint32(b, uint32(len(f)+100)) // original was longer
		b = append(b, f...)
	}
	return b
}

// TestReadClassicVariants reads hand-made classic pcap files in both byte orders with micro- and nanosecond magic.
func TestReadClassicVariants(t *testing.T) {
	frames := [][]byte{vectors()[0].pkt.Bytes(), vectors()[1].pkt.Bytes(), {1, 2, 3}}
	for _, c := range []struct {
		name  string
		bo    byteOrder
		magic uint32
	}{
		{"little micro", binary.LittleEndian, 0xa1b2c3d4},
		{"little nano", binary.LittleEndian, 0xa1b23c4d},
		{"big micro", binary.BigEndian, 0xa1b2c3d4},
		{"big nano", binary.BigEndian, 0xa1b23c4d},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ReadFrames(bytes.NewReader(classicPcap(c.bo, c.magic, 1, frames...)))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, frames) {
				t.Fatalf("got %x\nwant %x", got, frames)
			}
		})
	}
}

// TestReadErrors checks ReadFrames errors: unknown magic, non-Ethernet link types (named), truncation.
func TestReadErrors(t *testing.T) {
	good := classicPcap(binary.LittleEndian, 0xa1b2c3d4, 1, []byte("0123456789"))
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "reading magic"},
		{"unknown magic", []byte("GIF89a......"), "unknown capture file format"},
		{"classic linux sll", classicPcap(binary.BigEndian, 0xa1b2c3d4, 113), "LINUX_SLL (113)"},
		{"classic raw", classicPcap(binary.LittleEndian, 0xa1b23c4d, 101), "RAW (101)"},
		{"classic odd link type", classicPcap(binary.LittleEndian, 0xa1b23c4d, 4242), "link type 4242"},
		{"classic short header", good[:10], "file header"},
		{"classic short record", good[:len(good)-1], "record 1: unexpected EOF"},
		{"classic short record header", good[:30], "record 1: unexpected EOF"},
		{"pcapng raw", ngFile(binary.LittleEndian, 101), "RAW (101)"},
		{"pcapng truncated", ngFile(binary.BigEndian, 1)[:20], "pcapng"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadFrames(bytes.NewReader(c.data))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ReadFrames error = %v, want one containing %q", err, c.want)
			}
		})
	}
	if _, err := ReadFrames(bytes.NewReader(good[:30])); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated record header: %v, want io.ErrUnexpectedEOF", err)
	}
}

// ngWriter builds pcapng files by hand in one byte order.
type ngWriter struct {
	bo  byteOrder
	buf []byte
}

// pad4 pads b with zeros to a multiple of 4 bytes.
func pad4(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// option encodes one pcapng option (code, length, padded value).
func (w *ngWriter) option(code uint16, val []byte) []byte {
	o := w.bo.AppendUint16(nil, code)
	o = w.bo.AppendUint16(o, uint16(len(val)))
	return pad4(append(o, val...))
}

// endOfOpt is the opt_endofopt option.
var endOfOpt = []byte{0, 0, 0, 0}

// block appends one block with the given type and body.
func (w *ngWriter) block(typ uint32, body []byte) {
	body = pad4(body)
	total := uint32(12 + len(body))
	w.buf = w.bo.AppendUint32(w.buf, typ)
	w.buf = w.bo.AppendUint32(w.buf, total)
	w.buf = append(w.buf, body...)
	w.buf = w.bo.AppendUint32(w.buf, total)
}

// shb appends a section header block with a shb_userappl option.
func (w *ngWriter) shb() {
	b := w.bo.AppendUint32(nil, 0x1a2b3c4d)
	b = w.bo.AppendUint16(b, 1)
	b = w.bo.AppendUint16(b, 0)
	b = w.bo.AppendUint64(b, ^uint64(0)) // section length unknown
	b = append(b, w.option(4, []byte("xdpfw test"))...)
	b = append(b, endOfOpt...)
	w.block(0x0a0d0d0a, b)
}

// idb appends an interface description block with an if_tsresol option.
func (w *ngWriter) idb(linkType uint16, snapLen uint32) {
	b := w.bo.AppendUint16(nil, linkType)
	b = w.bo.AppendUint16(b, 0)
	b = w.bo.AppendUint32(b, snapLen)
	b = append(b, w.option(9, []byte{9})...)
	b = append(b, endOfOpt...)
	w.block(1, b)
}

// epb appends an enhanced packet block with an opt_comment option.
func (w *ngWriter) epb(iface uint32, data []byte) {
	b := w.bo.AppendUint32(nil, iface)
	b = w.bo.AppendUint32(b, 0x0005f000) // timestamp high
	b = w.bo.AppendUint32(b, 0x12345678) // timestamp low
	b = w.bo.AppendUint32(b, uint32(len(data)))
	b = w.bo.AppendUint32(b, uint32(len(data)))
	b = pad4(append(b, data...))
	b = append(b, w.option(1, []byte("a comment"))...)
	b = append(b, endOfOpt...)
	w.block(6, b)
}

// spb appends a simple packet block.
func (w *ngWriter) spb(origLen uint32, data []byte) {
	b := w.bo.AppendUint32(nil, origLen)
	w.block(3, append(b, data...))
}

// ngFile is a minimal pcapng file: one interface of linkType, one packet.
func ngFile(bo byteOrder, linkType uint16) []byte {
	w := &ngWriter{bo: bo}
	w.shb()
	w.idb(linkType, 0)
	w.epb(0, []byte{1, 2, 3, 4, 5})
	return w.buf
}

// TestReadPcapng reads hand-made pcapng files (both byte orders, skipped blocks, EPB, SPB, several interfaces and sections).
func TestReadPcapng(t *testing.T) {
	f1 := vectors()[0].pkt.Bytes() // 58 bytes: EPB data needs padding
	f2 := vectors()[1].pkt.Bytes()
	f3 := []byte("0123456789abcdefghij") // SPB truncated by snap length to 16

	section := func(bo byteOrder) []byte {
		w := &ngWriter{bo: bo}
		w.shb()
		w.idb(1, 16)
		w.block(4, w.option(2, []byte("ignored name resolution")))        // NRB: skipped
		w.block(0x40000bad, []byte("custom block, must be skipped here")) // unknown: skipped
		w.epb(0, f1)
		w.idb(1, 0)
		w.epb(1, f2)
		w.spb(uint32(len(f3)), f3)                                                        // interface 0: snap length 16
		w.block(5, w.bo.AppendUint32(w.bo.AppendUint32(w.bo.AppendUint32(nil, 0), 0), 0)) // ISB: skipped
		return w.buf
	}
	want := [][]byte{f1, f2, f3[:16]}

	for _, c := range []struct {
		name string
		bo   byteOrder
	}{{"little endian", binary.LittleEndian}, {"big endian", binary.BigEndian}} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ReadFrames(bytes.NewReader(section(c.bo)))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %x\nwant %x", got, want)
			}
		})
	}

	t.Run("two sections of different byte order", func(t *testing.T) {
		file := append(section(binary.LittleEndian), section(binary.BigEndian)...)
		got, err := ReadFrames(bytes.NewReader(file))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, append(append([][]byte{}, want...), want...)) {
			t.Fatalf("got %d frames %x", len(got), got)
		}
	})

	t.Run("errors", func(t *testing.T) {
		w := &ngWriter{bo: binary.LittleEndian}
		w.shb()
		w.idb(1, 0)
		w.epb(1, f1) // interface 1 is not declared
		if _, err := ReadFrames(bytes.NewReader(w.buf)); err == nil || !strings.Contains(err.Error(), "Interface id 1 not present") {
			t.Errorf("undeclared interface: %v", err)
		}

		w = &ngWriter{bo: binary.BigEndian}
		w.shb()
		w.idb(113, 0)
		w.spb(3, []byte{1, 2, 3})
		if _, err := ReadFrames(bytes.NewReader(w.buf)); err == nil || !strings.Contains(err.Error(), "LINUX_SLL (113)") {
			t.Errorf("SLL interface: %v", err)
		}

		// pcapgo does not compare a block's trailing length copy with its
		// leading length (a redundant copy: the data read is right).

		bom := ngFile(binary.LittleEndian, 1)
		copy(bom[8:], []byte{1, 2, 3, 4})
		if _, err := ReadFrames(bytes.NewReader(bom)); err == nil || !strings.Contains(err.Error(), "Wrong byte order") {
			t.Errorf("bad byte-order magic: %v", err)
		}

		huge := ngFile(binary.LittleEndian, 1)
		binary.LittleEndian.PutUint32(huge[4:], 0xfffffff0)
		if _, err := ReadFrames(bytes.NewReader(huge)); err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("huge block: %v", err)
		}
	})
}
