package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/firewall"
)

func newList(e *env) *cobra.Command {
	var asJSON, save, audit bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the rules in force, numbered, with packet and byte counters",
		Long: `list prints each chain's rules in evaluation order, numbered as 'delete' and
'add --position' count them, with the packets and bytes each rule decided,
then each chain's policy per family with its counters. A --vlan-id (or
--vlan-prio) rule that cannot see the VLAN tags of packets arriving on an interface (the NIC
strips them and XDP cannot read them there) says so, naming the interface;
status says why and the remedy. User-defined chains
follow the built-in ones, with the number of rules that jump (-j) or go
(-g) to each.

With -S (--list-rules), it prints the rule set as iptables -S does, without
counters: the policies (-P), the user chains (-N), then every rule (-A). That
text is a rule file: xdpfw apply reads it back into the same rules.

With --nat xdpfw in force (load), the nat table xdpfw translates with
follows, as -t nat lines (also with -S: the text reads back).

With --audit, it lists the candidate rule set under audit instead, with
what its rules counted (xdpfw audit list; docs/audit.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fw, err := e.openRead()
			if err != nil {
				return err
			}
			defer fw.Close()
			if audit {
				return printAudit(e, fw, asJSON)
			}
			l, err := fw.List()
			if err != nil {
				return err
			}
			if err := fw.AddVLANBlind(l); err != nil {
				return err
			}
			if asJSON {
				return e.printJSON(l)
			}
			if save {
				_, err := fmt.Fprint(e.stdout, l.Save())
				return err
			}
			return printListing(e, l, true)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVarP(&save, "list-rules", "S", false, "print the rules as iptables -S does (a rule file apply reads back)")
	cmd.Flags().BoolVar(&audit, "audit", false, "list the audited candidate's rules with their counters instead (as `xdpfw audit list`)")
	return cmd
}

// references counts the rules that jump or go to chain.
func references(l *firewall.Listing, chain string) int {
	n := 0
	for _, r := range l.Rules {
		if strings.HasSuffix(r.Rule, " -j "+chain) || strings.HasSuffix(r.Rule, " -g "+chain) ||
			strings.Contains(r.Rule, " -j "+chain+" ") || strings.Contains(r.Rule, " -g "+chain+" ") {
			n++
		}
	}
	return n
}

// printListing prints l as list does: the generation, the raw table, then
// each chain's rules with their counters (audit list too, for the
// candidate).
func printListing(e *env, l *firewall.Listing, generation bool) error {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	if generation {
		fmt.Fprintf(tw, "generation %d\n", l.Generation)
	}
	if len(l.Raw) > 0 {
		fmt.Fprintf(tw, "\nTable raw (before conntrack: what a rule matches is UNTRACKED)\n")
		for _, r := range l.Raw {
			fmt.Fprintln(tw, r)
		}
	}
	if len(l.Priority) > 0 {
		fmt.Fprintf(tw, "\nTable xdpfw-priority (the class of packets arriving: HIGH judged at once, BULK on the bulk CPUs)\n")
		for _, r := range l.Priority {
			fmt.Fprintln(tw, r)
		}
	}
	if len(l.NAT) > 0 {
		fmt.Fprintf(tw, "\nTable nat (xdpfw translates: load --nat xdpfw; a connection's translation is decided on its first packet, 'xdpfw conntrack list' shows it)\n")
		for _, r := range l.NAT {
			fmt.Fprintln(tw, r)
		}
	}
	chains := append([]string{"INPUT", "FORWARD", "OUTPUT"}, l.Chains...)
	for k, chain := range chains {
		if k < 3 {
			fmt.Fprintf(tw, "\nChain %s (policy", chain)
			for _, p := range l.Policies {
				if p.Chain == chain {
					fmt.Fprintf(tw, " %s %s %d pkts %d bytes;", p.Family, p.Verdict, p.Counter.Packets, p.Counter.Bytes)
				}
			}
			fmt.Fprintf(tw, ")\nnum\tpkts\tbytes\trule\n")
		} else {
			fmt.Fprintf(tw, "\nChain %s (%d references)\nnum\tpkts\tbytes\trule\n", chain, references(l, chain))
		}
		for _, r := range l.Rules {
			if r.Chain != chain {
				continue
			}
			fmt.Fprintf(tw, "%d\t%d\t%d\t%s", r.Num, r.Counter.Packets, r.Counter.Bytes, r.Rule)
			if r.Log != nil {
				fmt.Fprintf(tw, "   [logged %d, suppressed %d, lost %d]", r.Log.Emitted, r.Log.Suppressed, r.Log.Lost)
			}
			if len(r.VLANBlind) > 0 {
				fmt.Fprintf(tw, "   [-m vlan cannot see VLAN tags on %s: see status]", strings.Join(r.VLANBlind, ", "))
			}
			fmt.Fprintln(tw)
		}
	}
	return tw.Flush()
}
