package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/rules"
)

func newFlush(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "flush [CHAIN]",
		Short: "Delete all rules of a chain, or of every chain (policies stay)",
		Long: `flush removes every rule of CHAIN, or of all chains, as iptables -F does: the
chain policies stay in force, so with policy DROP a flush drops everything.
CHAIN may be a user-defined chain: it stays, empty (delete it with
'xdpfw chain delete'). Flushing every chain keeps the user chains too.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var chain *rules.Chain
			user := ""
			if len(args) == 1 {
				c, ok := rules.ParseChain(args[0])
				if err := rules.CheckChainName(args[0]); !ok && err != nil {
					return usageError{err}
				}
				if ok {
					chain = &c
				} else {
					user = args[0]
				}
			}
			fw, err := e.open()
			if err != nil {
				return err
			}
			defer fw.Close()
			var res *firewall.Result
			if user != "" {
				res, err = fw.FlushChain(user)
			} else {
				res, err = fw.Flush(chain)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "flushed; generation %d: %d rules in force\n", res.Generation, res.Rules)
			return nil
		},
	}
}
