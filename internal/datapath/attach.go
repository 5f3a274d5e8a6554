package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// Mode is an XDP attach mode.
type Mode string

const (
	ModeAuto    Mode = "auto"    // native, falling back to generic
	ModeNative  Mode = "native"  // in the driver (XDP_FLAGS_DRV_MODE)
	ModeGeneric Mode = "generic" // in the stack, any device (XDP_FLAGS_SKB_MODE)
	ModeOffload Mode = "offload" // on the NIC (XDP_FLAGS_HW_MODE)
)

// ParseMode validates a --mode value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAuto, ModeNative, ModeGeneric, ModeOffload:
		return m, nil
	}
	return "", fmt.Errorf("unknown mode %q (want native, generic, offload or auto)", rules.Clip(s))
}

func linkPin(dir, iface string) string     { return filepath.Join(dir, "link_xdp_"+iface) }
func egressPinOf(dir, iface string) string { return filepath.Join(dir, "link_tc_"+iface) }

// TCAttachEnv chooses how the egress program is attached: "tcx" (a pinned
// bpf_link, Linux 6.6+), "clsact" (a direct-action filter in the clsact
// qdisc, any kernel since 4.5) or "auto"/"" (tcx where the kernel has it,
// clsact otherwise).
const TCAttachEnv = "XDPFW_TC_ATTACH"

// clsactHandle / clsactPrio identify xdpfw's filter in a clsact qdisc.
const (
	clsactPrio   = 0xfe01
	clsactHandle = 0x78 // "x"
)

func clsactFilter(index, fd int) *netlink.BpfFilter {
	return &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: index, Parent: netlink.HANDLE_MIN_EGRESS,
			Handle: netlink.MakeHandle(0, clsactHandle), Protocol: unix.ETH_P_ALL, Priority: clsactPrio},
		Fd: fd, Name: "xdpfw_egress", DirectAction: true,
	}
}

// attachClsact puts the egress program in iface's clsact qdisc (created if
// missing), replacing xdpfw's filter there if one is.
func (d *Datapath) attachClsact(iface string, index int) error {
	q := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: index, Handle: netlink.MakeHandle(0xffff, 0),
		Parent: netlink.HANDLE_CLSACT}, QdiscType: "clsact"}
	if err := netlink.QdiscAdd(q); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("adding a clsact qdisc to %s: %w", iface, err)
	}
	if err := netlink.FilterReplace(clsactFilter(index, d.egress.FD())); err != nil {
		return fmt.Errorf("attaching the OUTPUT chain (clsact egress filter) to %s: %w", iface, err)
	}
	return nil
}

// detachClsact removes xdpfw's clsact filter from iface, if there is one.
func detachClsact(iface string) {
	if l, err := netlink.LinkByName(iface); err == nil {
		_ = netlink.FilterDel(clsactFilter(l.Attrs().Index, -1))
	}
}

// attachEgress attaches the tc egress program (the OUTPUT chain) to iface:
// with tcx, pinning the link (or moving an existing link to this program),
// or with a clsact filter where the kernel has no tcx (see TCAttachEnv).
func (d *Datapath) attachEgress(iface string, index int) error {
	how := os.Getenv(TCAttachEnv)
	switch how {
	case "", "auto", "tcx":
	case "clsact":
		return d.attachClsact(iface, index)
	default:
		return fmt.Errorf("%s=%q: want tcx, clsact or auto", TCAttachEnv, how)
	}
	pin := egressPinOf(d.dir, iface)
	if l := ownLink(d.dir, pin, index, "tc egress"); l != nil {
		defer l.Close()
		if err := l.Update(d.egress); err != nil {
			return fmt.Errorf("updating the tc egress link on %s: %w", iface, err)
		}
		return nil
	}
	l, err := link.AttachTCX(link.TCXOptions{Program: d.egress, Attach: ebpf.AttachTCXEgress, Interface: index})
	if err != nil {
		if errors.Is(err, ebpf.ErrNotSupported) && how != "tcx" {
			return d.attachClsact(iface, index) // a kernel before 6.6
		}
		return fmt.Errorf("attaching the OUTPUT chain (tc egress) to %s: %w", iface, err)
	}
	defer l.Close()
	if err := l.Pin(pin); err != nil {
		return fmt.Errorf("pinning the tc egress link of %s: %w", iface, err)
	}
	return nil
}

