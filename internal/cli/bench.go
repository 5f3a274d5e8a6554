package cli

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/bench"
	"github.com/xdpfw/xdpfw/internal/compile"
)

func newBench(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure xdpfw (micro: per-packet cost vs rule count; macro: drops over veth vs iptables)",
		Long: `bench measures xdpfw on this machine. It needs root and nothing else: it makes
its own network namespace and bpffs, and removes them.

  micro      per-packet cost of the XDP program (BPF_PROG_TEST_RUN) for growing
             rule sets, compile time, install time and kernel memory
  macro      packets dropped per second and DUT CPU per packet, live-frame traffic
             over a veth pair between two namespaces: xdpfw against a bare
             XDP_DROP and iptables, at several rule counts and frame sizes
  forward    router CPU per forwarded packet through three namespaces: the
             kernel (with and without a firewall) against xdpfw and a bare
             XDP FIB forwarder, every forwarded frame checked at the sink
  conntrack  established-flow vs new-flow cost with the stateful policy, and a
             full conntrack table
  edit       single edits (add, insert, delete, replace) on a large rule set:
             time until packets see them, and the rebuild after
  latency    one-way latency and jitter of forwarded packets at paced loads
             and rule counts, xdpfw against iptables, nftables and floors`,
	}
	cmd.AddCommand(newBenchMicro(e), newBenchMacro(e), newBenchForward(e), newBenchConntrack(e), newBenchEdit(e), newBenchLatency(e), newBenchPriority(e))
	return cmd
}

