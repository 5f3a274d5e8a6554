// Package nat is the Go side of xdpfw's address translation (docs/nat.md):
// Rewrite4, the twin of the data plane's rewrite of a packet
// (bpf/lib/nat.h fw_nat_rewrite4), which its tests hold the BPF code to.
package nat

import (
	"encoding/binary"
	"errors"
	"net/netip"

	"github.com/xdpfw/xdpfw/internal/packet"
)

// Rw is a rewrite: the addresses and ports an IPv4 packet is to carry
// (ICMP echo: the id, as a request's source port and a reply's
// destination port). The same layout as the data plane's struct
// fw_nat_rw, in host order here.
type Rw struct {
	Src, Dst     netip.Addr
	SPort, DPort uint16
}

// ErrRefused is what Rewrite4 returns where fw_nat_rewrite4 refuses: a
// truncated header, a later fragment (a first fragment is rewritten as a
// whole packet).
var ErrRefused = errors.New("nat: cannot rewrite this packet")

// Rewrite4 rewrites the IPv4 packet ip (from its header to the end of the
// frame) in place as fw_nat_rewrite4 does, recomputing the checksums in
// full (RFC 1071): the reference the incremental updates must agree with
// (a checksum may differ in its representation of zero, 0x0000 or 0xffff,
// both of which verify; a UDP checksum of 0 stays 0).
func Rewrite4(ip []byte, rw Rw) error {
	if len(ip) < 20 || ip[0]>>4 != 4 || ip[0]&0xf < 5 || len(ip) < int(ip[0]&0xf)*4 {
		return ErrRefused
	}
	if binary.BigEndian.Uint16(ip[6:])&0x1fff != 0 {
		return ErrRefused
	}
	hl := int(ip[0]&0xf) * 4
	l4 := ip[hl:]
	s, d := rw.Src.As4(), rw.Dst.As4()
	var sp, dp, check int = -1, -1, -1
	pseudo := false
	switch ip[9] {
	case 6:
		if len(l4) < 20 {
			return ErrRefused
		}
		sp, dp, check, pseudo = 0, 2, 16, true
	case 17:
		if len(l4) < 8 {
			return ErrRefused
		}
		sp, dp = 0, 2
		if binary.BigEndian.Uint16(l4[6:]) != 0 {
			check, pseudo = 6, true
		}
	case 1:
		if len(l4) < 8 {
			return ErrRefused
		}
		check = 2
		switch l4[0] {
		case 8:
			sp = 4
		case 0:
			dp = 4
		}
	}
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])
	if sp >= 0 {
		binary.BigEndian.PutUint16(l4[sp:], rw.SPort)
	}
	if dp >= 0 {
		binary.BigEndian.PutUint16(l4[dp:], rw.DPort)
	}
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], packet.Checksum(ip[:hl]))
	if check >= 0 {
		l4[check], l4[check+1] = 0, 0
		c := packet.Checksum(l4)
		if pseudo {
			c = packet.L4Checksum(rw.Src, rw.Dst, ip[9], l4)
		}
		if ip[9] == 17 && c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(l4[check:], c)
	}
	return nil
}
