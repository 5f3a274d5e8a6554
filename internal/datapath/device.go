package datapath

import (
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// DeviceCaveats are what a device does that some rules cannot live with
// in XDP ("": nothing of the kind). The firewall turns them into warnings
// when the rules in force need what is missing (docs/reject.md, "veth and
// native mode"; README, "VLAN tags and NIC offloads").
type DeviceCaveats struct {
	// Reject: XDP_TX frames are dropped here, so REJECT answers nothing
	// (a veth in native mode whose peer runs no XDP program: the kernel
	// hands a veth's XDP_TX frames to the peer's XDP receive queue, which
	// exists only while the peer runs XDP).
	Reject string
	// VLAN: VLAN tags do not reach XDP in the frame, so --vlan-id cannot
	// match (a NIC with rx-vlan-hw-parse on strips them into the packet's
	// metadata; a veth passes on a tag its peer's sender put there), and
	// XDP does not read them from there (xdpfw_rxvlan: rxvlan.go).
	VLAN string
}

// CheckDevice reports iface's caveats when xdpfw runs there in mode. No
// VLAN caveat where xdpfw_rxvlan runs: XDP reads the stripped tags.
func CheckDevice(iface string, mode Mode) DeviceCaveats {
	var c DeviceCaveats
	nl, err := netlink.LinkByName(iface)
	if err != nil {
		return c
	}
	reads := ReadsVLANMetadata(nl)
	if nl.Type() == "veth" {
		if !reads {
			c.VLAN = fmt.Sprintf("%s is a veth: a tag its peer's sender (a VLAN device over the peer, whose tx-vlan-offload "+
				"is on by default) puts beside the frame stays there, and --vlan-id cannot see it (%s); turn it off on "+
				"the peer (ethtool -K PEER txvlan off) if tagged traffic comes that way", iface, whyNoVLANMetadata(nl, mode))
		}
		if mode == ModeNative {
			c.Reject = vethReject(iface, nl)
		}
		return c
	}
	if on, err := rxVLANOffload(iface); err == nil && on && !reads {
		c.VLAN = fmt.Sprintf("%s strips VLAN tags in hardware (rx-vlan-hw-parse on): XDP sees untagged frames, "+
			"so --vlan-id never matches there (%s); turn it off: ethtool -K %s rxvlan off", iface,
			whyNoVLANMetadata(nl, mode), iface)
	}
	return c
}

// whyNoVLANMetadata says why XDP does not read the VLAN tags nl strips
// through the XDP RX metadata kfunc (xdpfw_rxvlan does not run there).
func whyNoVLANMetadata(nl netlink.Link, mode Mode) string {
	if mode != ModeNative {
		return "XDP reads stripped tags in native mode only"
	}
	if ok, err := DriverVLANMetadata(nl.Attrs().Index); err != nil || !ok {
		return "its driver does not hand them to XDP: no vlan-tag XDP RX metadata"
	}
	return "xdpfw's device-bound reader of them, " + rxvlanProgName + ", does not run there: it needs Linux 6.16+; " +
		"`xdpfw load` attaches it where it can"
}

// vethReject is the Reject caveat of veth nl in native mode: none when its
// peer runs an XDP program.
func vethReject(iface string, nl netlink.Link) string {
	remedy := "attach an XDP program to the peer (xdpfw itself, or any that returns XDP_PASS) or load with --mode generic"
	a := nl.Attrs()
	peer, where := vethPeer(a.ParentIndex, a.NetNsID)
	if peer == nil {
		return fmt.Sprintf("%s is a veth in native mode and its peer (ifindex %d%s) could not be checked: unless the peer "+
			"runs an XDP program, the kernel drops XDP_TX frames, so REJECT answers nothing (it drops); %s",
			iface, a.ParentIndex, where, remedy)
	}
	if x := peer.Attrs().Xdp; x != nil && x.Attached {
		return ""
	}
	return fmt.Sprintf("%s is a veth in native mode and its peer %s%s runs no XDP program: the kernel drops XDP_TX "+
		"frames, so REJECT answers nothing (it drops); %s", iface, peer.Attrs().Name, where, remedy)
}

// vethPeer finds the peer of a veth: ifindex in this network namespace
// (nsid < 0), or in the namespace this one knows by nsid, looked for among
// the named namespaces (/run/netns) and those of processes. It returns
// the peer (nil if not found) and a note on where it is.
func vethPeer(ifindex, nsid int) (netlink.Link, string) {
	if nsid < 0 {
		l, err := netlink.LinkByIndex(ifindex)
		if err != nil {
			return nil, ""
		}
		return l, ""
	}
	where := " in another network namespace"
	paths, _ := filepath.Glob("/run/netns/*")
	procs, _ := filepath.Glob("/proc/[0-9]*/ns/net")
	seen := map[uint64]bool{}
	for _, p := range append(paths, procs...) {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil || seen[st.Ino] {
			unix.Close(fd)
			continue
		}
		seen[st.Ino] = true
		if id, err := netlink.GetNetNsIdByFd(fd); err != nil || id != nsid {
			unix.Close(fd)
			continue
		}
		h, err := netlink.NewHandleAt(netns.NsHandle(fd))
		unix.Close(fd)
		if err != nil {
			return nil, where
		}
		defer h.Close()
		if filepath.Dir(p) == "/run/netns" {
			where = " (network namespace " + filepath.Base(p) + ")"
		}
		l, err := h.LinkByIndex(ifindex)
		if err != nil {
			return nil, where
		}
		return l, where
	}
	return nil, where
}

// rxVLANOffload reads whether iface strips received VLAN tags in hardware
// (the ethtool feature rx-vlan-hw-parse, ETH_FLAG_RXVLAN of ETHTOOL_GFLAGS).
func rxVLANOffload(iface string) (bool, error) {
	flags, err := ethtoolFlags(iface)
	return flags&ethFlagRXVLAN != 0, err
}

// ethFlagRXVLAN is ETH_FLAG_RXVLAN (linux/ethtool.h).
const ethFlagRXVLAN = 1 << 8

// ethtoolFlags is ETHTOOL_GFLAGS of iface (this network namespace).
func ethtoolFlags(iface string) (uint32, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	val := struct{ cmd, data uint32 }{cmd: unix.ETHTOOL_GFLAGS}
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data unsafe.Pointer
		_    [24 - unsafe.Sizeof(uintptr(0))]byte
	}
	copy(ifr.name[:unix.IFNAMSIZ-1], iface)
	ifr.data = unsafe.Pointer(&val)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); e != 0 {
		return 0, os.NewSyscallError("ioctl ETHTOOL_GFLAGS "+iface, e)
	}
	return val.data, nil
}
