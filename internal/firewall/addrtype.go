package firewall

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// LocalRoutes reads this host's local routing table (table 255, both
// families): its local, broadcast and anycast addresses, which -m addrtype
// decides on as the kernel's xt_addrtype does. Of two routes of one
// prefix (one address on two devices) the first the kernel lists is kept,
// as its lookup finds it first.
func LocalRoutes() ([]compile.AddrRoute, error) {
	var out []compile.AddrRoute
	seen := map[netip.Prefix]bool{}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		list, err := netlink.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_LOCAL}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return nil, fmt.Errorf("reading the local routing table (for -m addrtype): %w", err)
		}
		for _, r := range list {
			if r.Dst == nil || r.Type < 0 || r.Type >= rules.NumAddrTypes {
				continue
			}
			pfx, ok := netip.AddrFromSlice(r.Dst.IP)
			if !ok {
				continue
			}
			if fam == netlink.FAMILY_V4 {
				pfx = pfx.Unmap()
			}
			bits, _ := r.Dst.Mask.Size()
			p := netip.PrefixFrom(pfx, bits).Masked()
			if seen[p] {
				continue
			}
			seen[p] = true
			idx := r.LinkIndex
			if idx == 0 && len(r.MultiPath) > 0 {
				idx = r.MultiPath[0].LinkIndex
			}
			ar := compile.AddrRoute{Prefix: p, Type: uint8(r.Type), Ifindex: uint32(idx)}
			if l, err := net.InterfaceByIndex(idx); err == nil {
				ar.Dev = l.Name
			}
			out = append(out, ar)
		}
	}
	return out, nil
}

// usesAddrType reports whether a rule of rs has -m addrtype.
func usesAddrType(rs []rules.Rule) bool {
	for i := range rs {
		if rs[i].Match.AddrType != nil {
			return true
		}
	}
	return false
}

// refreshAddrTypes writes the local routing table into the data plane
// (datapath.SetAddrTypes). It fails only where it matters: when rs has a
// rule with -m addrtype, which would otherwise decide on a stale table.
func refreshAddrTypes(dp *datapath.Datapath, rs []rules.Rule) error {
	routes, err := LocalRoutes()
	if err == nil {
		err = dp.SetAddrTypes(routes)
	}
	if err != nil && usesAddrType(rs) {
		return err
	}
	return refreshNATIfAddrs(dp)
}

// IfaceAddrs gives each interface with an IPv4 address its primary one:
// the first that is not secondary, as the kernel's REDIRECT picks
// (nf_nat_redirect_ipv4).
func IfaceAddrs() (map[uint32]netip.Addr, error) {
	list, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("reading the interfaces' addresses (for REDIRECT): %w", err)
	}
	out := map[uint32]netip.Addr{}
	for _, a := range list {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || a.Flags&unix.IFA_F_SECONDARY != 0 {
			continue
		}
		if _, seen := out[uint32(a.LinkIndex)]; !seen {
			out[uint32(a.LinkIndex)] = ip.Unmap()
		}
	}
	return out, nil
}

// VLANDevs gives each VLAN device of the host by its VID and lower
// device: the device a frame tagged so that comes in by the lower one
// reaches IP on (vlan_do_receive).
func VLANDevs() (map[datapath.VLANDev]uint32, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("reading the interfaces (for VLAN devices): %w", err)
	}
	out := map[datapath.VLANDev]uint32{}
	for _, l := range links {
		if v, ok := l.(*netlink.Vlan); ok && v.ParentIndex > 0 {
			out[datapath.VLANDev{Lower: uint32(v.ParentIndex), VID: uint16(v.VlanId)}] = uint32(v.Index)
		}
	}
	return out, nil
}

// refreshNATIfAddrs writes REDIRECT's table of the interfaces' addresses
// (datapath.SetNATIfAddrs) and of the VLAN devices (datapath.SetVLANDevs:
// a tagged frame's REDIRECT takes its VLAN device's address) where the
// program translates (--nat xdpfw): with them, a REDIRECT's first packet
// on an interface without an address is dropped, never passed
// untranslated.
func refreshNATIfAddrs(dp *datapath.Datapath) error {
	if !dp.Limits().NAT {
		return nil
	}
	addrs, err := IfaceAddrs()
	if err != nil {
		return err
	}
	vlans, err := VLANDevs()
	if err != nil {
		return err
	}
	if err := dp.SetVLANDevs(vlans); err != nil {
		return err
	}
	return dp.SetNATIfAddrs(addrs)
}

// RefreshAddrTypes brings the data plane's copy of the local routing
// table up to date (the daemon calls it when the kernel's changes), with
// no lock: it changes no rule, and the last writer writes the table as it
// is then.
func RefreshAddrTypes(p Paths) error {
	dp, err := datapath.Open(p.PinDir)
	if err != nil {
		return err
	}
	defer dp.Close()
	routes, err := LocalRoutes()
	if err != nil {
		return err
	}
	if err := dp.SetAddrTypes(routes); err != nil {
		return err
	}
	return refreshNATIfAddrs(dp)
}