// loadLiveLink opens the link pinned at pin if it is attached to the
// interface with index now. A link severed from its interface (the
// interface was deleted, perhaps re-created since under the same name with
// another index) filters nothing and cannot be updated: its pin is
// removed, and nil returned, so that the caller attaches afresh. nil too
// when nothing is pinned there.
func loadLiveLink(pin string, index int) link.Link {
	l, err := link.LoadPinnedLink(pin, nil)
	if err != nil {
		return nil
	}
	if linkIfindex(l) == index {
		return l
	}
	_ = l.Unpin()
	l.Close()
	return nil
}

// ownLink opens xdpfw's link of hook ("xdp" or "tc egress") attached to
// the interface with index: the one pinned at pin (loadLiveLink), or else
// one the kernel runs there unpinned (Discover), which it pins at pin: the
// bpffs was unmounted while something kept it alive, so the link still
// filters but its pin was lost; a new bpffs is populated again this way.
// nil when xdpfw has no link there.
func ownLink(dir, pin string, index int, hook string) link.Link {
	if l := loadLiveLink(pin, index); l != nil {
		return l
	}
	rs, _ := Discover(dir)
	for _, r := range rs {
		if r.Ifindex != index || r.Hook != hook || r.Pinned {
			continue
		}
		l, err := link.NewFromID(link.ID(r.LinkID))
		if err != nil {
			continue
		}
		if err := l.Pin(pin); err != nil {
			l.Close()
			continue
		}
		return l
	}
	return nil
}

// linkIfindex is the interface an XDP or tcx link is attached to (0:
// severed, or not such a link).
func linkIfindex(l link.Link) int {
	info, err := l.Info()
	if err != nil {
		return 0
	}
	if x := info.XDP(); x != nil {
		return int(x.Ifindex)
	}
	if x := info.TCX(); x != nil {
		return int(x.Ifindex)
	}
	return 0
}

// Attach attaches the program to iface in the given mode (behind
// xdpfw_rxvlan where the NIC hands XDP the VLAN tags it strips: rxvlan.go)
// and pins the link, so it stays attached after the process exits. If xdpfw is already attached
// there, the link is updated to the current program atomically; asking for
// another mode than the one in effect is an error (changing it would leave
// the interface unfiltered for a moment: detach first). A link severed from
// the interface (deleted and re-created) is replaced by a new one. Returns
// the mode in effect.
func (d *Datapath) Attach(iface string, mode Mode) (Mode, error) {
	nl, err := netlink.LinkByName(iface)
	if err != nil {
		return "", fmt.Errorf("interface %s: %w", iface, err)
	}
	pin := linkPin(d.dir, iface)
	if l := ownLink(d.dir, pin, nl.Attrs().Index, "xdp"); l != nil {
		defer l.Close()
		cur := CurrentMode(iface)
		if mode != ModeAuto && cur != "" && cur != mode {
			return "", fmt.Errorf("xdpfw is attached to %s in %s mode; to use %s mode, detach it first", iface, cur, mode)
		}
		prog, done := d.entryFor(nl, cur)
		defer done()
		if err := l.Update(prog); err != nil {
			return "", fmt.Errorf("updating the XDP link on %s: %w", iface, err)
		}
		if err := d.attachEgress(iface, nl.Attrs().Index); err != nil {
			return "", err
		}
		return CurrentMode(iface), nil
	}
	tries := []Mode{mode}
	if mode == ModeAuto {
		tries = []Mode{ModeNative, ModeGeneric}
	}
	var errs []string
	for _, m := range tries {
		prog, done := d.entryFor(nl, m)
		l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: nl.Attrs().Index, Flags: modeFlags(m)})
		done()
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", m, err))
			continue
		}
		defer l.Close()
		if err := l.Pin(pin); err != nil {
			return "", fmt.Errorf("pinning the XDP link of %s: %w", iface, err)
		}
		if err := d.attachEgress(iface, nl.Attrs().Index); err != nil {
			_ = l.Unpin()
			return "", err
		}
		return m, nil
	}
	hint := ""
	if mode == ModeOffload {
		hint = " (offload needs a NIC that runs BPF, e.g. Netronome; this program uses helpers such as the FIB lookup that offload does not support, so use native or generic)"
	}
	return "", fmt.Errorf("attaching XDP to %s failed: %s%s", iface, strings.Join(errs, "; "), hint)
}

