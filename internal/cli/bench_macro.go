package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/xdpfw/xdpfw/internal/bench"
)

func newBenchMacro(e *env) *cobra.Command {
	var (
		rulesN   []int
		sizes    []int
		duts     []string
		duration time.Duration
		rounds   int
		report   string
		spread   bool
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "macro",
		Short: "Drop rate and CPU per packet over veth: xdpfw vs XDP_DROP vs iptables and nftables",
		Long: `macro measures whole-system packet drops. It builds its own topology — two
network namespaces (xdpfw-bench-gen-PID, xdpfw-bench-dut-PID) joined by a veth
pair, 10.200.0.0/16 — and removes it again, also on error or Ctrl-C.

A traffic generator (an XDP program run with BPF_PROG_RUN in live-frames mode)
on CPU 0 sends IPv4/UDP frames into the veth, every packet a new flow (new
source port, then new source address). On the other side, the DUT's veth is
polled by its own NAPI thread, pinned to CPU 1, where one of these drops them:

  xdp-drop         a bare XDP_DROP program: the floor, the least XDP can cost
  xdpfw            the firewall with the rule set below (native XDP)
  iptables-nft     the same rule text in the DUT's namespace (iptables-restore)
  iptables-legacy  likewise with the x_tables back end, if installed
  nft-linear       the same rules written natively for nft, one per rule
  nft-set          nftables best practice: one rule looking (source address,
                   UDP port) up in a concatenated interval set holding every
                   rule's pair (all of the rules drop)

The rule set has N rules of which only the last matches the traffic. For each
rule count and frame size ("a point"), every DUT runs for --duration, their
order rotating from point to point, in --rounds interleaved rounds (odd ones
walk the points backwards); ratios are medians of per-round ratios measured
side by side. Before measuring, each
DUT is checked to drop the generated packets with its intended rule (its
counter must equal what the veth delivered).

With --spread the traffic walks the whole rule set instead: packet i takes
the source address and UDP port of rule perm(i mod N), a fixed random order
of all N rules (the last rule's pair from its /17), so consecutive packets
hit different rules, as under a scan or randomly sourced traffic. Every rule
drops; the counts are then every rule's counters summed (nft-linear gets a
counter on every rule, as iptables-nft has), and xdpfw is checked first to
drop each rule's frame with that rule.

Per run it counts packets offered (generator), dropped by the intended rule
(xdpfw's rule counter, the XDP_DROP program's counter, iptables-save -c,
the counter of nft's intended rule), and
the DUT's CPU time: the NAPI thread's own (ns/pkt) and the DUT CPU's softirq +
system time from /proc/stat (stat_ns; includes anything else on that CPU).
Other load on the machine lowers drop rates: run it on a quiet machine.
It pins nothing under --pin-dir: the data planes it loads live in a private
bpffs that goes away with the run. See docs/bench.md for the method and the
caveats of a veth.`,
		Example: `  # everything, about 4 minutes on 2 CPUs; the total is printed first
  xdpfw bench macro

  # steadier medians (the README's run): 5 rounds, report with plots
  xdpfw bench macro --rounds 5 --report /tmp/macro

  # a quick look at 64-byte frames, with an HTML report and PNG plots
  xdpfw bench macro --rules 1,1000,10000 --sizes 64 --duration 2s --report /tmp/macro

  # traffic spread over every rule, 64-byte frames
  xdpfw bench macro --spread --rules 1000,10000,60000 --sizes 64

  # xdpfw against the floor only, as JSON
  xdpfw bench macro --dut xdp-drop,xdpfw --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opt := bench.MacroOptions{Rules: rulesN, Sizes: sizes, Duration: duration, Rounds: rounds, Progress: e.stderr, Spread: spread}
			explicit := cmd.Flags().Changed("dut")
			if !explicit {
				duts = bench.AvailableDUTs()
			}
			if err := checkMacroFlags(opt, duts); err != nil {
				return usageError{err}
			}
			if explicit {
				opt.DUTs = duts
			}
			n := len(duts)
			fmt.Fprintf(e.stderr, "xdpfw bench macro: rules %v, frames %v B, %d DUTs, %d rounds x %v per run: about %v in all\n",
				rulesN, sizes, n, rounds, duration, bench.EstimateMacro(opt, n).Round(time.Second))

			return runBench(e, cmd, benchOut[*bench.MacroResult]{report: report, asJSON: asJSON,
				writeReport: bench.WriteMacroReport, table: bench.WriteMacroTable},
				func(ctx context.Context) (*bench.MacroResult, error) { return bench.Macro(ctx, opt) },
				func(r *bench.MacroResult, c string) { r.Command = c })
		},
	}
	fl := cmd.Flags()
	fl.IntSliceVar(&rulesN, "rules", []int{1, 100, 1000, 10000}, "rule counts")
	fl.IntSliceVar(&sizes, "sizes", []int{64, 128, 512, 1024}, "Ethernet frame sizes in bytes, without FCS")
	fl.StringSliceVar(&duts, "dut", nil, "DUTs to measure: "+strings.Join(bench.AllDUTs, ",")+" (default: all whose tools are installed)")
	fl.DurationVar(&duration, "duration", time.Second, "traffic per run (one DUT at one point)")
	fl.IntVar(&rounds, "rounds", 3, "interleaved rounds")
	fl.BoolVar(&spread, "spread", false, "walk the whole rule set: each packet aimed at the next rule of a random order")
	fl.StringVar(&report, "report", "", "write an HTML report with PNG plots into this directory")
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// checkMacroFlags refuses bad values before anything is set up.
func checkMacroFlags(opt bench.MacroOptions, duts []string) error {
	switch {
	case len(opt.Rules) == 0 || len(opt.Sizes) == 0 || len(duts) == 0:
		return fmt.Errorf("--rules, --sizes and --dut need at least one value")
	case opt.Rounds < 1:
		return fmt.Errorf("--rounds must be at least 1")
	case opt.Duration < 100*time.Millisecond || opt.Duration > 10*time.Minute:
		return fmt.Errorf("--duration %v: want 100ms..10m", opt.Duration)
	}
	for _, n := range opt.Rules {
		if n < 1 || n > bench.MaxMacroRules {
			return fmt.Errorf("--rules: %d: want 1..%d", n, bench.MaxMacroRules)
		}
	}
	for _, s := range opt.Sizes {
		if s < bench.MinFrameSize || s > bench.MaxFrameSize {
			return fmt.Errorf("--sizes: %d: want %d..%d bytes", s, bench.MinFrameSize, bench.MaxFrameSize)
		}
	}
	for _, d := range duts {
		if !slices.Contains(bench.AllDUTs, d) {
			return fmt.Errorf("--dut %q: want %s", d, strings.Join(bench.AllDUTs, ", "))
		}
	}
	return nil
}

// benchOut is where a live benchmark's result goes: a report directory
// (with --report), JSON or its table.
type benchOut[R any] struct {
	report      string
	asJSON      bool
	writeReport func(dir string, res R) error
	table       func(w io.Writer, res R)
}

// runBench runs a live benchmark until it ends or Ctrl-C (SIGINT,
// SIGTERM: it cleans up and returns), records the command line that
// repeats it, and writes its result.
func runBench[R any](e *env, cmd *cobra.Command, out benchOut[R], run func(context.Context) (R, error), setCommand func(R, string)) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx)
	if err != nil {
		return err
	}
	setCommand(res, benchCommand(cmd))
	if out.report != "" {
		if err := out.writeReport(out.report, res); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
		fmt.Fprintf(e.stderr, "report: %s/index.html\n", out.report)
	}
	if out.asJSON {
		return e.printJSON(res)
	}
	out.table(e.stdout, res)
	return nil
}

// benchCommand is the command line that repeats this run.
func benchCommand(cmd *cobra.Command) string {
	s := cmd.CommandPath()
	cmd.Flags().Visit(func(f *pflag.Flag) {
		switch {
		case f.Name == "json" || f.Name == "report":
		case f.Value.Type() == "bool" && f.Value.String() == "true":
			s += " --" + f.Name
		case f.Value.Type() == "bool":
			s += " --" + f.Name + "=" + f.Value.String()
		default:
			s += " --" + f.Name + " " + strings.Trim(f.Value.String(), "[]")
		}
	})
	return s
}
