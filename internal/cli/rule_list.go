package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newList(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the rules in force, numbered, with packet and byte counters",
		Long: `list prints each chain's rules in evaluation order, numbered as 'delete' and
'add --position' count them, with the packets and bytes each rule decided,
then each chain's policy per family with its counters.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fw, err := e.openRead()
			if err != nil {
				return err
			}
			defer fw.Close()
			l, err := fw.List()
			if err != nil {
				return err
			}
			if asJSON {
				return e.printJSON(l)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "generation %d\n", l.Generation)
			if len(l.Raw) > 0 {
				fmt.Fprintf(tw, "\nTable raw (before conntrack: what a rule matches is UNTRACKED)\n")
				for _, r := range l.Raw {
					fmt.Fprintln(tw, r)
				}
			}
			for _, chain := range []string{"INPUT", "FORWARD", "OUTPUT"} {
				fmt.Fprintf(tw, "\nChain %s (policy", chain)
				for _, p := range l.Policies {
					if p.Chain == chain {
						fmt.Fprintf(tw, " %s %s %d pkts %d bytes;", p.Family, p.Verdict, p.Counter.Packets, p.Counter.Bytes)
					}
				}
				fmt.Fprintf(tw, ")\nnum\tpkts\tbytes\trule\n")
				for _, r := range l.Rules {
					if r.Chain != chain {
						continue
					}
					fmt.Fprintf(tw, "%d\t%d\t%d\t%s", r.Num, r.Counter.Packets, r.Counter.Bytes, r.Rule)
					if r.Log != nil {
						fmt.Fprintf(tw, "   [logged %d, suppressed %d, lost %d]", r.Log.Emitted, r.Log.Suppressed, r.Log.Lost)
					}
					fmt.Fprintln(tw)
				}
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
