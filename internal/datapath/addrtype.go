package datapath

import (
	"errors"
	"fmt"

	"github.com/xdpfw/xdpfw/internal/compile"
)

// SetAddrTypes makes fw_addrtypes, the local routing table -m addrtype
// reads (lib/addrtype.h), hold routes: stale routes are removed, new and
// changed ones written, so a packet meets either the old or the new answer
// for each address, never none. IPv4 and IPv6 routes are keyed as fw_sets
// keys with the family as the set id.
func (d *Datapath) SetAddrTypes(routes []compile.AddrRoute) error {
	if d.addrTyp == nil {
		return errors.New("this program has no address-type table (loaded by an earlier xdpfw version): load again")
	}
	want := make(map[xdpfwFwSetKey]xdpfwFwAddrtype, len(routes))
	for _, r := range routes {
		fam := uint32(6)
		if r.Prefix.Addr().Is4() {
			fam = 4
		}
		want[setKey(fam, r.Prefix.Masked())] = xdpfwFwAddrtype{Ifindex: r.Ifindex, Type: r.Type}
	}
	if len(want) > int(d.addrTyp.MaxEntries()) {
		return fmt.Errorf("the local routing table has %d routes; -m addrtype's table holds %d", len(want), d.addrTyp.MaxEntries())
	}
	return syncMap(d.addrTyp, want, "address-type table", func(k xdpfwFwSetKey) string { return keyPrefix(&k, k.SetId != htonl(4)).String() })
}

// AddrTypes lists what fw_addrtypes holds.
func (d *Datapath) AddrTypes() ([]compile.AddrRoute, error) {
	if d.addrTyp == nil {
		return nil, nil
	}
	var (
		k   xdpfwFwSetKey
		v   xdpfwFwAddrtype
		out []compile.AddrRoute
	)
	it := d.addrTyp.Iterate()
	for it.Next(&k, &v) {
		out = append(out, compile.AddrRoute{Prefix: keyPrefix(&k, k.SetId != htonl(4)), Type: v.Type, Ifindex: v.Ifindex})
	}
	return out, it.Err()
}
