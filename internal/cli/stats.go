package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/telemetry"
)

func newStats(e *env) *cobra.Command {
	var asJSON, prom, all, lat, resetLat bool
	var sample uint32
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Show every counter: per rule (with last hit), per policy, by reason, by XDP/tc action, conntrack",
		Long: `stats reads every counter the data plane keeps, at one moment:

  rules       packets, bytes and the time of the last packet each rule decided,
              with the rule's number, its text and a stable hash of the text
              (the hash labels the rule in metrics; numbers shift on insert)
  policies    packets each chain's policy decided, per family
  reasons     packets by why they got their verdict (rule-accept, rule-drop,
              policy-drop, malformed-*, conntrack-full, reject-*...) and how
              many of them were dropped
  actions     packets by what the programs returned: XDP_PASS, XDP_DROP,
              XDP_TX (REJECT answers) at ingress; TC_ACT_OK, TC_ACT_SHOT at egress
  forwarded   packets FORWARD accepted by how they were forwarded: xdp (the
              fast path), or by the kernel and why (stack, no-neighbour, ttl,
              mtu, ...; docs/forward.md)
  conntrack   connections by state, and events (created, table full, invalid,
              expired entries replaced)
  programs    run count and run time of the two programs, when the kernel
              collects them (sysctl kernel.bpf_stats_enabled=1)
  latency     per-packet processing time in the data plane by chain and
              outcome (accept, drop, reject, pass): mean, p50, p90, p99,
              p99.9, max over the sampled packets of every CPU, while
              --latency-sample N (here or at load) times one packet in N
              (docs/realtime.md)

--latency shows the latency section alone (--json: its JSON).
--latency-sample N changes the sampling of the running data plane (0: off);
--reset-latency empties the histograms. Both take effect at once, before
anything is printed.

Counters count since the data plane was first loaded; a rule's since it got
its id (a rule whose text is unchanged keeps its counters across apply).
Last hit has the kernel tick's resolution (a few ms). stats never waits for a
change in progress (it takes no lock). Rates: xdpfw top.`,
		Example: `  xdpfw stats
  xdpfw stats --json | jq '.rules[] | select(.packets > 0) | {chain, num, rule, packets, last_hit}'
  xdpfw stats --prometheus > /var/lib/node_exporter/textfile/xdpfw.prom
  xdpfw stats --latency-sample 64 --reset-latency; sleep 60; xdpfw stats --latency`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON && prom {
				return usageError{fmt.Errorf("--json and --prometheus: choose one")}
			}
			if lat && prom {
				return usageError{fmt.Errorf("--latency and --prometheus: choose one (the metrics hold the histograms)")}
			}
			if err := e.latencyControl(cmd.Flags().Changed("latency-sample"), sample, resetLat); err != nil {
				return err
			}
			s, err := telemetry.Take(e.paths)
			if err != nil {
				return err
			}
			switch {
			case lat && asJSON:
				return e.printJSON(s.Latency)
			case lat:
				return printLatency(e.stdout, s.Latency, all)
			case asJSON:
				return e.printJSON(s)
			case prom:
				return telemetry.WriteExposition(e.stdout, s)
			}
			return printStats(e.stdout, s, all)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&prom, "prometheus", false, "print the Prometheus text exposition (what /metrics serves) once")
	cmd.Flags().BoolVar(&all, "all", false, "also list reasons, actions and latency histograms that counted nothing")
	cmd.Flags().BoolVar(&lat, "latency", false, "show only the per-packet processing time (latency histograms)")
	cmd.Flags().BoolVar(&resetLat, "reset-latency", false, "empty the latency histograms first")
	cmd.Flags().Uint32Var(&sample, "latency-sample", 0, latencySampleHelp)
	return cmd
}

func printStats(w io.Writer, s *telemetry.Snapshot, all bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "generation %d, %d rules, program id %d, at %s\n", s.Generation, len(s.Rules), s.ProgramID,
		s.Time.Format("2006-01-02 15:04:05"))
	var ifs []string
	for _, i := range s.Interfaces {
		ifs = append(ifs, fmt.Sprintf("%s (%s)", i.Name, i.State()))
	}
	fmt.Fprintf(tw, "interfaces: %s\n", strings.Join(ifs, ", "))

	fmt.Fprintf(tw, "\nchain\tnum\tpackets\tbytes\tlast hit\thash\trule\n")
	for _, r := range s.Rules {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\n", r.Chain, r.Num, r.Packets, r.Bytes, ago(r.Last, s.Time), r.Hash, r.Text)
	}
	fmt.Fprintf(tw, "\nchain\tfamily\tpolicy\tpackets\tbytes\tlast hit\n")
	for _, p := range s.Policies {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", p.Chain, p.Family, p.Verdict, p.Packets, p.Bytes, ago(p.Last, s.Time))
	}
	fmt.Fprintf(tw, "\nreason\tpackets\tbytes\tdropped\tlast\n")
	for _, r := range s.Reasons {
		if all || r.Packets > 0 {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", r.Reason, r.Packets, r.Bytes, r.Dropped, ago(r.Last, s.Time))
		}
	}
	fmt.Fprintf(tw, "\nforwarded\tpackets\tbytes\tlast\n")
	for _, f := range s.Forward {
		if all || f.Packets > 0 {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", f.How, f.Packets, f.Bytes, ago(f.Last, s.Time))
		}
	}
	fmt.Fprintf(tw, "\nhook\taction\tpackets\tbytes\tlast\n")
	for _, a := range s.Actions {
		if all || a.Packets > 0 {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", a.Hook, a.Action, a.Packets, a.Bytes, ago(a.Last, s.Time))
		}
	}
	ct := s.Conntrack
	fmt.Fprintf(tw, "\nconntrack: %d of %d entries (%d expired, not yet collected)", ct.Entries, ct.Max, ct.Expired)
	var parts []string
	for _, st := range sortedKeys(ct.ByState) {
		if n := ct.ByState[st]; n > 0 || all {
			parts = append(parts, fmt.Sprintf("%s %d", st, n))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(tw, "; %s", strings.Join(parts, ", "))
	}
	parts = parts[:0]
	for _, ev := range sortedKeys(ct.Events) {
		parts = append(parts, fmt.Sprintf("%s %d", ev, ct.Events[ev]))
	}
	fmt.Fprintf(tw, "\nconntrack events: %s\n", strings.Join(parts, ", "))
	if !s.BPFStats {
		fmt.Fprintf(tw, "programs: run time not being collected (sysctl kernel.bpf_stats_enabled=0)\n")
	}
	for _, p := range s.Programs {
		frozen := ""
		if !s.BPFStats {
			frozen = " (counted while it was)"
		}
		fmt.Fprintf(tw, "program %s (%s, id %d): %d runs, %s run time%s%s\n", p.Name, p.Hook, p.ID, p.Runs,
			p.RunTime.Round(time.Microsecond), perRun(p), frozen)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return printLatency(w, s.Latency, all)
}

func perRun(p telemetry.Program) string {
	if p.Runs == 0 {
		return ""
	}
	return fmt.Sprintf(", %.0f ns per run", float64(p.RunTime.Nanoseconds())/float64(p.Runs))
}

// ago says how long before now t was ("never" for the zero time).
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms ago", max(d.Milliseconds(), 0))
	case d < time.Minute:
		return fmt.Sprintf("%.1fs ago", d.Seconds())
	case d < 48*time.Hour:
		return d.Truncate(time.Second).String() + " ago"
	}
	return t.Format("2006-01-02 15:04")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
