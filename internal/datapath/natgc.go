package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// The bindings of a connection go with its conntrack entry (docs/nat.md,
// "The life of a translated connection"): when conntrack's GC (CTGC, or
// CTFlush) removes an entry, natUnbind removes the bindings of its two
// directions. Bounded: at most two lookups and four deletes per entry
// removed. A binding whose entry went another way (the LRU evicted it) is
// found stale by the data plane on its next new connection
// (bpf/lib/natfw.h fw_nat_life_out), or goes when the bindings' LRU needs
// its room.

// natSwap16 turns a host-order port into the network-order field of
// struct fw_nat_tuple (and back).
func natSwap16(v uint16) uint16 { return v>>8 | v<<8 }

// natDirections are the tuples of both directions of the IPv4
// connection k, as fw_nat_key4 makes them (an ICMP query's id as both
// ports: conntrack's key has it so too).
func natDirections(k *xdpfwFwCtKey) [2]xdpfwFwNatTuple {
	a, b := uint32(k.A[0]), uint32(k.B[0]) // the address's bytes as on the wire
	return [2]xdpfwFwNatTuple{
		{Saddr: a, Daddr: b, Sport: natSwap16(k.Pa), Dport: natSwap16(k.Pb), Proto: k.Proto},
		{Saddr: b, Daddr: a, Sport: natSwap16(k.Pb), Dport: natSwap16(k.Pa), Proto: k.Proto},
	}
}

// natUnbind removes the bindings of the connections keys, whose conntrack
// entries are gone (vals: those entries, or nil): for each direction's
// tuple, its binding and, when it points back, the other direction's (a
// tuple claimed since by another connection keeps its binding). Where the
// original direction's binding is gone already (the bindings' LRU: no
// longer read for a connection whose entry keeps its source translation,
// bpf/lib/natct.h), the entry's copy stands for it, so that its answers'
// binding does not outlive it holding the port. A key whose conntrack
// entry is back (a new connection of the same tuple since) is left alone.
// Returns how many bindings it removed.
func (d *Datapath) natUnbind(keys []xdpfwFwCtKey, vals []xdpfwFwCtEntry) (int, error) {
	if d.natBinds == nil || d.natBinds.MaxEntries() <= 1 { // --nat kernel: no bindings
		return 0, nil
	}
	n := 0
	del := func(k *xdpfwFwNatTuple) error {
		err := d.natBinds.Delete(k)
		if err == nil {
			n++
		}
		if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("removing a nat binding: %w", err)
		}
		return nil
	}
	var ct xdpfwFwCtEntry
	for i := range keys {
		k := &keys[i]
		if k.Family != 4 || d.ct.Lookup(k, &ct) == nil {
			continue
		}
		for dir, t := range natDirections(k) {
			var v xdpfwFwNatRw
			if err := d.natBinds.Lookup(&t, &v); err != nil {
				if i >= len(vals) || !natKeptFor(&vals[i], dir) {
					continue
				}
				v = xdpfwFwNatRw{Saddr: vals[i].NatSaddr, Daddr: t.Daddr, Sport: vals[i].NatSport, Dport: t.Dport}
			}
			back := xdpfwFwNatTuple{Saddr: v.Daddr, Daddr: v.Saddr, Sport: v.Dport, Dport: v.Sport, Proto: t.Proto}
			var bv xdpfwFwNatRw
			if d.natBinds.Lookup(&back, &bv) == nil && bv == (xdpfwFwNatRw{Saddr: t.Daddr, Daddr: t.Saddr, Sport: t.Dport, Dport: t.Sport}) {
				if err := del(&back); err != nil {
					return n, err
				}
			}
			if err := del(&t); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// natKeptFor: does conntrack entry v keep the source translation
// (bpf/lib/natct.h) of its direction dir (natDirections: 0 from endpoint
// a, 1 from b), its original one?
func natKeptFor(v *xdpfwFwCtEntry, dir int) bool {
	return v.NatSaddr != 0 && (v.Flags&ctfOrigA != 0) == (dir == 0)
}
