package nat

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/testutil"
)

// fibSrcRes is bpf/test/nat_rewrite.c's struct nat_fib_src_res.
type fibSrcRes struct {
	RC, Ifindex uint32
	Src         [4]byte
	MasqRC      uint32
	Masq        [4]byte
}

// xdpMD is struct xdp_md as BPF_PROG_TEST_RUN takes it (the frame's
// bounds, and the device it arrives on).
type xdpMD struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// TestFIBSourceForMasquerade: on this kernel bpf_fib_lookup with
// BPF_FIB_LOOKUP_SRC (Linux 6.7+) gives, for a packet to be forwarded, the
// egress device and a source address that follows the device's addresses
// as they change, with no help from user space; where the route has a
// preferred source it gives that, and MASQUERADE's address (the egress
// device's for the next hop) is the source of a second lookup, of the next
// hop from the egress device.
func TestFIBSourceForMasquerade(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetNS(t)
	ip := func(args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if out, err := ns.Exec(ctx, args[0], args[1:]...); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	for _, c := range [][]string{
		{"sysctl", "-qw", "net.ipv4.ip_forward=1"},
		{"sysctl", "-qw", "net.ipv4.conf.all.promote_secondaries=1"},
		{"ip", "link", "add", "in0", "type", "veth", "peer", "name", "in0p"},
		{"ip", "link", "add", "out0", "type", "veth", "peer", "name", "out0p"},
		{"ip", "link", "set", "in0", "up"}, {"ip", "link", "set", "in0p", "up"},
		{"ip", "link", "set", "out0", "up"}, {"ip", "link", "set", "out0p", "up"},
		{"sysctl", "-qw", "net.ipv4.conf.out0.promote_secondaries=1"},
		{"ip", "addr", "add", "10.220.1.1/24", "dev", "in0"},
		{"ip", "addr", "add", "10.220.2.1/24", "dev", "out0"},
		{"ip", "addr", "add", "10.220.2.5/24", "dev", "out0"}, // a secondary
		{"ip", "route", "add", "default", "via", "10.220.2.254", "dev", "out0"},
	} {
		ip(c...)
	}
	var in, out int
	err := ns.Do(func() error {
		a, err := net.InterfaceByName("in0")
		if err != nil {
			return err
		}
		b, err := net.InterfaceByName("out0")
		in, out = a.Index, b.Index
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var objs natrwObjects
	if err := loadNatrwObjects(&objs, nil); err != nil {
		t.Fatalf("loading the harness: %+v", err)
	}
	defer objs.Close()
	frame := (&packet.Packet{Src: netip.MustParseAddr("10.220.1.2"), Dst: netip.MustParseAddr("192.0.2.9"), Proto: 17,
		SPort: 4000, DPort: 53}).Bytes()
	lookup := func() fibSrcRes {
		t.Helper()
		err := ns.Do(func() error {
			_, err := objs.NatFibSrcTest.Run(&ebpf.RunOptions{Data: frame,
				Context: xdpMD{DataEnd: uint32(len(frame)), IngressIfindex: uint32(in)}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		var res fibSrcRes
		if err := objs.NatFibSrc.Lookup(uint32(0), &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	want := func(src, masq string) {
		t.Helper()
		res := lookup()
		got, gotMasq := netip.AddrFrom4(res.Src), netip.AddrFrom4(res.Masq)
		if res.RC != 0 || int(res.Ifindex) != out || got.String() != src || res.MasqRC != 0 || gotMasq.String() != masq {
			t.Fatalf("bpf_fib_lookup(SRC): rc %d, egress %d, source %s, the next hop's %s (rc %d); "+
				"want rc 0, egress %d (out0), source %s, the next hop's %s",
				res.RC, res.Ifindex, got, gotMasq, res.MasqRC, out, src, masq)
		}
	}
	want("10.220.2.1", "10.220.2.1") // the primary address, not the secondary
	ip("ip", "addr", "del", "10.220.2.1/24", "dev", "out0")
	want("10.220.2.5", "10.220.2.5") // the secondary, promoted
	ip("ip", "addr", "add", "10.220.2.9/24", "dev", "out0")
	want("10.220.2.5", "10.220.2.5")
	// A route's preferred source (src) is what the FIB gives; the kernel's
	// MASQUERADE picks the device's address for the next hop instead
	// (nf_nat_masquerade_ipv4: inet_select_addr; checked by hand with
	// iptables on this kernel): the second lookup, of the next hop from
	// the egress device, gives that (docs/nat.md).
	ip("ip", "route", "replace", "default", "via", "10.220.2.254", "dev", "out0", "src", "10.220.2.9")
	want("10.220.2.9", "10.220.2.5")
}
