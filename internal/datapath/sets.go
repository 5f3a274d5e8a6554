package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
)

// Named sets live in one LPM trie, fw_sets, keyed by (set id, prefix), so a
// rule's set test is one lookup whatever the set's size.

func setKey(id uint32, p netip.Prefix) xdpfwFwSetKey {
	k := xdpfwFwSetKey{Prefixlen: uint32(32 + p.Bits()), SetId: htonl(id)}
	a := p.Addr().AsSlice()
	copy(k.Addr[:], a)
	return k
}

// SetAdd inserts prefixes into set id (batched; existing ones are kept).
func (d *Datapath) SetAdd(id uint32, prefixes []netip.Prefix) error {
	const batch = 8192
	one := uint8(1)
	for off := 0; off < len(prefixes); off += batch {
		end := min(off+batch, len(prefixes))
		keys := make([]xdpfwFwSetKey, end-off)
		vals := make([]uint8, end-off)
		for i := range keys {
			keys[i], vals[i] = setKey(id, prefixes[off+i]), one
		}
		if _, err := d.sets.BatchUpdate(keys, vals, nil); err != nil {
			for i := range keys {
				if err := d.sets.Put(&keys[i], &one); err != nil {
					return fmt.Errorf("adding %s: %w", prefixes[off+i], err)
				}
			}
		}
	}
	return nil
}

// SetDel removes prefixes from set id; missing ones are reported.
func (d *Datapath) SetDel(id uint32, prefixes []netip.Prefix) error {
	var missing []string
	for _, p := range prefixes {
		k := setKey(id, p)
		if err := d.sets.Delete(&k); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				missing = append(missing, p.String())
				continue
			}
			return fmt.Errorf("deleting %s: %w", p, err)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("not in the set: %v", missing)
	}
	return nil
}

// SetList returns the prefixes of set id (v6: whether its family is IPv6).
func (d *Datapath) SetList(id uint32, v6 bool) ([]netip.Prefix, error) {
	var out []netip.Prefix
	var k xdpfwFwSetKey
	var v uint8
	it := d.sets.Iterate()
	for it.Next(&k, &v) {
		if setID(&k) != id {
			continue
		}
		bits := int(k.Prefixlen) - 32
		var a netip.Addr
		if v6 {
			a = netip.AddrFrom16(k.Addr)
		} else {
			a = netip.AddrFrom4([4]byte(k.Addr[:4]))
		}
		out = append(out, netip.PrefixFrom(a, bits))
	}
	return out, it.Err()
}

// SetFlush removes every prefix of set id.
func (d *Datapath) SetFlush(id uint32) (int, error) {
	var keys []xdpfwFwSetKey
	var k xdpfwFwSetKey
	var v uint8
	it := d.sets.Iterate()
	for it.Next(&k, &v) {
		if setID(&k) == id {
			keys = append(keys, k)
		}
	}
	if err := it.Err(); err != nil {
		return 0, err
	}
	for i := range keys {
		if err := d.sets.Delete(&keys[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return i, err
		}
	}
	return len(keys), nil
}

func setID(k *xdpfwFwSetKey) uint32 { return htonl(k.SetId) }

// htonl converts between host order and the big-endian set id in the key
// (big-endian so the id leads the LPM key's bit string); its own inverse.
func htonl(v uint32) uint32 { return ne.Uint32(binary.BigEndian.AppendUint32(nil, v)) }
