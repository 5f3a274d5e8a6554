package datapath

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/testutil"
)

// TestNATUnbindOutput: the GC's removal of a nat OUTPUT connection's
// bindings (bpf/lib/natout.h) once its conntrack entry is gone: the
// connection's tuple to the translated one, the answers' back, and the
// mark of the translated tuple ({0}); a binding of another connection
// stays. And `status` never lists the mark.
func TestNATUnbindOutput(t *testing.T) {
	testutil.RequireRoot(t)
	var ctKey xdpfwFwCtKey
	var ctEntry xdpfwFwCtEntry
	ct, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: uint32(binary.Size(ctKey)),
		ValueSize: uint32(binary.Size(ctEntry)), MaxEntries: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer ct.Close()
	binds, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: uint32(binary.Size(xdpfwFwNatTuple{})),
		ValueSize: uint32(binary.Size(xdpfwFwNatRw{})), MaxEntries: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer binds.Close()
	d := &Datapath{ct: ct, natBinds: binds}

	wire := func(s string) uint32 { // an address as struct fw_nat_tuple holds it
		b := netip.MustParseAddr(s).As4()
		return binary.NativeEndian.Uint32(b[:])
	}
	host, vip, server := wire("10.200.2.1"), wire("10.99.0.1"), wire("10.200.1.2")
	sport, vport, rport := natSwap16(40000), natSwap16(9090), natSwap16(8080)
	sent := xdpfwFwNatTuple{Saddr: host, Daddr: vip, Sport: sport, Dport: vport, Proto: 17}
	leaves := xdpfwFwNatRw{Saddr: host, Daddr: server, Sport: sport, Dport: rport}
	answer := xdpfwFwNatTuple{Saddr: server, Daddr: host, Sport: rport, Dport: sport, Proto: 17}
	back := xdpfwFwNatRw{Saddr: vip, Daddr: host, Sport: vport, Dport: sport}
	mark := xdpfwFwNatTuple{Saddr: host, Daddr: server, Sport: sport, Dport: rport, Proto: 17}
	other := xdpfwFwNatTuple{Saddr: host, Daddr: vip, Sport: natSwap16(40001), Dport: vport, Proto: 17}
	for _, e := range []struct {
		k xdpfwFwNatTuple
		v xdpfwFwNatRw
	}{{sent, leaves}, {answer, back}, {mark, xdpfwFwNatRw{}}, {other, xdpfwFwNatRw{Saddr: host, Daddr: server, Sport: other.Sport, Dport: rport}}} {
		if err := binds.Put(&e.k, &e.v); err != nil {
			t.Fatal(err)
		}
	}
	if bs, err := d.NATBindings(); err != nil || len(bs) != 3 {
		t.Errorf("NATBindings: %d (%v), want 3: the mark is not listed: %+v", len(bs), err, bs)
	}
	// the conntrack entry is the filter's tuple: the translated one
	key := xdpfwFwCtKey{A: [2]uint64{uint64(host)}, B: [2]uint64{uint64(server)}, Pa: 40000, Pb: 8080, Proto: 17, Family: 4}
	n, err := d.natUnbind([]xdpfwFwCtKey{key}, nil)
	if err != nil || n != 3 {
		t.Errorf("natUnbind: %d removed (%v), want 3", n, err)
	}
	var v xdpfwFwNatRw
	for _, k := range []xdpfwFwNatTuple{sent, answer, mark} {
		if binds.Lookup(&k, &v) == nil {
			t.Errorf("binding %+v left after its connection's entry went", k)
		}
	}
	if binds.Lookup(&other, &v) != nil {
		t.Errorf("another connection's binding removed")
	}
}
