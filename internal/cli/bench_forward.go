package cli

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/bench"
)

func newBenchForward(e *env) *cobra.Command {
	var (
		size     int
		duration time.Duration
		rounds   int
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "forward",
		Short: "Router CPU per forwarded packet: the kernel vs xdpfw (fast path off and on) vs a bare XDP FIB forwarder",
		Long: `forward measures routing. It builds three network namespaces, a generator,
a router and a sink (xdpfw-bench-{gen,dut,sink}-PID; 10.200.0.0/16 and
10.201.0.0/24), and removes them again, also on error or Ctrl-C.

The generator (an XDP program run in live-frames mode, on CPU 0) sends
IPv4/UDP frames to the sink's address through the router's MAC: one flow, or
every packet a new one. The router's ingress veth is polled by its own NAPI
thread, pinned to CPU 1, where the router forwards them by one of:

  kernel       the kernel (an XDP_PASS program on the ingress veth)
  xdpfw-stack  xdpfw deciding FORWARD (one stateless ACCEPT rule), the kernel
               forwarding (--forward stack)
  xdpfw-xdp    the same rule, forwarded by xdpfw's fast path in XDP
  xdp-fib      a bare XDP FIB forwarder (parse, bpf_fib_lookup, TTL, MACs,
               redirect): the floor

The sink's XDP program checks every frame it receives (the router's MACs,
TTL 63, a valid IPv4 checksum, no padding) and counts it. Each
configuration is checked first: every packet the router took in must reach
the sink intact, none otherwise. Then every configuration runs for
--duration per traffic, their order rotating, in --rounds rounds.

The router's cost is its NAPI thread's CPU time per packet the sink
received (ns/pkt): everything forwarding does runs there. cost vs kernel
and vs floor are medians of per-round ratios (the bars: xdpfw-xdp at most
1/3 of the kernel and 1.3x the floor). Other load on the machine lowers the
rates: run it on a quiet machine. docs/forward.md.`,
		Example: `  xdpfw bench forward
  xdpfw bench forward --rounds 5 --duration 2s --size 64 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case rounds < 1:
				return usageError{fmt.Errorf("--rounds must be at least 1")}
			case duration < 100*time.Millisecond || duration > 10*time.Minute:
				return usageError{fmt.Errorf("--duration %v: want 100ms..10m", duration)}
			case size < bench.MinFrameSize || size > bench.MaxFrameSize:
				return usageError{fmt.Errorf("--size %d: want %d..%d bytes", size, bench.MinFrameSize, bench.MaxFrameSize)}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := bench.Forward(ctx, bench.ForwardOptions{Size: size, Duration: duration, Rounds: rounds, Progress: e.stderr})
			if err != nil {
				return err
			}
			if asJSON {
				return e.printJSON(res)
			}
			writeForwardTable(e.stdout, res)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&size, "size", 64, "Ethernet frame size in bytes, without FCS")
	fl.DurationVar(&duration, "duration", time.Second, "traffic per run (one configuration, one traffic)")
	fl.IntVar(&rounds, "rounds", 3, "interleaved rounds")
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// writeForwardTable prints the medians, one line per traffic and
// configuration.
func writeForwardTable(w io.Writer, res *bench.ForwardResult) {
	fmt.Fprintf(w, "kernel %s, %d CPUs, %d B frames, %d rounds x %.1fs, load %s -> %s\n",
		res.Kernel, res.CPUs, res.Size, res.Rounds, res.Duration, res.Load[0], res.Load[1])
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "flows\tconfiguration\tMpps\tns/pkt (router)\tcost vs kernel\tcost vs floor\t\n")
	for _, p := range res.Points {
		fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.0f\t%.2f\t%.2f\t\n", p.Flows, p.Config, p.Mpps, p.NsPerPacket, p.VsKernel, p.VsFloor)
	}
	tw.Flush()
}
