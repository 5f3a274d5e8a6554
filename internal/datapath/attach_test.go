package datapath_test

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/testutil"
)

// TestAttachModesAgree sends real frames over a veth pair (AF_PACKET on the
// far end) into the attached program, in native and in generic mode, each
// frame with and without 802.1Q / QinQ tags, and requires the rule the
// live program counted to be the rule BPF_PROG_TEST_RUN reports for the
// same frame. Offload needs a NIC that runs BPF; veth refuses it, which
// the test checks fails cleanly.
func TestAttachModesAgree(t *testing.T) {
	f := newFixture(t)
	f.installText(tableRules)
	peer, fw, far := f.peerPair()

	var frames []*packet.Packet
	for _, base := range verdictPackets() {
		for _, tags := range [][]uint16{nil, {42}, {7, 42}} {
			p := *base
			p.VLANs = append(append([]uint16(nil), tags...), base.VLANs...)
			if len(p.VLANs) > 2 {
				continue
			}
			frames = append(frames, &p)
		}
	}

	ids := append([]uint32{compile.PolicyID(0, false), compile.PolicyID(0, true)}, f.ids...)
	for _, mode := range []datapath.Mode{datapath.ModeNative, datapath.ModeGeneric} {
		t.Run(string(mode), func(t *testing.T) {
			var got datapath.Mode
			if err := f.ns.Do(func() (err error) { got, err = f.dp.Attach(fw.Name, mode); return }); err != nil {
				t.Fatalf("attach %s: %v", mode, err)
			}
			defer func() {
				if err := f.ns.Do(func() error { return f.dp.Detach(fw.Name) }); err != nil {
					t.Errorf("detach: %v", err)
				}
			}()
			if got != mode {
				t.Fatalf("attached in %s mode, asked for %s", got, mode)
			}
			for _, p := range frames {
				frame := p.Bytes()
				want := f.mustRun(frame, fw.Name)
				before := snapshot(t, f.dp, ids)
				sendRaw(t, peer, far.Index, frame)
				id := waitCounted(t, f.dp, ids, before)
				if id != want.RuleID {
					t.Errorf("%s mode: %s: live frame counted on rule id %d, test run says %d", mode, p, id, want.RuleID)
				}
			}
		})
	}

	t.Run("offload", func(t *testing.T) {
		err := f.ns.Do(func() error { _, err := f.dp.Attach(fw.Name, datapath.ModeOffload); return err })
		if err == nil {
			t.Fatal("offload on veth succeeded; expected the kernel to refuse it")
		}
		if len(datapath.AttachedInterfaces(f.dp.Dir())) != 0 {
			t.Fatal("a failed offload attach left a pinned link")
		}
	})
}

// verdictPackets are the untagged packets of the verdict table.
func verdictPackets() []*packet.Packet {
	var out []*packet.Packet
	for _, c := range []struct {
		proto        uint8
		sport, dport uint16
	}{{6, 1, 22}, {6, 1, 23}, {17, 1, 1500}, {17, 1, 53}, {6, 1, 80}, {1, 0, 0}, {47, 0, 0}, {17, 1, 5353}, {6, 9000, 1}} {
		p := v4pkt(c.proto, "10.1.2.3", "10.9.9.9", c.sport, c.dport)
		if c.proto == 1 {
			p.ICMPType = 8
		}
		out = append(out, p)
	}
	// a first fragment: decided as a whole packet (the rest of its
	// datagram counts bytes only, on its rule: frag_test.go)
	frag := v4pkt(6, "10.1.2.3", "10.9.9.9", 1, 22)
	frag.MoreFragments = true
	return append(out, frag)
}

func snapshot(t *testing.T, dp *datapath.Datapath, ids []uint32) map[uint32]uint64 {
	t.Helper()
	m := map[uint32]uint64{}
	for _, id := range ids {
		c, err := dp.RuleCounter(id)
		if err != nil {
			t.Fatal(err)
		}
		m[id] = c.Packets
	}
	return m
}

// waitCounted polls (bounded) until exactly one counter moved by one.
func waitCounted(t *testing.T, dp *datapath.Datapath, ids []uint32, before map[uint32]uint64) uint32 {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		now := snapshot(t, dp, ids)
		var moved []uint32
		for _, id := range ids {
			if now[id] != before[id] {
				moved = append(moved, id)
			}
		}
		switch {
		case len(moved) == 1 && now[moved[0]] == before[moved[0]]+1:
			return moved[0]
		case len(moved) > 0:
			t.Fatalf("counters moved unexpectedly: %v (before %v, now %v)", moved, before, now)
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("the live frame was not counted within 2s")
	return 0
}

// peerPair makes a namespace, peer, with a veth pair from f's namespace
// (fw0) to it (far0), IPv6 off on both sides: no neighbour discovery
// noise in the counters.
func (f *fixture) peerPair() (peer *testutil.NetNS, fw, far testutil.VethEnd) {
	f.t.Helper()
	return f.peerPairAddrs(nil, nil)
}

// sendRaw transmits frame on iface in ns through an AF_PACKET socket.
func sendRaw(t *testing.T, ns *testutil.NetNS, ifindex int, frame []byte) {
	t.Helper()
	err := ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Sendto(fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: ifindex})
	})
	if err != nil {
		t.Fatalf("sending on ifindex %d: %v", ifindex, err)
	}
}
