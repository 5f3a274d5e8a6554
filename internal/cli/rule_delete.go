package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/rules"
)

func newDelete(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "delete [--no-rebuild] CHAIN (NUMBER | RULESPEC...)",
		Short: "Delete one rule by number or by its spec (iptables -D)",
		Long: `delete removes rule NUMBER of CHAIN (as numbered by 'xdpfw list'), or the first
rule of CHAIN equal to RULESPEC. CHAIN is a built-in chain or a user-defined
one ('xdpfw chain'). The change is atomic; the counters of the
other rules carry over. Like add, it is in force within milliseconds through
the delta stage, then the classifier is rebuilt (--no-rebuild: later; see
'xdpfw add --help').`,
		Example: `  xdpfw delete INPUT 3
  xdpfw delete INPUT -p tcp --dport 22 -j ACCEPT`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			own, rest, help, err := e.ownFlags(args, nil, noRebuildFlag)
			if err != nil || help {
				return orHelp(cmd, err)
			}
			if len(rest) < 2 {
				return usageError{fmt.Errorf("usage: xdpfw delete CHAIN NUMBER | CHAIN RULESPEC")}
			}
			chain, ok := rules.ParseChain(rest[0])
			if err := rules.CheckChainName(rest[0]); !ok && err != nil {
				return usageError{err}
			}
			fw, err := e.open()
			if err != nil {
				return err
			}
			defer fw.Close()
			var res *firewall.Result
			var gone rules.Rule
			if n, convErr := strconv.Atoi(rest[1]); convErr == nil && len(rest) == 2 {
				if ok {
					res, gone, err = fw.Delete(chain, n)
				} else {
					res, gone, err = fw.DeleteNth(rest[0], n)
				}
			} else {
				gone, err = rules.ParseRuleArgs(rest[0], rest[1:], rules.ParseOptions{})
				if err != nil {
					return err
				}
				res, err = fw.DeleteSpec(gone)
			}
			if err != nil {
				return err
			}
			return e.finishEdit(fw, res, "deleted: "+gone.String(), own[noRebuildFlag] != "")
		},
	}
}
