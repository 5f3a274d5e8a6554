package datapath

import (
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
)

// Config is the data-plane settings map.
type Config struct {
	MalformedAction compile.Action
}

// SetConfig writes the settings map.
func (d *Datapath) SetConfig(c Config) error {
	v := xdpfwFwConfig{}
	if c.MalformedAction == compile.ActAccept {
		v.MalformedPass = 1
	}
	if err := d.config.Put(uint32(0), &v); err != nil {
		return fmt.Errorf("writing fw_config_map: %w", err)
	}
	return nil
}

// Install makes t the active generation: a fresh inner map is filled
// completely, then swapped into fw_ruleset slot 0 in one update. Packets
// already in flight finish on the old table (RCU); no packet sees a mix.
func (d *Datapath) Install(t *compile.Tables) error {
	n := len(t.Entries)
	if n == 0 {
		return fmt.Errorf("refusing to install an empty generation")
	}
	if n > compile.MaxEntries {
		return fmt.Errorf("generation has %d entries, the data plane holds %d", n, compile.MaxEntries)
	}
	spec := d.inner.Copy()
	spec.Name = "fw_entries"
	spec.MaxEntries = uint32(n)
	inner, err := ebpf.NewMap(spec)
	if err != nil {
		return fmt.Errorf("creating a generation map of %d entries: %w", n, err)
	}
	defer inner.Close()

	keys := make([]uint32, n)
	vals := make([]xdpfwFwEntry, n)
	for i := range t.Entries {
		keys[i] = uint32(i)
		vals[i] = toBPF(&t.Entries[i])
	}
	if _, err := inner.BatchUpdate(keys, vals, nil); err != nil {
		// older kernels: one by one
		for i := range keys {
			if err := inner.Put(keys[i], &vals[i]); err != nil {
				return fmt.Errorf("filling the generation map: %w", err)
			}
		}
	}
	if err := d.ruleset.Put(uint32(0), inner); err != nil {
		return fmt.Errorf("swapping in the new generation: %w", err)
	}
	return nil
}

// Installed reports whether a generation is installed.
func (d *Datapath) Installed() bool {
	var id ebpf.MapID
	return d.ruleset.Lookup(uint32(0), &id) == nil && id != 0
}

func toBPF(e *compile.Entry) xdpfwFwEntry {
	return xdpfwFwEntry{
		Src:      words(e.Src),
		SrcMask:  words(e.SrcMask),
		Dst:      words(e.Dst),
		DstMask:  words(e.DstMask),
		Match:    e.Match,
		Invert:   e.Invert,
		Ifindex:  e.Ifindex,
		RuleId:   e.RuleID,
		SportLo:  e.SPortLo,
		SportHi:  e.SPortHi,
		DportLo:  e.DPortLo,
		DportHi:  e.DPortHi,
		SrcMac:   e.SrcMAC,
		DstMac:   e.DstMAC,
		VlanId:   e.VLAN,
		Chain:    uint8(e.Chain),
		Family:   uint8(e.Family),
		Proto:    e.Proto,
		TcpMask:  e.TCPMask,
		TcpCmp:   e.TCPCmp,
		IcmpType: e.ICMPType,
		IcmpCode: e.ICMPCode,
		Action:   uint8(e.Action),
		Reason:   uint8(e.Reason),
	}
}

// words reinterprets 16 bytes in memory order as two host-endian u64, which
// is how the data plane compares them against packet bytes.
func words(b [16]byte) [2]uint64 {
	return [2]uint64{ne.Uint64(b[0:8]), ne.Uint64(b[8:16])}
}