func modeFlags(m Mode) link.XDPAttachFlags {
	switch m {
	case ModeNative:
		return link.XDPDriverMode
	case ModeGeneric:
		return link.XDPGenericMode
	case ModeOffload:
		return link.XDPOffloadMode
	}
	return 0
}

// Detach removes xdpfw from iface (unpins and closes its link).
func (d *Datapath) Detach(iface string) error { return DetachPinned(d.dir, iface) }

// DetachPinned detaches the pinned links (XDP and tc egress) of iface in dir.
func DetachPinned(dir, iface string) error {
	if nl, err := netlink.LinkByName(iface); err == nil { // else gone, and out of the map with it
		removeForwardPort(dir, nl.Attrs().Index)
	}
	if l, err := link.LoadPinnedLink(egressPinOf(dir, iface), nil); err == nil {
		_ = l.Unpin()
		_ = l.Detach() // as below
		l.Close()
	}
	detachClsact(iface)
	pin := linkPin(dir, iface)
	l, err := link.LoadPinnedLink(pin, nil)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("xdpfw is not attached to %s", iface)
		}
		return fmt.Errorf("opening the link of %s: %w", iface, err)
	}
	defer l.Close()
	if err := l.Unpin(); err != nil {
		return err
	}
	// Detach explicitly: closing the last reference would do, but the
	// link may be pinned elsewhere too (a bpffs unmounted while something
	// kept it alive, whose link load took over: ownLink).
	_ = l.Detach()
	return l.Close()
}

// AttachedInterfaces lists the interfaces with a pinned xdpfw link in dir.
func AttachedInterfaces(dir string) []string {
	var out []string
	for _, pin := range pinsWithPrefix(dir, "link_xdp_") {
		out = append(out, strings.TrimPrefix(pin, "link_xdp_"))
	}
	return out
}

// IfaceState is what the kernel says of xdpfw on an interface: what
// packets arriving there see.
type IfaceState struct {
	Index int  `json:"ifindex"` // the interface's index now (0: there is no such interface)
	Mode  Mode `json:"mode"`    // the XDP mode in effect there ("": no XDP program)
	// Filtering: xdpfw's XDP link is attached to this interface (not to
	// an interface of this name deleted since).
	Filtering bool `json:"filtering"`
	// Problem says why not, or what else is wrong (the OUTPUT chain's
	// link severed).
	Problem string `json:"problem,omitempty"`
	// Warnings are the device's caveats the rules in force run into
	// (DeviceCaveats; filled by the firewall, which knows the rules).
	Warnings []string `json:"warnings,omitempty"`
	// VLANReader: the interface runs xdpfw_rxvlan, which reads the VLAN
	// tags its NIC strips and jumps to the program (rxvlan.go).
	VLANReader *VLANReader `json:"vlan_reader,omitempty"`
}

// InterfaceState asks the kernel whether xdpfw's links pinned in dir
// filter iface.
func InterfaceState(dir, iface string) IfaceState {
	var s IfaceState
	nl, err := netlink.LinkByName(iface)
	if err != nil {
		s.Problem = "the interface does not exist (deleted?): the daemon attaches it again when it is back, or xdpfw load"
		return s
	}
	s.Index, s.Mode = nl.Attrs().Index, CurrentMode(iface)
	l, err := link.LoadPinnedLink(linkPin(dir, iface), nil)
	if err != nil {
		s.Problem = "no xdpfw link pinned for it (" + err.Error() + ")"
		rs, _ := Discover(dir)
		for _, r := range rs {
			if r.Ifindex == s.Index && r.Hook == "xdp" {
				s.Filtering = true
				s.Problem = "xdpfw filters it, but its link is not pinned in " + dir + " (was the bpffs unmounted?): xdpfw load pins it again"
			}
		}
		return s
	}
	defer l.Close()
	if idx := linkIfindex(l); idx != s.Index {
		s.Problem = "the link is severed (the interface was deleted and created again, or the link detached): xdpfw load repairs it; the daemon does by itself"
		return s
	}
	s.Filtering = true
	s.VLANReader = vlanReaderOf(nl)
	if e, err := link.LoadPinnedLink(egressPinOf(dir, iface), nil); err == nil {
		if linkIfindex(e) != s.Index {
			s.Problem = "the OUTPUT chain's tc link is severed: xdpfw load repairs it"
		}
		e.Close()
	}
	return s
}

