package datapath

import "fmt"

// VLANDev is a VLAN device as the data plane finds it (fw_vlan_devs,
// bpf/lib/vlandev.h): the tag's VID over the device the frame comes in by
// (the VLAN device's lower device).
type VLANDev struct {
	Lower uint32 // ifindex of the device under the VLAN device
	VID   uint16
}

// key is the map's key: VID << 32 | lower ifindex.
func (v VLANDev) key() uint64 { return uint64(v.VID)<<32 | uint64(v.Lower) }

// SetVLANDevs makes fw_vlan_devs hold devs (each tag's VLAN device
// ifindex): stale entries removed, new and changed ones written.
func (d *Datapath) SetVLANDevs(devs map[VLANDev]uint32) error {
	if d.vlanDevs == nil { // pins of an earlier version, whose program reads no such table
		return nil
	}
	want := make(map[uint64]uint32, len(devs))
	for v, ifindex := range devs {
		want[v.key()] = ifindex
	}
	if len(want) > int(d.vlanDevs.MaxEntries()) {
		return fmt.Errorf("%d VLAN devices; the data plane's table holds %d", len(want), d.vlanDevs.MaxEntries())
	}
	return syncMap(d.vlanDevs, want, "the VLAN device table", func(k uint64) string {
		return fmt.Sprintf("VLAN %d over interface %d", k>>32, uint32(k))
	})
}
