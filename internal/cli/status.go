package cli

import (
	"cmp"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/telemetry"
)

func newStatus(e *env) *cobra.Command {
	var asJSON, lat bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show what is loaded: interfaces and attach modes, generation, counters by reason",
		Long: `status shows what is loaded: the program, the rule set's generation, the
settings in force, the interfaces and their attach modes, packets by reason.

--latency shows instead the per-packet processing time the data plane
measures (while sampling is on: load or stats --latency-sample N): p50,
p90, p99, p99.9 and max per chain and outcome, over every CPU
(docs/realtime.md).`,
		Example: `  xdpfw status
  xdpfw status --latency
  xdpfw status --latency --json | jq '.histograms[] | select(.count > 0)'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fw, err := e.openRead()
			if err != nil {
				if errors.Is(err, datapath.ErrNotLoaded) {
					return e.statusUnpinned(err, asJSON)
				}
				return err
			}
			defer fw.Close()
			if lat {
				l, err := telemetry.TakeLatency(fw.Datapath())
				if err != nil {
					return err
				}
				if asJSON {
					return e.printJSON(l)
				}
				return printLatency(e.stdout, l, false)
			}
			s, err := fw.Status()
			if err != nil {
				return err
			}
			if err := fw.AddDeviceWarnings(s); err != nil {
				return err
			}
			s.Log.Reader = telemetry.ReaderPID(e.paths.StateDir)
			if asJSON {
				return e.printJSON(s)
			}
			fmt.Fprintf(e.stdout, "xdpfw loaded: program id %d, pinned in %s\n", s.ProgramID, s.PinDir)
			fmt.Fprintf(e.stdout, "generation %d, %d rules, malformed packets: %s\n", s.Generation, s.Rules, s.Malformed)
			global := fmt.Sprintf("%d/s", s.Reject.GlobalRate)
			if s.Reject.GlobalRate == 0 {
				global = "no limit (the program in force predates it: load again)"
			}
			fmt.Fprintf(e.stdout, "REJECT answers per source: %d/s, %d at once; all sources together: %s\n", s.Reject.Rate, s.Reject.Burst,
				global)
			if d := s.Delta; d.Pending {
				fmt.Fprintf(e.stdout, "delta stage: %d added and %d deleted rules wait for a rebuild (%d of %d entries; 'xdpfw rebuild')\n",
					d.Added, d.Deleted, d.Entries, d.Capacity)
			} else {
				fmt.Fprintln(e.stdout, "delta stage: empty (no edit waits for a rebuild)")
			}
			fmt.Fprintln(e.stdout, workLine(s))
			if a := s.Audit; a != nil {
				where := ""
				if s.Priority.Table && s.Priority.CPUs != "none" { // priority on: BULK packets are audited on the bulk CPUs
					where = " (where they arrived and on the bulk CPUs)"
				}
				fmt.Fprintf(e.stdout, "audit: %s beside the rules in force, not enforced: %d packets seen%s, would drop %d, would accept %d ('xdpfw audit list')\n",
					cmp.Or(a.File, "a candidate"), a.Seen, where, a.WouldDrop, a.WouldAccept)
			}
			fmt.Fprintf(e.stdout, "classifier tables: %d entries, %d nodes, %d leaf slots per generation (%d KiB kernel memory with conntrack)\n",
				s.Limits.Entries, s.Limits.Nodes, s.Limits.LeafSlots, s.Limits.Bytes()>>10)
			fmt.Fprintf(e.stdout, "conntrack table: %d entries max (in use when a rule tests --ctstate; see 'xdpfw conntrack stats'); TCP pickup %s\n",
				s.Limits.Conntrack, s.CTTCPPickup)
			fmt.Fprintf(e.stdout, "kernel NAT: %s (the kernel's conntrack judges packets of connections its nat table translates; counter kernel_nat in 'xdpfw conntrack stats')\n",
				s.CTKernelNAT)
			if n := s.NAT; n.Mode == firewall.NATXdpfw {
				c := n.Counters
				fmt.Fprintf(e.stdout, "NAT: xdpfw translates (load --nat xdpfw): %d connections bound, %d destination-translated (DNAT, REDIRECT), %d bindings in force; dropped: %d no port, %d map full, %d no address, %d no REDIRECT address, %d binding lost, %d fragments, %d not in conntrack (table full); %d ICMP errors translated, %d stale bindings removed, %d packets left to the kernel's ICMP error, %d later fragments translated as their first ('xdpfw conntrack list' shows the translations)\n",
					c["bound"], c["dnat"], len(n.Bindings), c["no_port"], c["full"], c["no_addr"], c["no_local"], c["lost"], c["fragment"], c["no_conntrack"], c["icmp_error"], c["stale"], c["kernel_icmp"], c["frag_nat"])
				fmt.Fprintf(e.stdout, "NAT OUTPUT (connections this host opens, tc egress): %d destination-translated (DNAT); dropped: %d without a route to the translated destination\n",
					c["output"], c["no_route"])
			} else {
				fmt.Fprintln(e.stdout, "NAT: the kernel's (load --nat kernel)")
			}
			fmt.Fprintf(e.stdout, "fragment table: %d datagrams in flight at most (--ct-max/8; counters frag_* in 'xdpfw conntrack stats')\n",
				datapath.FragsFor(s.Limits.Conntrack))
			lg := s.Log
			fmt.Fprintf(e.stdout, "logging: %d rules log (LOG, --log), each at most %s, burst %d, unless it sets its own; events carry %d bytes of the packet\n",
				lg.Rules, lg.Rate, lg.Burst, lg.Snap)
			if lg.Rules > 0 || lg.Counter.Total.Emitted > 0 {
				reader := "no reader (xdpfw log)"
				if lg.Reader != "" {
					reader = "read by pid " + lg.Reader
				}
				fmt.Fprintf(e.stdout, "  events: %d emitted, %d suppressed by rate limits, %d lost to a full ring buffer; %s\n",
					lg.Counter.Total.Emitted, lg.Counter.Total.Suppressed, lg.Counter.Total.Lost, reader)
			}
			if n, err := fw.Datapath().LatencySample(); err == nil {
				fmt.Fprintf(e.stdout, "latency: %s\n", sampleText(n))
			}
			fmt.Fprintf(e.stdout, "priority: %s (docs/realtime.md, Priority)\n", s.Priority.State)
			if high, bulk, fallback, cpumap := s.Priority.Stats.Sum(); high+bulk+fallback+cpumap > 0 {
				fmt.Fprintf(e.stdout, "  high %d, bulk %d handed over (%d judged by the bulk CPUs), %d judged where they arrived (hand-over failed)\n",
					high, bulk, cpumap, fallback)
			}
			fwd := s.Forward
			if fwd.Mode != datapath.ForwardStack {
				if len(fwd.Ports) == 0 {
					fmt.Fprintf(e.stdout, "forwarding: %s (no attached interface takes the fast path: the kernel forwards what FORWARD accepts; docs/forward.md)\n",
						fwd.Mode)
				} else {
					fmt.Fprintf(e.stdout, "forwarding: %s (what FORWARD accepts between %s leaves from XDP once answered untranslated; the kernel forwards the rest; docs/forward.md)\n",
						fwd.Mode, strings.Join(fwd.Ports, ", "))
				}
			} else {
				fmt.Fprintln(e.stdout, "forwarding: stack (the kernel forwards what FORWARD accepts)")
			}
			for r := datapath.FwdReason(0); r < datapath.NumFwdReasons; r++ {
				if c := fwd.Counters[r.String()]; c.Packets > 0 {
					how := "by the kernel:"
					if r == datapath.FwdXDP {
						how = "in XDP:"
					}
					fmt.Fprintf(e.stdout, "  forwarded %-14s %-13s %12d pkts %14d bytes\n", how, r, c.Packets, c.Bytes)
				}
			}
			for _, p := range fwd.PPPoE {
				fmt.Fprintf(e.stdout, "  pppoe %s (docs/pppoe.md)\n", p)
			}
			for _, w := range fwd.PPPoEUnpaired {
				fmt.Fprintf(e.stdout, "  pppoe: %s\n", w)
			}
			if s.Sets > 0 {
				fmt.Fprintf(e.stdout, "named sets: %d with %d elements (all sets together hold at most %d; xdpfw set list)\n",
					s.Sets, s.SetElems, datapath.MaxSetElems)
			}
			names := make([]string, 0, len(s.Interfaces))
			for n := range s.Interfaces {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				i := s.Interfaces[n]
				if !i.Filtering {
					fmt.Fprintf(e.stdout, "interface %-16s NOT FILTERING: %s\n", n, i.Problem)
					continue
				}
				fmt.Fprintf(e.stdout, "interface %-16s ifindex %-4d mode %s\n", n, i.Index, i.Mode)
				if r := i.VLANReader; r != nil {
					fmt.Fprintf(e.stdout, "  vlan tags the NIC strips: read by xdpfw_rxvlan (program id %d, bound to %s), then program id %d\n",
						r.ID, n, r.Next)
				}
				if i.Problem != "" {
					fmt.Fprintf(e.stdout, "  warning: %s\n", i.Problem)
				}
				for _, w := range i.Warnings {
					fmt.Fprintf(e.stdout, "  warning: %s\n", w)
				}
			}
			fmt.Fprintln(e.stdout, "packets by reason:")
			for r := compile.Reason(0); r < compile.NumReasons; r++ {
				c := s.Reasons[r.String()]
				if c.Packets > 0 {
					fmt.Fprintf(e.stdout, "  %-27s %12d pkts %14d bytes\n", r, c.Packets, c.Bytes)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&lat, "latency", false, "show the per-packet processing time (p50/p90/p99/p99.9/max per chain and outcome)")
	return cmd
}

// statusUnpinned is status when nothing is pinned (notLoaded): xdpfw may
// still run on interfaces here, found through the kernel (the bpffs
// unmounted while something kept it alive). Then it lists them, and fails
// all the same: nothing can be managed until `xdpfw detach --all` removes
// them or `xdpfw load` takes them over.
func (e *env) statusUnpinned(notLoaded error, asJSON bool) error {
	rs, err := firewall.Unpinned(e.paths)
	if err != nil {
		return fmt.Errorf("%w; whether xdpfw still runs here without pins is not known: %v", notLoaded, err)
	}
	if len(rs) == 0 {
		return notLoaded
	}
	if asJSON {
		if err := e.printJSON(map[string]any{"pinned": false, "pin_dir": e.paths.PinDir, "running": rs}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "nothing pinned in %s, but the kernel runs xdpfw here:\n", e.paths.PinDir)
		for _, r := range rs {
			fmt.Fprintf(e.stdout, "interface %-16s ifindex %-4d %-9s link id %d, program id %d (tag %s)\n",
				r.Interface, r.Ifindex, r.Hook, r.LinkID, r.ProgramID, r.Tag)
		}
	}
	return fmt.Errorf("xdpfw filters %s but nothing is pinned in %s (was the bpffs unmounted?): "+
		"`xdpfw detach --all` removes it, `xdpfw load` takes its links over and pins them again", plural(len(rs), "link"), e.paths.PinDir)
}

// workLine is status's line on the most classifier work one packet can
// cause in the rules in force, against the data plane's own bound
// (docs/realtime.md, Worst-case work per packet).
func workLine(s *firewall.Status) string {
	b := s.Bound
	bound := fmt.Sprintf("the data plane's bound: %d trees, %d node steps, %d candidates, %d delta entries",
		b.Trees, b.Levels, b.Candidates, s.Delta.Capacity)
	w := s.Work
	if w == nil {
		return "worst case per packet: not recorded (rules put in force by an earlier version; apply them again); " + bound
	}
	return fmt.Sprintf("worst case per packet: %d trees, %d node steps, %d candidates (%d with the whole entry test) at %s, + %d delta entries; %s",
		w.Trees, w.Levels, w.Candidates, w.FullTests, w.Where, s.Delta.Entries, bound)
}
