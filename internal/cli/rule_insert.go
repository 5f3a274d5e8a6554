package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/rules"
)

func newInsert(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "insert [--no-rebuild] CHAIN [NUMBER] RULESPEC...",
		Short: "Insert one rule at a position (iptables -I)",
		Long: `insert puts one rule in force as rule NUMBER of CHAIN (default 1, the first),
moving that rule and the ones after it down, as iptables -I. It is
'xdpfw add --position NUMBER': in force within milliseconds through the delta
stage, then the classifier is rebuilt (--no-rebuild: later; see
'xdpfw add --help'). The counters of the other rules carry over.`,
		Example: `  xdpfw insert INPUT -s 203.0.113.0/24 -j DROP
  xdpfw insert INPUT 3 -p tcp --dport 443 -j ACCEPT`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			own, rest, help, err := e.ownFlags(args, nil, noRebuildFlag)
			if err != nil || help {
				return orHelp(cmd, err)
			}
			if len(rest) < 2 {
				return usageError{fmt.Errorf("usage: xdpfw insert CHAIN [NUMBER] RULESPEC (e.g. insert INPUT 1 -s 203.0.113.0/24 -j DROP)")}
			}
			pos, spec := 1, rest[1:]
			if n, convErr := strconv.Atoi(rest[1]); convErr == nil {
				if n < 1 {
					return usageError{fmt.Errorf("rule number %d: want a number from 1", n)}
				}
				pos, spec = n, rest[2:]
			}
			return e.editRule(rest[0], spec, own[noRebuildFlag] != "", func(fw *firewall.Firewall, r rules.Rule) (*firewall.Result, string, error) {
				res, err := fw.Add(r, pos)
				return res, fmt.Sprintf("inserted as %s %d: %s", r.ChainName(), pos, r.String()), err
			})
		},
	}
}
