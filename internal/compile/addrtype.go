package compile

import (
	"net/netip"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// AddrRoute is one route of the host's local routing table (table 255:
// its local, broadcast and anycast addresses), as -m addrtype reads it.
// The data plane's fw_addrtypes holds these (datapath.SetAddrTypes).
type AddrRoute struct {
	Prefix  netip.Prefix
	Type    uint8  // Linux's route type: bit Type of a rules.Addr* mask
	Ifindex uint32 // the route's device
	Dev     string // its name, for the reference matcher
}

// AddrTable is the local routing table: what -m addrtype decides on.
type AddrTable []AddrRoute

// route is the longest route of t for a (of a's family), or nil.
func (t AddrTable) route(a netip.Addr) *AddrRoute {
	var best *AddrRoute
	for i := range t {
		r := &t[i]
		if r.Prefix.Addr().Is4() == a.Is4() && r.Prefix.Contains(a) && (best == nil || r.Prefix.Bits() > best.Prefix.Bits()) {
			best = r
		}
	}
	return best
}

// TypeOK is the kernel's xt_addrtype test of address a against type mask,
// limited to the device on says a route is on (nil: not limited). The twin
// of lib/addrtype.h fw_addrtype_ok. IPv4 (inet_dev_addr_type): 0.0.0.0/8
// and 255.255.255.255 are BROADCAST, 224.0.0.0/4 MULTICAST, else the type of
// the local table's longest route (on the device, if limited), else
// UNICAST; the mask must hold it. IPv6 (match_type6): each type of the
// mask is a condition: MULTICAST ff00::/8; UNICAST neither that, nor ::,
// nor IPv4-mapped; UNSPEC ::; and when LOCAL or ANYCAST is named, the
// local table's route is one of those named (a local one on the device,
// if limited). UNREACHABLE is refused in IPv6 rules (rules.checkAddrType).
func (t AddrTable) TypeOK(a netip.Addr, mask uint16, on func(*AddrRoute) bool) bool {
	if a.Is4() {
		b := a.As4()
		typ := uint8(1) // RTN_UNICAST
		switch r := t.route(a); {
		case b[0] == 0 || b == [4]byte{255, 255, 255, 255}:
			typ = 3 // RTN_BROADCAST
		case b[0]>>4 == 0xe:
			typ = 5 // RTN_MULTICAST
		case r != nil && (on == nil || on(r)):
			typ = r.Type
		}
		return mask&(1<<typ) != 0
	}
	b := a.As16()
	mc, any := b[0] == 0xff, b == [16]byte{}
	mapped := [12]byte(b[:12]) == [12]byte{10: 0xff, 11: 0xff}
	switch {
	case mask&rules.AddrMulticast != 0 && !mc,
		mask&rules.AddrUnicast != 0 && (mc || any || mapped),
		mask&rules.AddrUnspec != 0 && !any:
		return false
	case mask&(rules.AddrLocal|rules.AddrAnycast) == 0:
		return true
	}
	var ret uint16
	if r := t.route(a); r != nil {
		switch {
		case r.Type == 2 && (on == nil || on(r)): // RTN_LOCAL
			ret = rules.AddrLocal
		case r.Type == 4: // RTN_ANYCAST
			ret = rules.AddrAnycast
		}
	}
	return mask&ret != 0
}
