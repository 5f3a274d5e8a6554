package datapath

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
)

// FwdReason is enum fw_fwd_reason (bpf/types.h): how a packet FORWARD
// accepted was delivered, by the XDP fast path (bpf/lib/fwd.h) or by the
// kernel, and why. Keep both in order.
type FwdReason uint8

const (
	FwdXDP         FwdReason = iota // forwarded in XDP (redirect)
	FwdStack                        // `load --forward stack`
	FwdNoNeigh                      // next hop's neighbour unresolved
	FwdTTL                          // TTL / hop limit <= 1
	FwdMTU                          // bigger than the route's MTU
	FwdIPOptions                    // IPv4 options, IPv6 hop-by-hop header
	FwdNotAttached                  // egress device runs no xdpfw
	FwdVLAN                         // tagged frame
	FwdUnrouted                     // blackhole, unreachable, prohibit, tunnel route
	FwdFrag                         // a fragment
	FwdNotHost                      // frame not addressed to the ingress MAC
	FwdMartian                      // an address the kernel does not forward
	FwdHairpin                      // egress device = ingress device
	FwdTrim                         // padding could not be trimmed
	FwdKernelNAT                    // the kernel's conntrack translates the connection
	FwdKernelCT                     // no answer came back untranslated yet: the kernel forwards it
	FwdPPPoE                        // a ppp device's PPPoE session XDP cannot send on (docs/pppoe.md)
	NumFwdReasons
)

var fwdNames = [NumFwdReasons]string{"xdp", "stack", "no-neighbour", "ttl", "mtu", "ip-options", "not-attached",
	"vlan", "unrouted", "fragment", "not-for-host", "martian", "hairpin", "trim", "kernel-nat", "kernel-ct",
	"pppoe"}

// String is the reason's name in status, stats and metrics.
func (r FwdReason) String() string {
	if r < NumFwdReasons {
		return fwdNames[r]
	}
	return fmt.Sprintf("fwd%d", uint8(r))
}

// ForwardMode is how packets FORWARD accepts are delivered.
type ForwardMode string

const (
	// ForwardXDP: by the fast path in XDP (bpf/lib/fwd.h), the kernel
	// for what it cannot do exactly as the kernel would, and for what
	// comes in or goes out by a veth device. The default.
	ForwardXDP ForwardMode = "xdp"
	// ForwardXDPVeth: ForwardXDP through veth devices too. A veth's
	// peer must send finished checksums (XDP sees no checksum offload
	// state: `ethtool -K PEER tx off`) and receive frames redirected to
	// it (natively attached XDP delivers them only to a peer with an XDP
	// program or GRO on).
	ForwardXDPVeth ForwardMode = "xdp-veth"
	// ForwardStack: by the kernel's forwarding (XDP_PASS).
	ForwardStack ForwardMode = "stack"
)

// ParseForwardMode checks a --forward value.
func ParseForwardMode(s string) (ForwardMode, error) {
	switch m := ForwardMode(s); m {
	case ForwardXDP, ForwardXDPVeth, ForwardStack:
		return m, nil
	}
	return "", fmt.Errorf("--forward %q: want xdp (the XDP fast path), xdp-veth (through veth devices too) or stack (the kernel forwards)", s)
}

// ErrNoFastPath: the program in force predates the forwarding fast path
// (until the next load).
var ErrNoFastPath = errors.New("the program in force has no forwarding fast path (an earlier version's: `xdpfw load` again)")

// FastPathDevices are the devices the fast path may use in mode m, in and
// out, of those xdpfw is attached to (ifindex: attach mode). A program in
// generic mode redirects through the stack (dev_queue_xmit), which every
// device takes as from any other sender; one in native mode hands the
// frame to the egress driver's ndo_xdp_xmit, which generic-mode devices
// may lack and where a veth loses checksum offload state and needs its
// peer ready (docs/forward.md). So: all the devices when every one runs
// in generic mode; else the native ones, veth devices only with
// ForwardXDPVeth. None with ForwardStack.
func FastPathDevices(m ForwardMode, devs map[int]Mode) []int {
	if m == ForwardStack {
		return nil
	}
	allGeneric := true
	for _, mode := range devs {
		allGeneric = allGeneric && mode == ModeGeneric
	}
	var out []int
	for i, mode := range devs {
		switch {
		case allGeneric:
		case mode != ModeNative:
			continue
		case m != ForwardXDPVeth:
			if l, err := netlink.LinkByIndex(i); err != nil || l.Type() == "veth" {
				continue
			}
		}
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// SetForwardPorts makes fw_fwd_ports hold exactly the devices ifindexes:
// those the fast path may use, in and out.
func (d *Datapath) SetForwardPorts(ifindexes []int) error {
	if d.fwdPorts == nil {
		return nil // an earlier version's program, without the fast path
	}
	cur, err := d.ForwardPorts()
	if err != nil {
		return err
	}
	for _, i := range ifindexes {
		if err := d.fwdPorts.Put(uint32(i), uint32(i)); err != nil {
			return fmt.Errorf("adding device %d to fw_fwd_ports: %w", i, err)
		}
	}
	for _, i := range cur {
		if !slices.Contains(ifindexes, i) {
			if err := d.fwdPorts.Delete(uint32(i)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("removing device %d from fw_fwd_ports: %w", i, err)
			}
		}
	}
	return nil
}

// removeForwardPort takes ifindex out of the pinned fw_fwd_ports in dir,
// if there.
func removeForwardPort(dir string, ifindex int) {
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, "fw_fwd_ports"), nil)
	if err != nil {
		return // none pinned: no fast path
	}
	defer m.Close()
	_ = m.Delete(uint32(ifindex)) // gone already (the kernel removes devices that go)
}

// ForwardPorts lists the ifindexes the fast path may redirect to.
func (d *Datapath) ForwardPorts() ([]int, error) {
	if d.fwdPorts == nil {
		return nil, ErrNoFastPath
	}
	var out []int
	var k, v uint32
	it := d.fwdPorts.Iterate()
	for it.Next(&k, &v) {
		out = append(out, int(k))
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading fw_fwd_ports: %w", err)
	}
	return out, nil
}

// ForwardCounters reads the packets FORWARD accepted by delivery.
func (d *Datapath) ForwardCounters() ([NumFwdReasons]Counter, error) {
	var out [NumFwdReasons]Counter
	if d.fwdStats == nil {
		return out, ErrNoFastPath
	}
	slots, err := readSlots(d.fwdStats, uint32(NumFwdReasons))
	if err != nil {
		return out, fmt.Errorf("reading fw_fwd_stats: %w", err)
	}
	clk := d.clock()
	for r := range out {
		out[r] = clk.sum(slots[r])
	}
	return out, nil
}
