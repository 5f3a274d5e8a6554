package datapath_test

import (
	"flag"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// BenchmarkClassify measures the program's ns/packet with
// BPF_PROG_TEST_RUN for N rules where only the last one matches (and for a
// packet that matches none and falls to the policy). Run with
//
//	go test -run '^$' -bench Classify ./internal/datapath/
//
// The decision-tree classifier's cost should not grow with N. With
// -base-object (below) it runs another build beside this one, as
// BenchmarkAccept does: the fixed cost per packet of two builds side by
// side.
func BenchmarkClassify(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000, 10000, 100000} {
		var sb strings.Builder
		sb.WriteString("-P INPUT DROP\n")
		for i := 0; i < n-1; i++ {
			fmt.Fprintf(&sb, "-A INPUT -s 10.%d.%d.0/24 -p udp --dport %d -j ACCEPT\n", (i/250)%250, i%250, 1000+i%5000)
		}
		sb.WriteString("-A INPUT -s 192.0.2.0/24 -p udp --dport 53 -j ACCEPT\n")
		for _, c := range []struct {
			name string
			src  string
		}{{"last-rule", "192.0.2.7"}, {"no-match", "198.51.100.7"}} {
			b.Run(fmt.Sprintf("rules=%d/%s", n, c.name), func(b *testing.B) {
				f := newFixtureLimits(b, datapath.LimitsFor(max(n, 16384)))
				f.installText(sb.String())
				frame := v4pkt(packet.ProtoUDP, c.src, "10.255.0.1", 40000, 53).Bytes()
				want := datapath.XDPPass
				if c.name == "no-match" {
					want = datapath.XDPDrop
				}
				dps := loadSideBySide(b, f)
				err := f.ns.Do(func() error {
					for _, dp := range dps {
						if act, _, err := dp.Program().Benchmark(frame, 1, nil); err != nil || act != uint32(want) {
							return fmt.Errorf("probe: action %d, %v; want %d", act, err, want)
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				sideBySideOn(b, f, dps, frame, (*datapath.Datapath).Program)
			})
		}
	}
}

var baseObject = flag.String("base-object", "", "BenchmarkAccept, BenchmarkClassify: also run this build's xdpfw_bpfel.o "+
	"(e.g. `git show main:internal/datapath/xdpfw_bpfel.o`), interleaved with the current one, and report the ratio")

// BenchmarkAccept measures both programs on packets they accept: the tc
// egress program (OUTPUT) and the XDP program (INPUT), each with a rule
// the classifier finds and as part of a tracked connection (a conntrack
// lookup, the ESTABLISHED fast rule, the entry's update). The packets are
// UDP; the rule sets hold a REJECT. The /nat cases load the data plane
// with --nat xdpfw (no nat table: the packets have no binding, the
// common case of a packet this host sends or receives; a -base-object
// build must know fw_nat_no_hook). With -base-object it loads another
// build beside this one (both unpinned, alike), installs the same tables,
// and runs both in interleaved rounds (one round: b.N packets through each,
// in turn first), reporting both medians and the median of the per-round
// ratios (this build / base):
//
//	git show main:internal/datapath/xdpfw_bpfel.o > /tmp/base.o
//	go test -run '^$' -bench Accept ./internal/datapath/ -args -base-object /tmp/base.o
func BenchmarkAccept(b *testing.B) {
	const (
		untracked = "-A %[1]s -p tcp --dport 25 -j REJECT --reject-with tcp-reset\n-A %[1]s -p udp --dport 53 -j ACCEPT\n-A %[1]s -j DROP\n"
		tracked   = "-A %[1]s -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT\n" + untracked
	)
	// host 10.200.0.1 and peer 10.200.0.2: OUTPUT measures the host's
	// query, INPUT the peer's; the other direction answers it.
	query := func(egress bool) []byte {
		if egress {
			return v4pkt(packet.ProtoUDP, "10.200.0.1", "10.200.0.2", 40000, 53).Bytes()
		}
		return v4pkt(packet.ProtoUDP, "10.200.0.2", "10.200.0.1", 40000, 53).Bytes()
	}
	answer := func(egress bool) []byte {
		if egress {
			return v4pkt(packet.ProtoUDP, "10.200.0.2", "10.200.0.1", 53, 40000).Bytes()
		}
		return v4pkt(packet.ProtoUDP, "10.200.0.1", "10.200.0.2", 53, 40000).Bytes()
	}
	for _, c := range []struct {
		name    string
		egress  bool
		tracked bool
		nat     bool // --nat xdpfw: every IPv4 packet looks for its binding
	}{
		{"egress/classifier", true, false, false}, {"egress/conntrack-established", true, true, false},
		{"ingress/classifier", false, false, false}, {"ingress/conntrack-established", false, true, false},
		{"egress/conntrack-established/nat", true, true, true}, {"ingress/conntrack-established/nat", false, true, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			lim := datapath.Limits{NAT: c.nat}
			if c.nat { // no nat rule: the nat stages are skipped (a -base-object build needs fw_nat_no_hook)
				lim.NATNoHooks = datapath.NATNoHooksOf(&rules.RuleSet{})
			}
			f := newFixtureLimits(b, lim)
			chain, rules := "INPUT", untracked
			if c.egress {
				chain = "OUTPUT"
			}
			if c.tracked {
				rules = tracked
			}
			f.installText(fmt.Sprintf(rules, chain))
			dps := loadSideBySide(b, f)
			// run traces frame through dp's program for the direction
			// out (true: egress), and tells whether it was accepted.
			run := func(dp *datapath.Datapath, out bool, frame []byte) (datapath.TraceResult, bool, error) {
				if out {
					r, err := dp.RecordEgress(frame, datapath.NoCTState)
					return r, r.XDPAction == datapath.TCActOK, err
				}
				r, err := dp.Record(frame, 0, datapath.NoCTState)
				return r, r.XDPAction == datapath.XDPPass, err
			}
			prog := func(dp *datapath.Datapath) *ebpf.Program {
				if c.egress {
					return dp.EgressProgram()
				}
				return dp.Program()
			}
			frame := query(c.egress)
			err := f.ns.Do(func() error {
				for i, dp := range dps {
					if r, ok, err := run(dp, c.egress, frame); err != nil || !ok {
						return fmt.Errorf("build %d: probe: %+v, %v; want it accepted", i, r, err)
					}
					if !c.tracked {
						continue
					}
					if r, ok, err := run(dp, !c.egress, answer(c.egress)); err != nil || !ok {
						return fmt.Errorf("build %d: answer: %+v, %v; want it accepted", i, r, err)
					}
					if r, ok, err := run(dp, c.egress, frame); err != nil || !ok {
						return fmt.Errorf("build %d: probe after the answer: %+v, %v; want it accepted", i, r, err)
					}
					// ESTABLISHED (a reply seen) as the build's table says:
					// another build's object is traced through its live
					// program (Record), which reports no connection state
					// (the result's 0 reads NEW)
					es, err := dp.Connections()
					if err != nil {
						return err
					}
					if len(es) != 1 || !es[0].Replied {
						return fmt.Errorf("build %d: connections after the answer: %+v; want the query's, replied", i, es)
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			sideBySideOn(b, f, dps, frame, prog)
		})
	}
}

// loadSideBySide loads this build beside f's data plane, and the
// -base-object build when one is given, both unpinned and alike, with f's
// tables installed: this build first.
func loadSideBySide(b *testing.B, f *fixture) []*datapath.Datapath {
	objs := []string{""}
	if *baseObject != "" {
		objs = append(objs, *baseObject)
	}
	var dps []*datapath.Datapath
	for _, obj := range objs {
		dp, err := datapath.LoadObject(obj, f.dp.Limits())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(dp.Close)
		if err := dp.Install(f.tables); err != nil {
			b.Fatal(err)
		}
		dps = append(dps, dp)
	}
	return dps
}

// sideBySideOn runs frame b.N times through prog of each of dps in turn
// (sideBySide).
func sideBySideOn(b *testing.B, f *fixture, dps []*datapath.Datapath, frame []byte, prog func(*datapath.Datapath) *ebpf.Program) {
	sideBySide(b, f, dps, func(dp *datapath.Datapath) (float64, error) {
		_, per, err := prog(dp).Benchmark(frame, b.N, nil)
		return float64(per.Nanoseconds()), err
	})
}

// sideBySide measures each of dps in turn with nsPerPkt, in f's
// namespace (20 interleaved rounds when there are two, each build first
// in every other round), and reports the median ns/pkt of the first, and
// with two, the second's (base-ns/pkt), the median of the per-round
// ratios first / second and of the differences first - second
// (diff-ns/pkt).
func sideBySide(b *testing.B, f *fixture, dps []*datapath.Datapath, nsPerPkt func(*datapath.Datapath) (float64, error)) {
	rounds := 1
	if len(dps) > 1 {
		rounds = 20
	}
	ns := make([][]float64, len(dps))
	err := f.ns.Do(func() error {
		for r := 0; r < rounds; r++ {
			for j := range dps {
				i := (j + r) % len(dps) // each build goes first in every other round
				per, err := nsPerPkt(dps[i])
				if err != nil {
					return err
				}
				ns[i] = append(ns[i], per)
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(medianOf(ns[0]), "ns/pkt")
	if len(dps) > 1 {
		ratios := make([]float64, rounds)
		diffs := make([]float64, rounds)
		for r := range ratios {
			ratios[r] = ns[0][r] / ns[1][r]
			diffs[r] = ns[0][r] - ns[1][r]
		}
		b.ReportMetric(medianOf(ns[1]), "base-ns/pkt")
		b.ReportMetric(medianOf(ratios), "ratio")
		b.ReportMetric(medianOf(diffs), "diff-ns/pkt")
	}
}

func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkConntrackFull: what a new connection's first packet costs the
// live XDP program (kernel-measured, one BPF_PROG_TEST_RUN each, median of
// b.N distinct SYNs) into a 65,536-entry table: with room; full of a
// flood's entries (not assured: each SYN evicts one, docs/conntrack.md);
// full of assured connections (refused; searches held off 100 ms after a
// fruitless one).
//
//	go test -run '^$' -bench ConntrackFull -benchtime 2000x ./internal/datapath/
func BenchmarkConntrackFull(b *testing.B) {
	syn := func(i int) []byte {
		return (&packet.Packet{Src: netip.AddrFrom4([4]byte{10, byte(100 + i>>16), byte(i >> 8), byte(i)}), Dst: ct4.srv,
			Proto: packet.ProtoTCP, SPort: uint16(1024 + i%50000), DPort: 22, TCPFlags: packet.TCPSyn}).Bytes()
	}
	for _, c := range []struct {
		name    string
		fill    bool
		assured bool
	}{{"room", false, false}, {"full-of-flood", true, false}, {"full-of-assured", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			f := newFixtureB(b)
			f.installText(ctRules)
			prog := f.dp.Program()
			run1 := func(frame []byte) (float64, error) {
				_, d, err := prog.Benchmark(frame, 1, nil)
				return float64(d.Nanoseconds()), err
			}
			max := f.dp.Limits().Conntrack
			err := f.ns.Do(func() error {
				for i := 0; c.fill && i < max; i++ {
					src := netip.AddrFrom4([4]byte{10, byte(200 + i>>16), byte(i >> 8), byte(i)})
					pk := &packet.Packet{Src: src, Dst: ct4.srv, Proto: packet.ProtoUDP, SPort: 5000, DPort: 53}
					frames := [][]byte{pk.Bytes()}
					if c.assured { // query, answer, query: assured
						an := &packet.Packet{Src: ct4.srv, Dst: src, Proto: packet.ProtoUDP, SPort: 53, DPort: 5000}
						frames = append(frames, an.Bytes(), pk.Bytes())
					}
					for _, fr := range frames {
						if _, err := run1(fr); err != nil {
							return err
						}
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			if st, _ := f.dp.CTStats(); c.fill && st.Entries != max {
				b.Fatalf("table holds %d of %d", st.Entries, max)
			}
			ns := make([]float64, 0, b.N)
			err = f.ns.Do(func() error {
				for i := 0; i < b.N; i++ {
					d, err := run1(syn(i))
					if err != nil {
						return err
					}
					ns = append(ns, d)
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			st, _ := f.dp.CTStats()
			b.ReportMetric(medianOf(ns), "ns/pkt")
			slices.Sort(ns)
			b.ReportMetric(ns[len(ns)*99/100], "p99-ns/pkt")
			b.ReportMetric(float64(st.Counters["early_drop"]), "early-drops")
			b.ReportMetric(float64(st.Counters["table_full"]), "refused")
		})
	}
}

// benchInterleaved runs measure(case, packets) for every case in turn,
// 9 rounds of 100,000 packets each per b.N, and reports each case's median
// ns per packet and its median ratio to the first case (names[0]) in the
// same round: side by side, so the machine's noise hits all alike.
func benchInterleaved(b *testing.B, names []string, measure func(i, n int) float64) {
	const rounds, perRound = 9, 100000
	ns := make([][]float64, len(names))
	ratio := make([][]float64, len(names))
	for range b.N {
		for range rounds {
			for i := range names {
				ns[i] = append(ns[i], measure(i, perRound))
			}
			for i := range names {
				ratio[i] = append(ratio[i], ns[i][len(ns[i])-1]/ns[0][len(ns[0])-1])
			}
		}
	}
	median := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	for i, name := range names {
		b.ReportMetric(median(ns[i]), name+"-ns/pkt")
		b.ReportMetric(median(ratio[i]), name+"/"+names[0])
	}
}
