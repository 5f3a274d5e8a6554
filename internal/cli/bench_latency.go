package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/bench"
)

func newBenchLatency(e *env) *cobra.Command {
	var (
		rates     []string
		loadRules int
		rulesN    []string
		lightRate string
		flows     int
		packets   int
		minTime   time.Duration
		size      int
		duts      []string
		quick     bool
		report    string
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "latency",
		Short: "One-way latency and jitter through a forwarding DUT: xdpfw vs iptables and nftables, by load and rule count",
		Long: `latency measures what a packet's trip through the firewall costs in time. It
builds its own topology — three network namespaces, generator -> DUT -> sink,
joined by two veth pairs; the DUT routes between them — and removes it again,
also on error or Ctrl-C.

A generator (an XDP program run with BPF_PROG_RUN in live-frames mode, one
frame per flush) on CPU 0 sends IPv4/UDP packets at a fixed, paced rate: each
waits, spinning on the kernel clock, for its time, and carries the clock in
its payload. The sink's XDP program reads the clock when the packet arrives:
one-way latency, on one kernel clock, no synchronisation. The DUT's veth is
polled by its own NAPI thread on CPU 1 at real-time priority (SCHED_FIFO 50).
The DUTs:

  xdp-fwd          a floor: a bare XDP program (FIB lookup, redirect)
  kernel-fwd       a floor: the kernel forwards, no rules
  xdpfw            the firewall on both veths, forwarding in its XDP fast path
  iptables-nft     the same rule text in the DUT's FORWARD chain
  iptables-legacy  likewise with the x_tables back end, if installed
  nft-linear       the rules written natively for nft, one per rule (--dut only)
  nft-set          nftables best practice: one rule and a concatenated set

The rule set: N rules in FORWARD (policy DROP), each accepting a /32 source and
a UDP port, after one rule accepting the sink's answers (established, in by
the sink's side). The traffic is --flows flows (at most N), each aimed at a
different rule drawn at random from all N: spread over the rule set. Before
measuring, each flow sends one packet that the sink answers (the warm-up), so
every connection is established: xdpfw forwards a connection in its fast path
once answered (docs/forward.md).

Two sweeps: the offered loads of --rates at --load-rules rules (latency vs
load, up to and beyond what a DUT can take), and the rule counts of --rules at
--light-rate (latency vs rule count). Per point: p50, p99, p99.9 and max of the
one-way latency, jitter (the mean deviation from the mean latency), loss, and
for xdpfw its own processing time per packet (its latency histograms, every
packet sampled). Every point is checked: the generator sent what it was asked,
the DUT's count of forwarded packets and the sink's count add up, and the
sink's samples are the packets it counted.

--quick runs a small check of every DUT (two light loads, 1 and 1,000 rules) in
about a minute. The floors' numbers are the measurement's own: what the
veths, the NAPI thread's wake-up and the clock cost with no firewall. See
docs/realtime.md for the method and its caveats.`,
		Example: `  # the default: about 5 minutes on 2 CPUs
  xdpfw bench latency --report /tmp/latency

  # a quick check of every DUT, as the tests run it
  xdpfw bench latency --quick

  # xdpfw against the floors only, latency vs rule count up to 100,000 rules
  xdpfw bench latency --dut xdp-fwd,xdpfw --rates '' --rules 1,1000,100000 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if quick {
				for name, v := range map[string]string{"rates": "2k,20k", "load-rules": "100", "rules": "1,1000",
					"light-rate": "5k", "flows": "500", "packets": "3000", "min-time": "0s"} {
					if !cmd.Flags().Changed(name) {
						if err := cmd.Flags().Set(name, v); err != nil {
							return err
						}
					}
				}
			}
			opt := bench.LatencyOptions{LoadRules: loadRules, Flows: flows, Packets: packets,
				MinTime: minTime, Size: size, Progress: e.stderr}
			var err error
			if opt.Rules, err = sweepList("--rules", rulesN, func(r string) (int, error) {
				n, err := strconv.Atoi(r)
				if err != nil {
					return 0, fmt.Errorf("%q is not a rule count", r)
				}
				return n, nil
			}); err != nil {
				return err
			}
			if opt.Rates, err = sweepList("--rates", rates, parseRate); err != nil {
				return err
			}
			v, err := parseRate(lightRate)
			if err != nil {
				return usageError{fmt.Errorf("--light-rate: %w", err)}
			}
			opt.LightRate = v
			if cmd.Flags().Changed("dut") {
				for _, d := range duts {
					if !slices.Contains(bench.LatencyDUTs, d) {
						return usageError{fmt.Errorf("--dut %q: want %s", d, strings.Join(bench.LatencyDUTs, ", "))}
					}
				}
				opt.DUTs = duts
			}
			if err := bench.CheckLatencyOptions(opt); err != nil {
				return usageError{err}
			}
			return runBench(e, cmd, benchOut[*bench.LatencyResult]{report: report, asJSON: asJSON,
				writeReport: bench.WriteLatencyReport, table: bench.WriteLatencyTable},
				func(ctx context.Context) (*bench.LatencyResult, error) { return bench.Latency(ctx, opt) },
				func(r *bench.LatencyResult, c string) { r.Command = c })
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&rates, "rates", []string{"10k", "100k", "300k", "1M", "3M"}, "offered loads of the load sweep, packets/s (k, M); '' for none")
	fl.IntVar(&loadRules, "load-rules", 1000, "rule count of the load sweep")
	fl.StringSliceVar(&rulesN, "rules", []string{"1", "100", "1000", "10000", "100000"}, "rule counts of the rule sweep; '' for none")
	fl.StringVar(&lightRate, "light-rate", "10k", "offered load of the rule sweep, packets/s")
	fl.IntVar(&flows, "flows", 4096, "flows, each aimed at a different rule (at most one per rule)")
	fl.IntVar(&packets, "packets", 10000, "packets per point, at least")
	fl.DurationVar(&minTime, "min-time", 500*time.Millisecond, "traffic per point, at least (more packets at high loads)")
	fl.IntVar(&size, "size", 64, "Ethernet frame size in bytes, without FCS")
	fl.StringSliceVar(&duts, "dut", nil, "DUTs: "+strings.Join(bench.LatencyDUTs, ",")+" (default: all installed but nft-linear)")
	fl.BoolVar(&quick, "quick", false, "a small run that checks every DUT (light loads, 1 and 1,000 rules)")
	fl.StringVar(&report, "report", "", "write an HTML report (plots inside) with PNG plots and results.json into this directory")
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// sweepList reads the values of a sweep's list flag (name), each with
// parse; an empty element (the flag's "none") is left out.
func sweepList[T any](name string, vals []string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, s := range vals {
		if s == "" {
			continue
		}
		v, err := parse(s)
		if err != nil {
			return nil, usageError{fmt.Errorf("%s: %w", name, err)}
		}
		out = append(out, v)
	}
	return out, nil
}

// parseRate reads a packet rate: 2500, 10k, 1.5M.
func parseRate(s string) (float64, error) {
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"):
		s, mult = strings.TrimSuffix(s, "k"), 1e3
	case strings.HasSuffix(s, "M"):
		s, mult = strings.TrimSuffix(s, "M"), 1e6
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%q is not a packet rate (e.g. 2500, 10k, 1.5M)", s)
	}
	return v * mult, nil
}
