package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/rules"
)

func newReplace(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "replace [--no-rebuild] CHAIN NUMBER RULESPEC...",
		Short: "Replace one rule (iptables -R)",
		Long: `replace puts RULESPEC in place of rule NUMBER of CHAIN (as numbered by
'xdpfw list'), in one atomic step, as iptables -R. The new rule gets a fresh
counter; the other rules keep theirs. Like add, it is in force within
milliseconds through the delta stage, then the classifier is rebuilt
(--no-rebuild: later; see 'xdpfw add --help').`,
		Example:            `  xdpfw replace INPUT 2 -p tcp --dport 2222 -j ACCEPT`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			own, rest, help, err := e.ownFlags(args, nil, noRebuildFlag)
			if err != nil || help {
				return orHelp(cmd, err)
			}
			if len(rest) < 3 {
				return usageError{fmt.Errorf("usage: xdpfw replace CHAIN NUMBER RULESPEC (e.g. replace INPUT 2 -p tcp --dport 2222 -j ACCEPT)")}
			}
			n, err := strconv.Atoi(rest[1])
			if err != nil || n < 1 {
				return usageError{fmt.Errorf("rule number %q: want a number from 1", rest[1])}
			}
			return e.editRule(rest[0], rest[2:], own[noRebuildFlag] != "", func(fw *firewall.Firewall, r rules.Rule) (*firewall.Result, string, error) {
				res, gone, err := fw.Replace(n, r)
				return res, fmt.Sprintf("replaced %s %d: %s with %s", r.ChainName(), n, gone.String(), r.String()), err
			})
		},
	}
}
