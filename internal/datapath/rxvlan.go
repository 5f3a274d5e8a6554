package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// A NIC with rx VLAN offload strips the outer VLAN tag into the packet's
// metadata before XDP runs, so the frame XDP sees is untagged. Where the
// driver hands that tag to XDP (the XDP RX metadata kfunc
// bpf_xdp_metadata_rx_vlan_tag, Linux 6.8+), the interface runs
// xdpfw_rxvlan (bpf/xdp_fw.c) in front of xdpfw_ingress: a program that
// calls a metadata kfunc must be bound to its device at load, so it is
// loaded once per such interface; it is small, and tail-calls the one
// shared xdpfw_ingress, which a device-bound program may do since Linux
// 6.16 (commit 714070c4cb7a; before, its load fails and the interface
// runs xdpfw_ingress alone, with the VLAN caveat). docs/vlan.md.

// rxvlanProgName is the device-bound entry's name (at most 15 bytes).
const rxvlanProgName = "xdpfw_rxvlan"

// The netdev generic netlink family (include/uapi/linux/netdev.h, Linux 6.3+).
const (
	netdevCmdDevGet                 = 1 // NETDEV_CMD_DEV_GET
	netdevADevIfindex               = 1 // NETDEV_A_DEV_IFINDEX
	netdevADevXDPRXMetadataFeatures = 5 // NETDEV_A_DEV_XDP_RX_METADATA_FEATURES (u64)
	netdevXDPRXMetadataVLANTag      = 4 // NETDEV_XDP_RX_METADATA_VLAN_TAG (Linux 6.8+)
)

// DriverVLANMetadata says whether the driver of the interface with
// ifindex (this network namespace) hands XDP the VLAN tags it strips: the
// netdev family's xdp-rx-metadata-features has vlan-tag (the device has
// xdp_metadata_ops with xmo_rx_vlan_tag).
func DriverVLANMetadata(ifindex int) (bool, error) {
	fam, err := netlink.GenlFamilyGet("netdev")
	if err != nil {
		return false, fmt.Errorf("the netdev generic netlink family (Linux 6.3+): %w", err)
	}
	req := nl.NewNetlinkRequest(int(fam.ID), 0)
	req.AddData(genlHeader{netdevCmdDevGet, 1})
	req.AddData(nl.NewRtAttr(netdevADevIfindex, nl.Uint32Attr(uint32(ifindex))))
	msgs, err := req.Execute(unix.NETLINK_GENERIC, 0)
	if err != nil {
		return false, fmt.Errorf("netdev dev-get of ifindex %d: %w", ifindex, err)
	}
	for _, m := range msgs {
		if len(m) < nl.SizeofGenlmsg {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[nl.SizeofGenlmsg:])
		if err != nil {
			return false, fmt.Errorf("netdev dev-get of ifindex %d: %w", ifindex, err)
		}
		for _, a := range attrs {
			if a.Attr.Type == netdevADevXDPRXMetadataFeatures && len(a.Value) == 8 {
				return nl.NativeEndian().Uint64(a.Value)&netdevXDPRXMetadataVLANTag != 0, nil
			}
		}
	}
	return false, nil
}

// genlHeader is a genlmsghdr: command, version, two reserved bytes (zero;
// nl.Genlmsg serializes 4 bytes of its 2-byte struct).
type genlHeader [4]byte

func (h genlHeader) Len() int          { return len(h) }
func (h genlHeader) Serialize() []byte { return h[:] }

// loadRXVLAN loads xdpfw_rxvlan bound to the interface with ifindex,
// sharing this program's stages and hand-over slot.
func (d *Datapath) loadRXVLAN(ifindex int) (*ebpf.Program, error) {
	if d.rxvlan == nil || d.stages == nil || d.handoff == nil {
		return nil, errors.New("no xdpfw_rxvlan in this build")
	}
	ps := d.rxvlan.Copy()
	ps.Ifindex = uint32(ifindex)
	ps.Flags |= unix.BPF_F_XDP_DEV_BOUND_ONLY
	for sym, m := range map[string]*ebpf.Map{"fw_xdp_stages": d.stages, "fw_xdp_handoff": d.handoff} {
		if err := ps.Instructions.AssociateMap(sym, m); err != nil {
			return nil, fmt.Errorf("xdpfw_rxvlan: %w", err)
		}
	}
	prog, err := ebpf.NewProgram(ps)
	if err != nil {
		return nil, fmt.Errorf("loading xdpfw_rxvlan for ifindex %d: %w", ifindex, err)
	}
	return prog, nil
}

// entryFor is the program the interface nl runs in mode: xdpfw_rxvlan
// bound to it where the driver hands XDP the VLAN tags it strips (native
// mode only: a device-bound program cannot run in generic mode) and the
// kernel loads it, xdpfw_ingress otherwise. done releases what entryFor
// loaded (the link holds it once attached).
func (d *Datapath) entryFor(nl netlink.Link, mode Mode) (prog *ebpf.Program, done func()) {
	if mode != ModeNative {
		return d.prog, func() {}
	}
	idx := nl.Attrs().Index
	if ok, err := DriverVLANMetadata(idx); err != nil || !ok {
		return d.prog, func() {}
	}
	p, err := d.loadRXVLAN(idx)
	if err != nil {
		return d.prog, func() {}
	}
	return p, func() { p.Close() }
}

// VLANReader is xdpfw_rxvlan as it runs on an interface.
type VLANReader struct {
	ID uint32 `json:"program_id"` // xdpfw_rxvlan's, bound to the interface
	// Next is the program it jumps to (slot 1 of its fw_xdp_stages): the
	// loaded xdpfw_ingress (0: none, so it drops every packet).
	Next uint32 `json:"next_program_id"`
}

// vlanReaderOf is the xdpfw_rxvlan nl runs (nil: none).
func vlanReaderOf(nl netlink.Link) *VLANReader {
	x := nl.Attrs().Xdp
	if x == nil || !x.Attached || x.ProgId == 0 {
		return nil
	}
	p, err := ebpf.NewProgramFromID(ebpf.ProgramID(x.ProgId))
	if err != nil {
		return nil
	}
	defer p.Close()
	info, err := p.Info()
	if err != nil || info.Name != rxvlanProgName {
		return nil
	}
	r := &VLANReader{ID: x.ProgId}
	ids, _ := info.MapIDs()
	for _, id := range ids {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			continue
		}
		var next uint32
		if m.Type() == ebpf.ProgramArray && m.Lookup(uint32(1), &next) == nil {
			r.Next = next
		}
		m.Close()
	}
	return r
}

// ReadsVLANMetadata says whether the interface nl runs xdpfw_rxvlan: XDP
// reads the VLAN tags its NIC strips.
func ReadsVLANMetadata(nl netlink.Link) bool { return vlanReaderOf(nl) != nil }
