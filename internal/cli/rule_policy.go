package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/rules"
)

func newPolicy(e *env) *cobra.Command {
	var family string
	cmd := &cobra.Command{
		Use:   "policy CHAIN ACCEPT|DROP",
		Short: "Set a chain's policy (iptables -P)",
		Long: `policy sets what happens to packets no rule of CHAIN matched, for both
families or, with --family, for one.`,
		Example: `  xdpfw policy INPUT DROP
  xdpfw policy INPUT ACCEPT --family ipv6`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			chain, ok := rules.ParseChain(args[0])
			if !ok {
				return usageError{fmt.Errorf("unknown chain %q (INPUT, FORWARD or OUTPUT)", args[0])}
			}
			var v rules.Verdict
			switch args[1] {
			case "ACCEPT":
				v = rules.VerdictAccept
			case "DROP":
				v = rules.VerdictDrop
			default:
				return usageError{fmt.Errorf("policy %q: ACCEPT or DROP", args[1])}
			}
			fam := rules.FamilyAny
			switch family {
			case "", "any":
			case "ipv4":
				fam = rules.FamilyIPv4
			case "ipv6":
				fam = rules.FamilyIPv6
			default:
				return usageError{fmt.Errorf("--family %q: ipv4, ipv6 or any", family)}
			}
			fw, err := e.open()
			if err != nil {
				return err
			}
			defer fw.Close()
			res, err := fw.SetPolicy(chain, fam, v)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "policy %s %s (%s); generation %d\n", chain, v, fam, res.Generation)
			return nil
		},
	}
	cmd.Flags().StringVar(&family, "family", "any", "ipv4, ipv6 or any")
	return cmd
}
