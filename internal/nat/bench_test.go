package nat

import (
	"net/netip"
	"testing"

	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/testutil"
)

// BenchmarkHarness measures the harness programs by BPF_PROG_TEST_RUN on
// a 64-byte UDP frame, ns per packet as the kernel times them: rewrite
// (fw_nat_rewrite4 of the source address and port, and the map lookup of
// the rewrite), apply (one binding lookup, the destination and the source
// rewritten: what a translated connection's packet costs), and apply on a
// frame with no binding (the lookup alone).
func BenchmarkHarness(b *testing.B) {
	testutil.RequireRoot(b)
	h, err := NewHarness()
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	cli, srv := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("198.51.100.9")
	frame := (&packet.Packet{Src: cli, Dst: srv, Proto: packet.ProtoUDP, SPort: 40000, DPort: 53, PadTo60: true}).Bytes()
	out := Rw{Src: netip.MustParseAddr("192.0.2.1"), Dst: srv, SPort: 40001, DPort: 53}
	// the test run repeats on one buffer: a binding of a tuple to itself
	// is found again at every run (the same work as any other)
	same := (&packet.Packet{Src: cli, Dst: srv, Proto: packet.ProtoUDP, SPort: 40003, DPort: 53, PadTo60: true}).Bytes()
	if _, ok, err := h.Bind(same, Rw{Src: cli, Dst: srv, SPort: 40003, DPort: 53}); err != nil || !ok {
		b.Fatalf("bind: %v %v", ok, err)
	}
	other := (&packet.Packet{Src: cli, Dst: srv, Proto: packet.ProtoUDP, SPort: 40002, DPort: 53, PadTo60: true}).Bytes()
	for _, c := range []struct {
		name  string
		run   func() error
		frame []byte
	}{
		{"rewrite", func() error { _, _, err := h.Rewrite(frame, out); return err }, frame},
		{"apply", nil, same},
		{"apply-miss", nil, other},
	} {
		b.Run(c.name, func(b *testing.B) {
			prog := h.objs.NatApplyTest
			if c.name == "rewrite" {
				if err := c.run(); err != nil { // puts the rewrite in nat_rw_spec
					b.Fatal(err)
				}
				prog = h.objs.NatRewriteTest
			}
			_, per, err := prog.Benchmark(c.frame, b.N, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(per.Nanoseconds()), "ns/pkt")
		})
	}
}
