package datapath_test

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
)

// BenchmarkForwardEstablished: what an accepted, established, forwarded
// packet costs xdpfw_ingress (BPF_PROG_TEST_RUN: conntrack, the FIB, the
// fast path's checks and rewrite, the redirect set up), one flow, the
// caches warm: the instructions and helper calls of `bench forward`'s
// xdpfw-xdp path without its cache misses (docs/bench.md). With
// -base-object, another build side by side, as BenchmarkAccept:
//
//	go test -run '^$' -bench ForwardEstablished -benchtime 2000x ./internal/datapath/ -args -base-object OLD.o
//
// Each packet is one BPF_PROG_TEST_RUN of its own, timed by the kernel
// (the run alone, not the syscall): a run repeated in the kernel would see
// the frame the last one rewrote (a TTL lower each time), and a repeated
// XDP run swaps the kernel's XDP dispatcher twice per call. Such a run
// has no context to give it a device: the packets come in by the
// namespace's loopback device, which the fast path is told to use too.
// ns/pkt includes the kernel timer's own reads, the same for both builds:
// diff-ns/pkt (per round, this build's less the base's) is the measure.
func BenchmarkForwardEstablished(b *testing.B) {
	f, lanR, outR, cli := routerFixture(b, datapath.Limits{})
	f.installText("-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n" +
		"-A FORWARD -i lo -p udp --dport 5000 -j ACCEPT\n-A FORWARD -j DROP\n")
	dps := loadSideBySide(b, f)
	mac := func(h net.HardwareAddr) (m [6]byte) { copy(m[:], h); return }
	cliA, sinkA := netip.MustParseAddr("10.200.1.2"), netip.MustParseAddr("10.220.0.2")
	// lo's MAC (zeros) is the destination: the packet is for this host's device
	query := (&packet.Packet{SrcMAC: mac(cli.MAC), Src: cliA, Dst: sinkA, Proto: packet.ProtoUDP,
		SPort: 4000, DPort: 5000, TTL: 255, Payload: []byte("query-pad-to-64-bytes")}).Bytes()
	answer := (&packet.Packet{SrcMAC: mac(lanR.MAC), Src: sinkA, Dst: cliA, Proto: packet.ProtoUDP,
		SPort: 5000, DPort: 4000, TTL: 64, Payload: []byte("answer")}).Bytes()
	// run runs frame n times through dp's program: the last action, the
	// kernel's time for them all
	run := func(dp *datapath.Datapath, frame []byte, n int) (uint32, time.Duration, error) {
		var ret uint32
		var sum time.Duration
		for range n {
			r, d, err := dp.Program().Benchmark(frame, 1, nil)
			if err != nil {
				return 0, 0, err
			}
			ret, sum = r, sum+d
		}
		return ret, sum, nil
	}
	const xdpRedirect = 4
	err := f.ns.Do(func() error {
		for _, dp := range dps {
			if err := dp.SetForwardPorts([]int{1, lanR.Index, outR.Index}); err != nil {
				return err
			}
			// the query, the answer: established (and answered: the fast path's)
			if _, _, err := run(dp, query, 1); err != nil {
				return err
			}
			if _, _, err := run(dp, answer, 1); err != nil {
				return err
			}
			c0, err := dp.ForwardCounters()
			if err != nil {
				return err
			}
			if ret, _, err := run(dp, query, 1); err != nil || ret != xdpRedirect {
				return fmt.Errorf("established query: XDP action %d (%v), want XDP_REDIRECT", ret, err)
			}
			c1, err := dp.ForwardCounters()
			if err != nil {
				return err
			}
			if d := c1[datapath.FwdXDP].Packets - c0[datapath.FwdXDP].Packets; d != 1 {
				return fmt.Errorf("established query: %d packets by the fast path, want 1", d)
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	sideBySide(b, f, dps, func(dp *datapath.Datapath) (float64, error) {
		_, d, err := run(dp, query, b.N)
		return float64(d.Nanoseconds()) / float64(b.N), err
	})
}

// BenchmarkForwardMasquerade: an established, masqueraded datagram in
// its original direction (--nat xdpfw, natRouter), translated and
// forwarded by the fast path, two flows of one data plane side by side:
// one translated from its conntrack entry (kept-ns/pkt: one hash lookup),
// one whose entry's copy is cleared (binding-ns/pkt: conntrack, then the
// binding, as before the entry kept it); one flow each, warm caches, one
// BPF_PROG_TEST_RUN per packet, 20 interleaved rounds; ratio kept /
// binding per round, median.
//
//	go test -run '^$' -bench ForwardMasquerade -benchtime 5000x ./internal/datapath/
func BenchmarkForwardMasquerade(b *testing.B) {
	r := newNATRouter(b)
	dp := r.f.dp
	const xdpRedirect = 4
	if err := r.f.ns.Do(func() error { return dp.SetForwardPorts([]int{1, r.lan.Index, r.out.Index}) }); err != nil {
		b.Fatal(err)
	}
	var frames [2][]byte
	for i, port := range []uint16{4000, 4001} {
		router := netip.AddrPortFrom(r.router, port)
		r.send(b, dp, r.query(port, 5000))
		r.send(b, dp, r.answer(5000, router))
		frames[i] = r.query(port, 5000)
		if act, out := r.send(b, dp, frames[i]); act != xdpRedirect || !bytes.Equal(out[26:30], r.router.AsSlice()) {
			b.Fatalf("established masqueraded query: XDP action %d, source %x; want XDP_REDIRECT from %s", act, out[26:30], r.router)
		}
	}
	if err := dp.CTForgetNAT(4001); err != nil {
		b.Fatal(err)
	}
	if act, _ := r.send(b, dp, frames[1]); act != xdpRedirect {
		b.Fatalf("established masqueraded query by its binding: XDP action %d, want XDP_REDIRECT", act)
	}
	const rounds = 20
	ns := [2][]float64{}
	for round := range rounds {
		for j := range frames {
			i := (j + round) % 2
			err := r.f.ns.Do(func() error {
				var sum time.Duration
				for range b.N {
					_, d, err := dp.Program().Benchmark(frames[i], 1, nil)
					if err != nil {
						return err
					}
					sum += d
				}
				ns[i] = append(ns[i], float64(sum.Nanoseconds())/float64(b.N))
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	ratios := make([]float64, rounds)
	for i := range ratios {
		ratios[i] = ns[0][i] / ns[1][i]
	}
	b.ReportMetric(medianOf(ns[0]), "kept-ns/pkt")
	b.ReportMetric(medianOf(ns[1]), "binding-ns/pkt")
	b.ReportMetric(medianOf(ratios), "ratio")
}
