package datapath_test

import (
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestNATRedirectVLAN: with --nat xdpfw, REDIRECT's address for a
// VLAN-tagged first packet is the primary address of the tag's VLAN
// device over the device it came in by (fw_vlan_devs, bpf/lib/vlandev.h),
// as the kernel's nf_nat_redirect_ipv4 takes the address of skb->dev,
// which vlan_do_receive made the VLAN device; an untagged one takes its
// device's own; a tag no VLAN device takes is dropped, counted no_local
// (the kernel drops such a frame). The VLAN device is made up: this VM's
// kernel has no 8021q, so the tables the control plane writes from
// netlink (firewall.VLANDevs, IfaceAddrs) are written here.
func TestNATRedirectVLAN(t *testing.T) {
	f := newFixtureLimits(t, datapath.Limits{NAT: true})
	f.installText("-A INPUT -m conntrack --ctstate ESTABLISHED -j ACCEPT\n-A INPUT -j ACCEPT\n-A FORWARD -j ACCEPT\n") // NAT binds tracked connections
	nat, err := rules.Parse("nat", []byte("-t nat -A PREROUTING -p tcp --dport 80 -j REDIRECT --to-ports 8080\n"),
		rules.ParseOptions{NAT: true})
	if err != nil {
		t.Fatal(err)
	}
	lim := f.dp.Limits()
	nt, _, err := compile.CompileNAT(nat.NAT, compile.Input{Ifaces: f.ifaces, HostIfaces: f.ifaces,
		MaxEntries: lim.Entries, MaxNodes: lim.Nodes, MaxLeafSlots: lim.LeafSlots})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ns.Do(func() error { return f.dp.StartNAT(nt, nat.NAT) }); err != nil {
		t.Fatal(err)
	}
	eth0 := f.ifaces["eth0"]
	const vlanDev = 4000 // a made-up VLAN device eth0.7
	if err := f.dp.SetNATIfAddrs(map[uint32]netip.Addr{eth0: netip.MustParseAddr("10.200.0.1"),
		vlanDev: netip.MustParseAddr("10.207.0.1")}); err != nil {
		t.Fatal(err)
	}
	if err := f.dp.SetVLANDevs(map[datapath.VLANDev]uint32{{Lower: eth0, VID: 7}: vlanDev}); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		what  string
		vlans []uint16
		want  string // the destination it leaves PREROUTING with; "": dropped
	}{
		{"untagged", nil, "10.200.0.1"},
		{"VLAN 7", []uint16{7}, "10.207.0.1"},
		{"VLAN 8, no device", []uint16{8}, ""},
		{"VLAN 7 again", []uint16{7}, "10.207.0.1"},
	} {
		p := v4pkt(packet.ProtoTCP, "10.200.0.2", "10.200.9.9", uint16(40000+i), 80)
		p.VLANs = c.vlans
		frame := p.Bytes()
		out := make([]byte, len(frame)+256)
		before, _, err := f.dp.NATCounters()
		if err != nil {
			t.Fatal(err)
		}
		var ret uint32
		var run *ebpf.RunOptions
		err = f.ns.Do(func() error {
			run = &ebpf.RunOptions{Data: frame, DataOut: out, Context: xdpCtx{DataEnd: uint32(len(frame)), IngressIfindex: eth0}}
			ret, err = f.dp.Program().Run(run)
			return err
		})
		if err != nil {
			t.Fatalf("%s: BPF_PROG_TEST_RUN: %v", c.what, err)
		}
		after, _, err := f.dp.NATCounters()
		if err != nil {
			t.Fatal(err)
		}
		if c.want == "" {
			if ret != datapath.XDPDrop || after.NoLocal.Packets != before.NoLocal.Packets+1 {
				t.Errorf("%s: XDP action %d, no_local %d -> %d; want dropped, counted no_local", c.what, ret, before.NoLocal.Packets, after.NoLocal.Packets)
			}
			continue
		}
		got, err := packet.Decode(run.DataOut)
		if err != nil {
			t.Fatalf("%s: the frame out: %v", c.what, err)
		}
		if ret != datapath.XDPPass || got.Dst != netip.MustParseAddr(c.want) || got.DPort != 8080 {
			t.Errorf("%s: XDP action %d, the frame out goes to %s:%d; want passed, to %s:8080", c.what, ret, got.Dst, got.DPort, c.want)
		}
	}
}
