package datapath_test

import (
	"fmt"
	"testing"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// BenchmarkNATPrerouting: what the nat stage's PREROUTING costs a new
// connection's first packet with --nat xdpfw (two tail calls, the nat
// classification, a second parse and conntrack lookup), and what a nat
// table without a PREROUTING rule saves by skipping it (fw_nat_no_pre,
// Limits.NATNoPrerouting). Two data planes, alike but for the flag, with
// the same filter (every packet dropped: nothing is recorded or bound, so
// every run is a connection's first packet) and nat table (a MASQUERADE
// only), run the same UDP frame through the live XDP program in 20
// interleaved rounds (each first in every other round): the median ns/pkt
// of each (stage-ns/pkt, skip-ns/pkt) and of the per-round ratios skip /
// stage. Checked first: the stage's data plane counts the first packets
// PREROUTING leaves alone, the other none.
//
//	go test -run '^$' -bench NATPrerouting -benchtime 200000x ./internal/datapath/
func BenchmarkNATPrerouting(b *testing.B) {
	nat, err := rules.Parse("nat", []byte("-t nat -A POSTROUTING -o eth0 -j MASQUERADE\n"), rules.ParseOptions{NAT: true})
	if err != nil {
		b.Fatal(err)
	}
	if compile.NATHookTranslates(nat.NAT, rules.ChainPrerouting) || !compile.NATHookTranslates(nat.NAT, rules.ChainPostrouting) {
		b.Fatal("NATHookTranslates: a MASQUERADE translates in POSTROUTING only")
	}
	frame := v4pkt(packet.ProtoUDP, "10.200.0.2", "10.200.0.1", 40000, 53).Bytes()
	var fs []*fixture
	for _, skip := range []bool{false, true} {
		f := newFixtureLimits(b, datapath.Limits{NAT: true, NATNoPrerouting: skip})
		f.installText("-A INPUT -j DROP\n-A FORWARD -j DROP\n")
		lim := f.dp.Limits()
		nt, _, err := compile.CompileNAT(nat.NAT, compile.Input{Ifaces: f.ifaces, HostIfaces: f.ifaces,
			MaxEntries: lim.Entries, MaxNodes: lim.Nodes, MaxLeafSlots: lim.LeafSlots})
		if err != nil {
			b.Fatal(err)
		}
		err = f.ns.Do(func() error {
			if err := f.dp.StartNAT(nt, nat.NAT); err != nil {
				return err
			}
			before, _, err := f.dp.NATCounters()
			if err != nil {
				return err
			}
			if _, _, err := f.dp.Program().Benchmark(frame, 10, nil); err != nil {
				return err
			}
			after, _, err := f.dp.NATCounters()
			if err != nil {
				return err
			}
			if ran := after.Untranslated.Packets - before.Untranslated.Packets; ran != map[bool]uint64{false: 10, true: 0}[skip] {
				return fmt.Errorf("fw_nat_no_pre %v: 10 first packets, %d through the nat stage's PREROUTING", skip, ran)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		fs = append(fs, f)
	}
	const rounds = 20
	ns := [2][]float64{}
	for r := 0; r < rounds; r++ {
		for j := range fs {
			i := (j + r) % len(fs)
			err := fs[i].ns.Do(func() error {
				_, per, err := fs[i].dp.Program().Benchmark(frame, b.N, nil)
				ns[i] = append(ns[i], float64(per.Nanoseconds()))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	ratios := make([]float64, rounds)
	for r := range ratios {
		ratios[r] = ns[1][r] / ns[0][r]
	}
	b.ReportMetric(medianOf(ns[0]), "stage-ns/pkt")
	b.ReportMetric(medianOf(ns[1]), "skip-ns/pkt")
	b.ReportMetric(medianOf(ratios), "ratio")
}
