package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/bench"
)

func newBenchForward(e *env) *cobra.Command {
	var (
		quick, asJSON bool
		report        string
	)
	def := bench.DefaultForwardOptions()
	opt := def
	cmd := &cobra.Command{
		Use:   "forward",
		Short: "Router CPU per forwarded packet: the kernel (with and without a firewall) vs xdpfw vs a bare XDP FIB forwarder",
		Long: `forward measures routing. It builds three network namespaces, a generator,
a router and a sink (xdpfw-bench-{gen,dut,sink}-PID; 10.200.0.0/16 and
10.220.0.0/16), and removes them again, also on error or Ctrl-C.

The generator (an XDP program run in live-frames mode, on CPU 0) sends
IPv4/UDP frames to the sink's address through the router's MAC: one flow,
or 8,192 flows whose destination ports walk the FORWARD rules. The router's
ingress veth is polled by its own NAPI thread, pinned to CPU 1, where the
router forwards them by one of:

  kernel-fwd   the kernel, no firewall (an XDP_PASS program on the veths)
  iptables     the kernel with a stateful FORWARD chain in iptables-nft:
               ESTABLISHED,RELATED accepted, then --rules NEW rules, one
               port each, policy DROP
  nftables     the same chain in native nftables
  xdpfw-stack  xdpfw with the same rules (iptables syntax), the kernel
               forwarding (--forward stack)
  xdpfw-xdp    the same, forwarded by xdpfw's fast path in XDP
  xdpfw-kmasq  xdpfw-xdp beside the kernel's MASQUERADE (its nat table):
               the kernel forwards and translates
  xdp-fwd      a bare XDP FIB forwarder (parse, bpf_fib_lookup, TTL, MACs,
               redirect): the floor
  xdpfw-nat    xdpfw-xdp translating itself (load --nat xdpfw) with
               -t nat -A POSTROUTING -o <egress> -j MASQUERADE: every flow
               masqueraded by a binding made before the run

For the stateful configurations every flow is made an established
connection before each run: its first packet from the generator's
namespace, its reply from the sink's, through the router. Each
configuration is checked at every point first: the sink's XDP program
checks every frame (the router's MACs, TTL 63, valid IPv4 and UDP
checksums, no padding, the addresses, translated or not, and each flow
arriving with one tuple: its own, or for xdpfw-nat the one its binding
names), and every packet the router took in must be accounted for:
received intact, or refused by a full ring (counted), and taken by the
path intended (the ESTABLISHED rule's counter, xdpfw's forwarding reason,
the floor's redirects; for xdpfw-nat no binding made or missed in the
run). Then every
configuration runs for --duration per point, their order rotating, in
--rounds rounds; each round visits every --routes count (extra routes:
random /24s via the sink, added or removed between counts).

The router's cost is its NAPI thread's CPU time per packet forwarded
(ns/pkt), the honest measure on two CPUs (docs/bench.md). "vs kernel" and
"vs floor" are medians of per-round ratios; the bars of issue 16 are
evaluated at the end. Other load on the machine lowers the rates: run it
on a quiet machine.`,
		Example: `  # every configuration, 64 and 1,514 B, one and many flows, 0 and 100,000 routes (about 3 minutes)
  xdpfw bench forward --report /tmp/forward

  # a check of every configuration and one short run each (seconds)
  xdpfw bench forward --quick

  # the fast path against the references only, as JSON
  xdpfw bench forward --config xdpfw-xdp --sizes 64 --routes 0 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if quick {
				q := bench.QuickForwardOptions()
				fl := cmd.Flags()
				for name, set := range map[string]func(){
					"sizes": func() { opt.Sizes = q.Sizes }, "flows": func() { opt.Flows = q.Flows },
					"routes": func() { opt.Routes = q.Routes }, "duration": func() { opt.Duration = q.Duration },
					"rounds": func() { opt.Rounds = q.Rounds },
				} {
					if !fl.Changed(name) {
						set()
					}
				}
			}
			if opt.Duration < 50*time.Millisecond || opt.Duration > 10*time.Minute {
				return usageError{fmt.Errorf("--duration %v: want 50ms..10m", opt.Duration)}
			}
			if err := opt.Validate(); err != nil {
				return usageError{err}
			}
			opt.Progress = e.stderr
			return runBench(e, cmd, benchOut[*bench.ForwardResult]{report: report, asJSON: asJSON,
				writeReport: bench.WriteForwardReport, table: bench.WriteForwardTable},
				func(ctx context.Context) (*bench.ForwardResult, error) { return bench.Forward(ctx, opt) },
				func(r *bench.ForwardResult, c string) { r.Command = c })
		},
	}
	fl := cmd.Flags()
	fl.IntSliceVar(&opt.Sizes, "sizes", def.Sizes, "Ethernet frame sizes in bytes, without FCS")
	fl.StringSliceVar(&opt.Flows, "flows", def.Flows, "traffics: many (8,192 flows over the rules), one")
	fl.IntSliceVar(&opt.Routes, "routes", def.Routes, "extra routes in the router's table, ascending")
	fl.StringSliceVar(&opt.Configs, "config", nil, "configurations: "+strings.Join(bench.ForwardConfigs, ",")+" (default: all; kernel-fwd and xdp-fwd always)")
	fl.IntVar(&opt.Rules, "rules", def.Rules, "NEW rules of the stateful FORWARD chain")
	fl.DurationVar(&opt.Duration, "duration", def.Duration, "traffic per run (one configuration at one point)")
	fl.IntVar(&opt.Rounds, "rounds", def.Rounds, "interleaved rounds")
	fl.BoolVar(&quick, "quick", false, "64 B, no extra routes, one round of 100ms: every configuration checked, in seconds")
	fl.StringVar(&report, "report", "", "write an HTML report with PNG plots and results.json into this directory")
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
