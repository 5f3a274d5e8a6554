package datapath_test

import (
	"net"
	"runtime"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/testutil"
)

// TestCheckDevice: a veth in native mode whose peer (in another network
// namespace) runs no XDP program drops XDP_TX frames, so REJECT would
// answer nothing: CheckDevice names the peer and the remedy; not once the
// peer runs an XDP_PASS program, nor in generic mode. A veth passes on VLAN
// tags its peer's sender keeps beside the frame: always said. A NIC's rx
// VLAN offload is read with ETHTOOL_GFLAGS (a veth reports it, on by
// default, and off after ethtool -K rxvlan off).
func TestCheckDevice(t *testing.T) {
	testutil.RequireRoot(t)
	a, b := testutil.NewNetNS(t), testutil.NewNetNS(t)
	testutil.VethPair(t, a, "dev0", nil, b, "peer0", nil)
	check := func(mode datapath.Mode) (c datapath.DeviceCaveats) {
		t.Helper()
		if err := a.Do(func() error { c = datapath.CheckDevice("dev0", mode); return nil }); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := check(datapath.ModeNative)
	if want := "peer peer0 (network namespace " + b.Name + ") runs no XDP program"; !strings.Contains(c.Reject, want) ||
		!strings.Contains(c.Reject, "--mode generic") {
		t.Errorf("native, peer without XDP: Reject %q, want it to say %q and the remedy", c.Reject, want)
	}
	if !strings.Contains(c.VLAN, "txvlan off") {
		t.Errorf("veth: VLAN %q, want the peer's tx-vlan-offload named", c.VLAN)
	}
	if c := check(datapath.ModeGeneric); c.Reject != "" {
		t.Errorf("generic mode: Reject %q, want none", c.Reject)
	}

	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2 /* XDP_PASS */), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	var lk link.Link
	if err := b.Do(func() error {
		ifc, err := net.InterfaceByName("peer0")
		if err != nil {
			return err
		}
		lk, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifc.Index})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	if c := check(datapath.ModeNative); c.Reject != "" {
		t.Errorf("native, peer with XDP: Reject %q, want none", c.Reject)
	}

	for _, want := range []bool{true, false} {
		if !want {
			if out, err := a.Exec(t.Context(), "ethtool", "-K", "dev0", "rxvlan", "off"); err != nil {
				t.Fatalf("ethtool -K dev0 rxvlan off: %v: %s", err, out)
			}
		}
		var got bool
		if err := a.Do(func() (err error) { got, err = datapath.RXVLANOffload("dev0"); return err }); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("rx VLAN offload read %v, want %v", got, want)
		}
	}
}

