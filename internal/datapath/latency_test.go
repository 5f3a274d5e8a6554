package datapath_test

import (
	"fmt"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/latency"
	"github.com/xdpfw/xdpfw/internal/packet"
)

// latencyCounts reads the histograms as "CHAIN/outcome" -> histogram,
// checking each against what the data plane can have written: a count
// for every packet in the buckets, values in the buckets' bounds (the C
// bucket function agrees with internal/latency's), and a max in the
// highest bucket used.
func latencyCounts(t *testing.T, dp *datapath.Datapath) map[string]latency.Hist {
	t.Helper()
	hs, err := dp.Latency()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]latency.Hist{}
	for _, h := range hs {
		var n, lo, hi uint64
		top := -1
		for i, c := range h.Counts {
			if c == 0 {
				continue
			}
			l, u := latency.Bounds(i)
			n += c
			lo += c * l
			hi += c * min(u-1, h.Max)
			top = i
		}
		name := fmt.Sprintf("%s/%s", h.Chain, h.Outcome)
		if n != h.Count {
			t.Errorf("%s: %d packets in the buckets, count %d", name, n, h.Count)
		}
		if h.Sum < lo || h.Sum > hi {
			t.Errorf("%s: sum %d ns outside what the buckets hold, [%d, %d]", name, h.Sum, lo, hi)
		}
		if top >= 0 && latency.Bucket(h.Max) != top {
			t.Errorf("%s: max %d ns is in bucket %d, the highest used is %d", name, h.Max, latency.Bucket(h.Max), top)
		}
		if h.Count > 0 {
			out[name] = h.Hist
		}
	}
	return out
}