func newBenchConntrack(e *env) *cobra.Command {
	var (
		sizes  []int
		flows  int
		table  int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "conntrack",
		Short: "Established-flow vs new-flow cost, and behaviour with the conntrack table full",
		Long: `conntrack loads the classic stateful policy (ESTABLISHED,RELATED accept,
INVALID drop, filler rules, a last rule accepting udp/53) for each rule count
and measures, one packet per BPF_PROG_TEST_RUN (kernel-measured, so every
new-flow packet really is a new flow):
  established   a reply of a known flow: one lookup, the fast rule, an update
  new accepted  a new flow the last rule accepts: lookup miss, trees, insert
  new dropped   a new flow no rule accepts: lookup miss, trees, policy
Then it fills the table (--table entries) with accepted new flows and
measures a refused new flow and the known flow, which must still pass.`,
		Example: `  xdpfw bench conntrack
  xdpfw bench conntrack --sizes 10,10000 --flows 5000 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(sizes) == 0 || flows < 1 || table < 1 {
				return usageError{fmt.Errorf("--sizes, --flows and --table must be positive")}
			}
			res, err := bench.Conntrack(bench.CTOptions{Sizes: sizes, Flows: flows, TableMax: table, Progress: e.stderr})
			if err != nil {
				return err
			}
			if asJSON {
				return e.printJSON(res)
			}
			bench.WriteCTTable(e.stdout, res)
			return nil
		},
	}
	cmd.Flags().IntSliceVar(&sizes, "sizes", []int{10, 1000, 10000}, "rule counts")
	cmd.Flags().IntVar(&flows, "flows", 3000, "packets (distinct flows) per measurement")
	cmd.Flags().IntVar(&table, "table", 16384, "conntrack table size for the table-full phase")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newBenchMicro(e *env) *cobra.Command {
	var (
		sizes    []int
		families []string
		rounds   int
		repeat   int
		budget   time.Duration
		delta    int
		ruleset  string
		spread   int
		asJSON   bool
		latency  []uint
		audit    bool
		cold     int
	)
	cmd := &cobra.Command{
		Use:   "micro",
		Short: "Per-packet cost vs rule count, with BPF_PROG_TEST_RUN",
		Long: `micro loads one data plane per rule count and family, with a rule set of N
rules of which only the last matches the probe packet, then measures in
interleaved rounds (every size once per round) the program's ns/packet for
that probe and for a packet no rule matches. Ratios to the smallest size are
the median of per-round ratios, so a noisy machine's slow phases cancel out.
Every probe is checked to get the verdict claimed before measuring.

With --delta K (default 4), each round also measures the probes with K rules
in the delta stage (single edits waiting for a rebuild; rules no probe
matches, placed first so that every probe checks them all), and reports the
ratio to the empty delta stage.

--ruleset picks the rule set: disjoint (the default: distinct /24 or /64
sources with a UDP port each) or a ClassBench-style IPv4 set, generated
deterministically: classbench-acl (mostly hosts and exact services),
classbench-fw (wildcards and port ranges), classbench-ipc (a mix); their
prefixes nest and their ranges overlap. Tables that need more than the
default --max-rules are compiled with the smallest that holds them, which is
printed with the bytes per rule.

With --audit, each round also measures the last-rule and no-match probes
(and the --spread frames) with the rule set audited beside itself
(docs/audit.md): every packet is classified a second time by the
candidate, the worst case of an audit that sends no events.

With --spread K, each round also compares one frame repeated (warm: the same
path every packet) with K frames aimed at K different rules (at most the
rule count), in random order, each checked first to be decided by its rule.
A driver program copies the next frame over the test packet and tail-calls
xdpfw, timing each packet in the kernel; the same series with an empty
program in place of xdpfw is subtracted. p50/p90/p99 per packet.

With --latency-sample N[,N...] (e.g. 1,64), each round also measures the
last-rule probe with latency sampling 1 in N and reports the ratio to
sampling off (the cost of the data plane's latency histograms).

With --cold N (and --spread K), after the rounds N packets, the K frames in
turn, are run cache-cold, one at a time: before each, the benchmark reads a buffer
twice the size of the last-level cache on the CPU that runs the packet, so
the packet finds none of xdpfw's tables cached. It reports p50, p99, p99.9
and max per packet (BPF_PROG_TEST_RUN's duration, and xdpfw's own latency
histogram), an empty program measured the same way, the same frames without
eviction, and the frames whose walk takes the most steps, against the rule
set's worst case per packet (docs/realtime.md). Each eviction takes a few
milliseconds: 2,000 packets take some 10-30 seconds per rule set.`,
		Example: `  xdpfw bench micro
  xdpfw bench micro --sizes 1,1000,10000,100000 --rounds 21 --json
  xdpfw bench micro --family ipv4 --sizes 1000,10000,100000 --spread 100000
  xdpfw bench micro --family ipv4 --sizes 10000 --ruleset classbench-fw --spread 10000
  xdpfw bench micro --sizes 1,10000 --family ipv4 --latency-sample 1,64
  xdpfw bench micro --family ipv4 --sizes 100000 --spread 100000 --cold 2000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, f := range families {
				if f != "ipv4" && f != "ipv6" {
					return usageError{fmt.Errorf("--family %q: ipv4 or ipv6", f)}
				}
			}
			if len(sizes) == 0 || rounds < 1 || repeat < 1 {
				return usageError{fmt.Errorf("--sizes, --rounds and --repeat must be positive")}
			}
			if spread < 0 {
				return usageError{fmt.Errorf("--spread %d: a frame count, 0 for none", spread)}
			}
			if cold < 0 || cold > 0 && spread == 0 {
				return usageError{fmt.Errorf("--cold %d: a packet count, with --spread K (it runs those frames cold, in turn)", cold)}
			}
			if !slices.Contains(bench.RuleSets, ruleset) {
				return usageError{fmt.Errorf("--ruleset %q: one of %s", ruleset, strings.Join(bench.RuleSets, ", "))}
			}
			if ruleset != bench.RuleSetDisjoint && slices.Contains(families, "ipv6") {
				return usageError{fmt.Errorf("--ruleset %s is IPv4 only: add --family ipv4", ruleset)}
			}
			if delta < 0 || delta > compile.DeltaMax {
				return usageError{fmt.Errorf("--delta %d: from 0 to %d", delta, compile.DeltaMax)}
			}
			for _, n := range sizes {
				if n < 1 {
					return usageError{fmt.Errorf("--sizes: %d is not a rule count", n)}
				}
			}
			var samples []uint32
			for _, n := range latency {
				if n < 1 || n > 1<<31 {
					return usageError{fmt.Errorf("--latency-sample %d: 1 in N, N from 1 (off is always measured)", n)}
				}
				samples = append(samples, uint32(n))
			}
			progress := e.stderr
			fmt.Fprintf(progress, "xdpfw bench micro: %v rules, %v, %d rounds x %d runs\n", sizes, families, rounds, repeat)
			res, err := bench.Micro(bench.MicroOptions{Sizes: sizes, Families: families, Rounds: rounds,
				Repeat: repeat, Budget: budget, Progress: progress, Delta: delta, RuleSet: ruleset, Spread: spread,
				LatencySamples: samples, Audit: audit, Cold: cold})
			if err != nil {
				return err
			}
			if asJSON {
				return e.printJSON(res)
			}
			bench.WriteTable(e.stdout, res)
			fmt.Fprintln(e.stdout)
			bench.WriteSpreadTable(e.stdout, res)
			bench.WriteAuditCost(e.stdout, res)
			bench.WriteColdTable(e.stdout, res)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntSliceVar(&sizes, "sizes", []int{1, 10, 100, 1000, 10000, 100000}, "rule counts (the first is the ratios' base)")
	fl.StringSliceVar(&families, "family", []string{"ipv4", "ipv6"}, "ipv4, ipv6 or both")
	fl.IntVar(&rounds, "rounds", 11, "interleaved rounds")
	fl.IntVar(&repeat, "repeat", 200000, "BPF_PROG_TEST_RUN runs per measurement")
	fl.DurationVar(&budget, "time-budget", 3*time.Minute, "stop starting rounds after this long (at least 3 rounds run)")
	fl.IntVar(&delta, "delta", 4, "rules in the delta stage for the second set of measurements (0: none)")
	fl.StringVar(&ruleset, "ruleset", bench.RuleSetDisjoint, "rule set: "+strings.Join(bench.RuleSets, ", "))
	fl.IntVar(&spread, "spread", 0, "also measure K frames aimed at K different rules against one repeated (0: no)")
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	fl.UintSliceVar(&latency, "latency-sample", nil, "also measure latency sampling 1 in N for each N given, beside off")
	fl.IntVar(&cold, "cold", 0, "also run N packets of the --spread frames cache-cold, one at a time (0: no)")
	fl.BoolVar(&audit, "audit", false, "also measure the probes with the rule set audited beside itself (docs/audit.md)")
	return cmd
}

func newBenchEdit(e *env) *cobra.Command {
	var (
		n      int
		rounds int
		noCLI  bool
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "edit",
		Short: "Single edits on a large rule set: time until packets see them, and the rebuild",
		Long: `edit loads N rules (the micro benchmark's rule set, IPv4) with the firewall
API, attached in generic mode to a veth pair in a throwaway namespace, with a
private bpffs and state directory, all removed at the end. Then, per round, it
makes pairs of single edits that leave the rule set as it was: append and
delete it, insert at 1 and delete it, delete a loaded rule 1 and insert it
back, replace the middle rule and replace it back. For each it measures:

  api_visible  from firewall.Open (which reads the state) to the moment a packet
               run through the loaded program (BPF_PROG_TEST_RUN, polled every
               ~50 us) gets the new verdict
  cli_visible  the same from starting 'xdpfw <edit> --no-rebuild' as a process
  rebuild      firewall.Open + Rebuild: the edit folded into new trees and the
               delta stage cleared (the probe is checked again after it)`,
		Example: `  xdpfw bench edit
  xdpfw bench edit --rules 10000 --rounds 5 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 4 || rounds < 1 {
				return usageError{fmt.Errorf("--rules must be at least 4 and --rounds positive")}
			}
			bin := ""
			if !noCLI {
				var err error
				if bin, err = os.Executable(); err != nil {
					return fmt.Errorf("finding the xdpfw binary: %w", err)
				}
			}
			fmt.Fprintf(e.stderr, "xdpfw bench edit: %d rules, %d rounds\n", n, rounds)
			res, err := bench.Edit(bench.EditOptions{Rules: n, Rounds: rounds, Binary: bin, Progress: e.stderr})
			if err != nil {
				return err
			}
			if asJSON {
				return e.printJSON(res)
			}
			bench.WriteEditTable(e.stdout, res)
			return nil
		},
	}
	cmd.Flags().IntVar(&n, "rules", 100000, "rules loaded")
	cmd.Flags().IntVar(&rounds, "rounds", 3, "rounds (each makes every edit once)")
	cmd.Flags().BoolVar(&noCLI, "no-cli", false, "time the Go API only, not the xdpfw commands")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newBenchPriority(e *env) *cobra.Command {
	var (
		opt      bench.PriorityOptions
		bulkRate string
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "priority",
		Short: "Latency of a HIGH flow under paced bulk load, with the priority table's bulk CPU on and off",
		Long: `priority loads a rule file whose xdpfw-priority table makes UDP port 7 HIGH
(the stateful policy, --rules filler rules, UDP 7 and 9 accepted) on a veth
between two namespaces (native mode; the DUT's NAPI thread on one CPU, the
receiving CPU; the senders and the bulk CPU on the other), and measures the
one-way latency of a paced probe flow to port 7: from the moment the
generator's veth hands a probe to the DUT veth's queue (its software
transmit stamp) to the DUT socket's receive stamp (SO_TIMESTAMPNS, after
XDP judged it). The probe sender's own delay before the veth is reported
apart, not counted.

The bulk load (UDP to port 9, 64 flows, 60-byte frames) is paced, at
--bulk-rate: a percentage of the calibrated capacity (150% by default: the
bar's "150 % of what one CPU can handle") or packets per second. The
capacity is calibrated first, priority off: bulk flat out for 2 s, the
packets xdpfw judged divided by the CPU time of the receiving CPU's NAPI
thread (what one CPU judges per second of its time, whatever else runs
on it). --bulk-sender frames (the default): live frames from a BPF
program (BPF_PROG_RUN), which spaces them evenly itself (each packet
waits for start + k/rate; only the first of a flush's burst waits, a
burst being at most 64 frames at 6.4 Mpkt/s and fewer below); the DUT
receives them as frames from a NIC. --bulk-sender packet: an AF_PACKET
socket (qdisc bypassed, sendmmsg) paced from Go: it wakes every 50 us and
sends what the rate made since (a token bucket that never catches up
more than 0.5 ms at once; the rest is counted missed); the veth copies
each of its skbs, and one CPU sends less than the receiving CPU judges.
The bulk offered is counted where it arrives: what the DUT veth took from
its queue or dropped because it was full, while the probes ran. A sender
that falls short (preempted, starting late) is asked for more in the
next slice, up to twice the rate; the report gives the rate asked for
and the rate that arrived, and says when it fell short.

Both senders run on the other CPU, SCHED_FIFO, the probe sender above the
bulk sender; that CPU is also the bulk CPU with priority on, so there the
cpumap's kthread, a normal thread, gets little of it (a 2-CPU machine has
no third CPU).

Four phases: without bulk and with it, each with priority off (everything
judged on the receiving CPU) and on (BULK handed to the other CPU through
a cpumap), interleaved in --rounds slices. The bar: the HIGH flow's p99
with bulk and priority on <= 1.5x its p99 without bulk
(docs/realtime.md, Priority).`,
		Example: `  xdpfw bench priority
  xdpfw bench priority --bulk-rate 300%
  xdpfw bench priority --bulk-rate 200k --duration 20s --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if opt.BulkRate, err = bench.ParseBulkRate(bulkRate); err != nil {
				return err
			}
			if !asJSON {
				opt.Progress = e.stdout
			} else {
				opt.Progress = e.stderr
			}
			res, err := bench.Priority(opt)
			if err != nil {
				return err
			}
			if asJSON {
				return e.printJSON(res)
			}
			offered := res.Phases[3].BulkOffered
			fmt.Fprintf(e.stdout, "HIGH flow p99 under bulk offering %.2fx what one receiving CPU judges (%.0f pkt/s, asked %.0f): "+
				"priority on %.2fx its p99 without bulk (bar 1.5x), priority off %.2fx; "+
				"priority on %.2fx the p99 of both phases without bulk pooled (%.0f us)\n",
				offered/res.Capacity, offered, res.Target, res.Ratio, res.RatioOff, res.RatioQuiet, res.QuietP99)
			if !res.Reached {
				fmt.Fprintf(e.stdout, "the bulk sender did not reach the rate asked for (95 %% of %.0f pkt/s) in every bulk phase\n", res.Target)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.DurationVar(&opt.Duration, "duration", 10*time.Second, "length of each of the four phases, all its slices together")
	fs.IntVar(&opt.Rounds, "rounds", 10, "slices each phase is measured in, interleaved with the other phases' (the machine's own load falls on all four alike)")
	fs.IntVar(&opt.ProbeRate, "probe-rate", 2000, "HIGH probes per second")
	fs.StringVar(&bulkRate, "bulk-rate", "150%", "bulk load, paced: a percentage of what one receiving CPU judges per second of its time (calibrated first), or packets per second (300000, 300k, 1.2M)")
	fs.StringVar(&opt.Sender, "bulk-sender", bench.BulkFrames, "what sends bulk: frames (live frames from a BPF program, paced in it; a NIC's path at the DUT) or packet (an AF_PACKET socket, paced from Go; each frame an skb the veth copies)")
	fs.IntVar(&opt.Rules, "rules", 1000, "filler rules")
	fs.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}
