package packet

import (
	"encoding/binary"
	"net/netip"
)

// sum16 adds data to the running one's complement sum s as big-endian 16-bit
// words (an odd trailing byte is padded with zero).
func sum16(s uint32, data []byte) uint32 {
	for len(data) >= 2 {
		s += uint32(binary.BigEndian.Uint16(data))
		data = data[2:]
	}
	if len(data) == 1 {
		s += uint32(data[0]) << 8
	}
	return s
}

// fold folds the running sum to 16 bits and returns its one's complement:
// the value to store in a checksum field.
func fold(s uint32) uint16 {
	for s > 0xffff {
		s = (s >> 16) + (s & 0xffff)
	}
	return ^uint16(s)
}

// Checksum returns the Internet checksum (RFC 1071) of data.
func Checksum(data []byte) uint16 {
	return fold(sum16(0, data))
}

// pseudoSum returns the running sum of the IPv4 or IPv6 pseudo-header for an
// upper-layer segment of length n with protocol proto.
func pseudoSum(src, dst netip.Addr, proto uint8, n int) uint32 {
	var s uint32
	if src.Is4() {
		a, b := src.As4(), dst.As4()
		s = sum16(s, a[:])
		s = sum16(s, b[:])
	} else {
		a, b := src.As16(), dst.As16()
		s = sum16(s, a[:])
		s = sum16(s, b[:])
	}
	s += uint32(proto)
	s += uint32(n>>16) + uint32(n&0xffff)
	return s
}

// L4Checksum returns the checksum of an upper-layer segment including the
// pseudo-header for src/dst (TCP, UDP, ICMPv6). The checksum field inside seg
// must be zero for the result to be the value to store, or hold the stored
// value for the result to be 0 when it is correct.
func L4Checksum(src, dst netip.Addr, proto uint8, seg []byte) uint16 {
	return fold(sum16(pseudoSum(src, dst, proto, len(seg)), seg))
}