// TestVethVLANBesideFrame: a tag the peer's sender puts in the packet's
// metadata (here a tc program on the peer's egress, bpf_skb_vlan_push, as a
// VLAN device over the peer does) reaches XDP beside the frame while the
// peer's tx-vlan-offload is on. In native mode the veth hands it to XDP
// (the XDP RX metadata kfunc): xdpfw_rxvlan runs there and --vlan-id and
// --vlan-prio (the whole TCI: the PCP too) match, with no caveat. In
// generic mode XDP cannot read it: the rule does not match, CheckDevice
// states the caveat and its remedy, and with the peer's tx-vlan-offload
// off the kernel writes the tag into the frame and the rule matches.
func TestVethVLANBesideFrame(t *testing.T) {
	f := newFixture(t)
	// Only the probe counts: the peer's own packets (IPv6 neighbour
	// discovery, MLD as the link comes up) get the tag too.
	// The tag carries PCP 5: a rule that wants PCP 4 never matches, the
	// PCP the NIC strips with the tag is seen as the one in the frame.
	f.installText("-A INPUT -s 10.1.2.3 -p udp --dport 53 -m vlan --vlan-id 5 --vlan-prio 4 -j ACCEPT\n" +
		"-A INPUT -s 10.1.2.3 -p udp --dport 53 -m vlan --vlan-id 5 --vlan-prio 5 -j ACCEPT\n" +
		"-A INPUT -s 10.1.2.3 -p udp --dport 53 -j ACCEPT\n" +
		"-t xdpfw-priority -A PRIORITY -p tcp --dport 9 -j HIGH\n")
	wrongPCP, vlanRule, plainRule := f.ids[0], f.ids[1], f.ids[2]
	peer := testutil.NewNetNS(t)
	fw, far := testutil.VethPair(t, f.ns, "fw0", nil, peer, "far0", nil)
	push, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{ // bpf_skb_vlan_push(skb, htons(ETH_P_8021Q), PCP 5 VID 5); return TC_ACT_OK
			asm.Mov.Imm(asm.R2, 0x0081),
			asm.Mov.Imm(asm.R3, 5<<13|5),
			asm.FnSkbVlanPush.Call(),
			asm.Mov.Imm(asm.R0, 0),
			asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer push.Close()
	var lk link.Link
	if err := peer.Do(func() (err error) {
		lk, err = link.AttachTCX(link.TCXOptions{Program: push, Attach: ebpf.AttachTCXEgress, Interface: far.Index})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer lk.Close()

	frame := v4pkt(17, "10.1.2.3", "10.9.9.9", 1, 53).Bytes()
	ids := []uint32{wrongPCP, vlanRule, plainRule}
	for _, mode := range []datapath.Mode{datapath.ModeNative, datapath.ModeGeneric} {
		var c datapath.DeviceCaveats
		var reads bool
		if err := f.ns.Do(func() error {
			if _, err := f.dp.Attach(fw.Name, mode); err != nil {
				return err
			}
			c = datapath.CheckDevice(fw.Name, mode)
			nl, err := netlink.LinkByName(fw.Name)
			reads = err == nil && datapath.ReadsVLANMetadata(nl)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		native := mode == datapath.ModeNative
		if reads != native {
			t.Errorf("%s mode: xdpfw_rxvlan runs: %v, want %v", mode, reads, native)
		}
		if native && c.VLAN != "" {
			t.Errorf("native mode: VLAN caveat %q, want none (XDP reads the tag)", c.VLAN)
		}
		if !native && (!strings.Contains(c.VLAN, "native mode only") || !strings.Contains(c.VLAN, "txvlan off")) {
			t.Errorf("generic mode: VLAN caveat %q, want why and the remedy", c.VLAN)
		}
		// Judged where it arrived, then (the priority table's policy:
		// BULK) on a bulk CPU, the stripped tag travelling as metadata.
		for _, cpus := range [][]int{nil, {1}} {
			if cpus != nil && runtime.NumCPU() < 2 {
				continue
			}
			if err := f.dp.SetPriority(cpus); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				txvlan string
				want   uint32
			}{{"on", map[bool]uint32{true: vlanRule, false: plainRule}[native]}, {"off", vlanRule}} {
				if out, err := peer.Exec(t.Context(), "ethtool", "-K", far.Name, "txvlan", tc.txvlan); err != nil {
					t.Fatalf("ethtool -K %s txvlan %s: %v: %s", far.Name, tc.txvlan, err, out)
				}
				before := snapshot(t, f.dp, ids)
				st0, err := f.dp.PriorityCounters()
				if err != nil {
					t.Fatal(err)
				}
				sendRawOnCPU(t, peer, far.Index, frame, 0)
				if got := waitCounted(t, f.dp, ids, before); got != tc.want {
					t.Errorf("%s mode, bulk CPUs %v, peer tx-vlan-offload %s: the frame tagged 5 by the peer's sender counted on rule id %d, want %d (vlan rule %d, plain %d)",
						mode, cpus, tc.txvlan, got, tc.want, vlanRule, plainRule)
				}
				st1, err := f.dp.PriorityCounters()
				if err != nil {
					t.Fatal(err)
				}
				// (the peer's own IPv6 packets may be handed over too)
				if handed := sum(diff(st0.Cpumap, st1.Cpumap)); (handed > 0) != (cpus != nil) {
					t.Errorf("%s mode, bulk CPUs %v: %d judged by xdpfw_cpumap", mode, cpus, handed)
				}
			}
		}
		if err := f.ns.Do(func() error { return f.dp.Detach(fw.Name) }); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDriverVLANMetadata: the netdev family says veth hands XDP the VLAN
// tag it keeps beside the frame (xmo_rx_vlan_tag), loopback not.
func TestDriverVLANMetadata(t *testing.T) {
	testutil.RequireRoot(t)
	a, b := testutil.NewNetNS(t), testutil.NewNetNS(t)
	dev, _ := testutil.VethPair(t, a, "dev0", nil, b, "peer0", nil)
	if err := a.Do(func() error {
		for _, c := range []struct {
			ifindex int
			want    bool
		}{{dev.Index, true}, {1, false}} {
			got, err := datapath.DriverVLANMetadata(c.ifindex)
			if err != nil {
				return err
			}
			if got != c.want {
				t.Errorf("ifindex %d: VLAN tag metadata %v, want %v", c.ifindex, got, c.want)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestRXVLANRefused: where the kernel refuses xdpfw_rxvlan (before Linux
// 6.16 a device-bound program may not tail-call), the interface runs
// xdpfw_ingress alone, and CheckDevice says why --vlan-id is blind there.
func TestRXVLANRefused(t *testing.T) {
	f := newFixture(t)
	datapath.WithoutRXVLAN(f.dp)
	peer := testutil.NewNetNS(t)
	fw, _ := testutil.VethPair(t, f.ns, "fw0", nil, peer, "far0", nil)
	if err := f.ns.Do(func() error {
		if _, err := f.dp.Attach(fw.Name, datapath.ModeNative); err != nil {
			return err
		}
		nl, err := netlink.LinkByName(fw.Name)
		if err != nil {
			return err
		}
		if datapath.ReadsVLANMetadata(nl) {
			t.Error("xdpfw_rxvlan runs though it could not be loaded")
		}
		if c := datapath.CheckDevice(fw.Name, datapath.ModeNative); !strings.Contains(c.VLAN, "Linux 6.16") {
			t.Errorf("VLAN caveat %q, want it to say the kernel is too old", c.VLAN)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