// CurrentMode asks the kernel (netlink) which XDP mode is active on iface.
func CurrentMode(iface string) Mode {
	nl, err := netlink.LinkByName(iface)
	if err != nil || nl.Attrs().Xdp == nil || !nl.Attrs().Xdp.Attached {
		return ""
	}
	switch nl.Attrs().Xdp.AttachMode {
	case 1: // XDP_ATTACHED_DRV
		return ModeNative
	case 2: // XDP_ATTACHED_SKB
		return ModeGeneric
	case 3: // XDP_ATTACHED_HW
		return ModeOffload
	}
	return Mode(fmt.Sprintf("mode%d", nl.Attrs().Xdp.AttachMode))
}

// RestorePinned puts iface's links back on the programs pinned in d's
// directory, the firewall in force before d's load, which failed after it
// switched iface to d's program (firewall's undo): the XDP link on the
// pinned xdpfw_ingress, the OUTPUT chain (tcx link or clsact filter) on
// the pinned xdpfw_egress. A link that runs them already is left alone.
// An XDP link that runs neither d's program nor the pinned one runs an
// xdpfw_rxvlan (bound to the interface): d's, jumping to d's program,
// cannot go back, the earlier one's being gone with the switch; it is
// left as it is, an error naming it.
func (d *Datapath) RestorePinned(iface string) error {
	dir := d.dir
	nl, err := netlink.LinkByName(iface)
	if err != nil {
		return nil // gone: nothing filters there
	}
	idx := nl.Attrs().Index
	open := func(name string) (*ebpf.Program, ebpf.ProgramID, error) {
		p, err := ebpf.LoadPinnedProgram(filepath.Join(dir, name), nil)
		if err != nil {
			return nil, 0, fmt.Errorf("opening the pinned program %s: %w", name, err)
		}
		id, err := progID(p)
		if err != nil {
			p.Close()
			return nil, 0, err
		}
		return p, id, nil
	}
	runs := func(l link.Link) ebpf.ProgramID {
		info, err := l.Info()
		if err != nil {
			return 0
		}
		return info.Program
	}
	if l := loadLiveLink(linkPin(dir, iface), idx); l != nil {
		defer l.Close()
		ingress, id, err := open(progPin)
		if err != nil {
			return err
		}
		defer ingress.Close()
		if now := runs(l); now != id {
			if mine, err := progID(d.prog); err != nil || now != mine {
				return fmt.Errorf("%s runs a VLAN reader (xdpfw_rxvlan, bound to it), which cannot be put back on the program in force "+
					"where this load replaced it: left as it is, until the next load", iface)
			}
			if err := l.Update(ingress); err != nil {
				return fmt.Errorf("putting the XDP link on %s back on the program in force: %w", iface, err)
			}
		}
	}
	egress, id, err := open(egressPin)
	if err != nil {
		return err
	}
	defer egress.Close()
	if l := loadLiveLink(egressPinOf(dir, iface), idx); l != nil {
		defer l.Close()
		if runs(l) != id {
			if err := l.Update(egress); err != nil {
				return fmt.Errorf("putting the tc egress link on %s back on the program in force: %w", iface, err)
			}
		}
		return nil
	}
	fs, err := netlink.FilterList(nl, netlink.HANDLE_MIN_EGRESS)
	if err != nil {
		return nil // no clsact qdisc: no filter of xdpfw's
	}
	for _, f := range fs {
		if a := f.Attrs(); a.Handle == netlink.MakeHandle(0, clsactHandle) && a.Priority == clsactPrio {
			if err := netlink.FilterReplace(clsactFilter(idx, egress.FD())); err != nil {
				return fmt.Errorf("putting the clsact egress filter on %s back on the program in force: %w", iface, err)
			}
		}
	}
	return nil
}