// TestLatencyHistograms: with sampling 1 in 1 every packet the XDP and
// tc programs decide is timed, in its chain's and outcome's histogram,
// with a plausible time; with sampling off nothing is; 1 in N times every
// Nth packet of each CPU; a reset empties the histograms.
func TestLatencyHistograms(t *testing.T) {
	f := newFixture(t)
	f.unlimitedRejects()
	f.installText(`-P FORWARD DROP
-A INPUT -p tcp --dport 80 -j ACCEPT
-A INPUT -p tcp --dport 81 -j DROP
-A INPUT -p tcp --dport 82 -j REJECT --reject-with tcp-reset
-A FORWARD -p udp --dport 53 -j ACCEPT
-A OUTPUT -p udp --dport 53 -j ACCEPT
-A OUTPUT -p udp --dport 54 -j DROP
`)
	// a router: 10.200.9.1 is this host's, the rest is forwarded
	for _, c := range [][]string{
		{"sysctl", "-qw", "net.ipv4.conf.all.forwarding=1"},
		{"ip", "addr", "add", "10.200.9.1/24", "dev", "eth0"},
		{"ip", "link", "set", "peer0", "up"},
		{"ip", "route", "add", "default", "dev", "eth0"},
	} {
		if out, err := f.ns.Exec(t.Context(), c[0], c[1:]...); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	local, remote := "10.200.9.1", "10.200.7.7"
	arp := &packet.Packet{SrcMAC: macA, DstMAC: macB, NonIP: packet.EtherTypeARP, Payload: make([]byte, 28)}
	// n frames of p, timed under name
	type frames struct {
		name string
		p    *packet.Packet
		n    int
	}
	ingress := []frames{
		{"INPUT/accept", v4pkt(6, remote, local, 1000, 80), 5},
		{"INPUT/drop", v4pkt(6, remote, local, 1000, 81), 4},
		{"INPUT/reject", v4pkt(6, remote, local, 1000, 82), 3},
		{"INPUT/pass", arp, 2},
		{"FORWARD/accept", v4pkt(17, remote, "10.200.8.8", 1000, 53), 6},
		{"FORWARD/drop", v4pkt(17, remote, "10.200.8.8", 1000, 99), 7},
	}
	egress := []frames{
		{"OUTPUT/accept", v4pkt(17, local, remote, 1000, 53), 8},
		{"OUTPUT/drop", v4pkt(17, local, remote, 1000, 54), 9},
	}
	send := func(times int) {
		t.Helper()
		for _, c := range ingress {
			for i := 0; i < c.n*times; i++ {
				f.mustRun(c.p.Bytes(), "eth0")
			}
		}
		for _, c := range egress {
			for i := 0; i < c.n*times; i++ {
				err := f.ns.Do(func() error {
					_, err := f.dp.RecordEgress(c.p.Bytes(), datapath.NoCTState)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	total := func(m map[string]latency.Hist) (n uint64) {
		for _, h := range m {
			n += h.Count
		}
		return n
	}

	// off (a fresh load's setting): nothing timed
	if n, err := f.dp.LatencySample(); err != nil || n != 0 {
		t.Fatalf("a fresh load samples 1 in %d (%v), want 0 (off)", n, err)
	}
	send(1)
	if got := latencyCounts(t, f.dp); len(got) != 0 {
		t.Fatalf("sampling off, yet histograms hold %v", got)
	}

	// every packet
	if err := f.dp.SetLatencySample(1); err != nil {
		t.Fatal(err)
	}
	send(1)
	got := latencyCounts(t, f.dp)
	want := map[string]int{}
	for _, c := range ingress {
		want[c.name] = c.n
	}
	for _, c := range egress {
		want[c.name] = c.n
	}
	for name, n := range want {
		h := got[name]
		if h.Count != uint64(n) {
			t.Errorf("%s: %d packets timed, want %d", name, h.Count, n)
		}
		// plausible: more than nothing, less than a millisecond (a
		// test run on a busy machine may be preempted, not for that long)
		if h.Count > 0 && (h.Sum < h.Count || h.Max == 0 || h.Max > 1e6) {
			t.Errorf("%s: implausible times: sum %d ns, max %d ns over %d packets", name, h.Sum, h.Max, h.Count)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: %d packets timed, want none", name, got[name].Count)
		}
	}

	// 1 in 4, per CPU: each CPU times its 4th, 8th... packet
	if err := f.dp.SetLatencySample(4); err != nil {
		t.Fatal(err)
	}
	before := total(got)
	send(4)
	sent := uint64(0)
	for _, n := range want {
		sent += uint64(4 * n)
	}
	timed := total(latencyCounts(t, f.dp)) - before
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	if timed > sent/4 || timed+3*uint64(cpus) < sent/4 {
		t.Errorf("1 in 4 timed %d of %d packets, want %d (less up to 3 per CPU)", timed, sent, sent/4)
	}

	// off again: nothing more
	if err := f.dp.SetLatencySample(0); err != nil {
		t.Fatal(err)
	}
	now := total(latencyCounts(t, f.dp))
	send(1)
	if n := total(latencyCounts(t, f.dp)); n != now {
		t.Errorf("sampling off, yet %d more packets timed", n-now)
	}

	if err := f.dp.ResetLatency(); err != nil {
		t.Fatal(err)
	}
	if got := latencyCounts(t, f.dp); len(got) != 0 {
		t.Errorf("after a reset the histograms hold %v", got)
	}
}

// BenchmarkLatencySampling measures what latency sampling costs both
// programs on a packet the classifier accepts: this build with sampling
// off, 1 in 64 and 1 in 1, side by side in interleaved rounds (each its
// own instance, unpinned, with the same tables), and with -base-object
// another build beside them (a build before sampling: what "off" costs).
// Reports each median ns/pkt and the median per-round ratio to off:
//
//	git show main:internal/datapath/xdpfw_bpfel.o > /tmp/base.o
//	go test -run '^$' -bench LatencySampling -benchtime 200000x ./internal/datapath/ -args -base-object /tmp/base.o
func BenchmarkLatencySampling(b *testing.B) {
	const rules = "-A %[1]s -p tcp --dport 25 -j REJECT --reject-with tcp-reset\n-A %[1]s -p udp --dport 53 -j ACCEPT\n-A %[1]s -j DROP\n"
	for _, egress := range []bool{false, true} {
		name, chain := "ingress", "INPUT"
		frame := v4pkt(packet.ProtoUDP, "10.200.0.2", "10.200.0.1", 40000, 53).Bytes()
		if egress {
			name, chain = "egress", "OUTPUT"
			frame = v4pkt(packet.ProtoUDP, "10.200.0.1", "10.200.0.2", 40000, 53).Bytes()
		}
		b.Run(name, func(b *testing.B) {
			f := newFixtureB(b)
			f.installText(fmt.Sprintf(rules, chain))
			type subject struct {
				name   string
				obj    string
				sample uint32
				dp     *datapath.Datapath
				ns     []float64
			}
			subs := []*subject{{name: "off"}, {name: "1in64", sample: 64}, {name: "1in1", sample: 1}}
			if *baseObject != "" {
				subs = append(subs, &subject{name: "base", obj: *baseObject})
			}
			for _, s := range subs {
				dp, err := datapath.LoadObject(s.obj, f.dp.Limits())
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(dp.Close)
				if err := dp.Install(f.tables); err != nil {
					b.Fatal(err)
				}
				if s.obj == "" {
					if err := dp.SetLatencySample(s.sample); err != nil {
						b.Fatal(err)
					}
				}
				s.dp = dp
			}
			err := f.ns.Do(func() error {
				for r := 0; r < 15; r++ {
					for j := range subs {
						s := subs[(j+r)%len(subs)] // each goes first in turn
						p := s.dp.Program()
						if egress {
							p = s.dp.EgressProgram()
						}
						ret, per, err := p.Benchmark(frame, b.N, nil)
						if err != nil {
							return err
						}
						if want := map[bool]uint32{false: datapath.XDPPass, true: datapath.TCActOK}[egress]; ret != want {
							return fmt.Errorf("%s: the probe got %d, want %d (accepted)", s.name, ret, want)
						}
						s.ns = append(s.ns, float64(per.Nanoseconds()))
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			off := subs[0].ns
			for _, s := range subs {
				b.ReportMetric(medianOf(s.ns), s.name+"-ns/pkt")
				if s != subs[0] {
					ratios := make([]float64, len(off))
					for r := range ratios {
						ratios[r] = s.ns[r] / off[r]
					}
					b.ReportMetric(medianOf(ratios), s.name+"/off")
				}
			}
			for _, s := range subs[1:3] { // the sampled ones timed their share of the packets
				hs, err := s.dp.Latency()
				if err != nil {
					b.Fatal(err)
				}
				var n uint64
				for _, h := range hs {
					n += h.Count
				}
				// each CPU counts its own packets: up to sample-1 of
				// each may be left over
				cpus, err := ebpf.PossibleCPU()
				if err != nil {
					b.Fatal(err)
				}
				want := max(0, len(s.ns)*b.N/int(s.sample)-int(s.sample-1)*cpus)
				if n < uint64(want) {
					b.Errorf("%s: %d packets timed, want at least %d", s.name, n, want)
				}
			}
		})
	}
}
