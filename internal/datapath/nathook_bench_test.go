package datapath_test

import (
	"fmt"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// natHookCase: a nat hook's stage, entered by a new connection's first
// packet: the program that enters it and the frame (a connection's first
// packet of the hook: arriving at XDP, or sent by this host at tc egress).
type natHookCase struct {
	hook  datapath.NATHook
	frame []byte
	prog  func(*datapath.Datapath) *ebpf.Program
}

var natHookCases = map[string]natHookCase{
	"prerouting": {datapath.NATPrerouting, v4pkt(packet.ProtoUDP, "10.200.0.2", "10.200.0.1", 40000, 53).Bytes(),
		(*datapath.Datapath).Program},
	"output": {datapath.NATOutput, v4pkt(packet.ProtoUDP, "10.200.0.1", "10.200.0.2", 40000, 53).Bytes(),
		(*datapath.Datapath).EgressProgram},
}

// natHookFixtures: two data planes with --nat xdpfw, alike but for
// Limits.NATNoHooks (the first with c's hook's stage, the second
// skipping it: fw_nat_no_hook), the same filter (every packet dropped:
// nothing is recorded or bound, so every run is a connection's first
// packet) and nat table (a MASQUERADE only: no PREROUTING or OUTPUT rule
// translates; NATNoHooksOf says so). Checked: the stage's data plane
// counts 10 first packets the hook left alone (untranslated), the other
// none.
func natHookFixtures(t testing.TB, c natHookCase) []*fixture {
	nat, err := rules.Parse("nat", []byte("-t nat -A POSTROUTING -o eth0 -j MASQUERADE\n"), rules.ParseOptions{NAT: true})
	if err != nil {
		t.Fatal(err)
	}
	if no := datapath.NATNoHooksOf(nat.NAT); !no.Has(datapath.NATPrerouting) || !no.Has(datapath.NATOutput) {
		t.Fatalf("NATNoHooksOf: %b; a MASQUERADE translates in POSTROUTING only", no)
	}
	var fs []*fixture
	for _, skip := range []datapath.NATHooks{0, 1 << c.hook} {
		f := newFixtureLimits(t, datapath.Limits{NAT: true, NATNoHooks: skip})
		f.installText("-A INPUT -j DROP\n-A FORWARD -j DROP\n-A OUTPUT -j DROP\n")
		lim := f.dp.Limits()
		nt, _, err := compile.CompileNAT(nat.NAT, compile.Input{Ifaces: f.ifaces, HostIfaces: f.ifaces,
			MaxEntries: lim.Entries, MaxNodes: lim.Nodes, MaxLeafSlots: lim.LeafSlots})
		if err != nil {
			t.Fatal(err)
		}
		err = f.ns.Do(func() error {
			if err := f.dp.StartNAT(nt, nat.NAT); err != nil {
				return err
			}
			before, _, err := f.dp.NATCounters()
			if err != nil {
				return err
			}
			if _, _, err := c.prog(f.dp).Benchmark(c.frame, 10, nil); err != nil {
				return err
			}
			after, _, err := f.dp.NATCounters()
			if err != nil {
				return err
			}
			want := uint64(10)
			if skip != 0 {
				want = 0
			}
			if ran := after.Untranslated.Packets - before.Untranslated.Packets; ran != want {
				return fmt.Errorf("NATNoHooks %b: 10 first packets, %d through the hook's nat stage, want %d", skip, ran, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	return fs
}

// TestNATNoHook: a new connection's first packet skips the nat stage of
// a hook where no nat rule translates (PREROUTING at XDP, OUTPUT at tc
// egress; fw_nat_no_hook), and enters it otherwise.
func TestNATNoHook(t *testing.T) {
	for name, c := range natHookCases {
		t.Run(name, func(t *testing.T) { natHookFixtures(t, c) })
	}
}

// BenchmarkNATHook: what a nat hook's stage costs a new connection's
// first packet with --nat xdpfw (two tail calls, the nat classification,
// a second parse and conntrack lookup), and what a nat table without a
// rule there saves by skipping it (natHookFixtures). Both data planes run
// the same frame through the hook's live program (BPF_PROG_TEST_RUN) in
// 20 interleaved rounds (each first in every other round): the median
// ns/pkt of each (stage-ns/pkt, skip-ns/pkt) and of the per-round ratios
// skip / stage.
//
//	go test -run '^$' -bench NATHook -benchtime 200000x ./internal/datapath/
func BenchmarkNATHook(b *testing.B) {
	for _, name := range []string{"prerouting", "output"} {
		c := natHookCases[name]
		b.Run(name, func(b *testing.B) {
			fs := natHookFixtures(b, c)
			const rounds = 20
			ns := [2][]float64{}
			for r := 0; r < rounds; r++ {
				for j := range fs {
					i := (j + r) % len(fs)
					err := fs[i].ns.Do(func() error {
						_, per, err := c.prog(fs[i].dp).Benchmark(c.frame, b.N, nil)
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
		})
	}
}
