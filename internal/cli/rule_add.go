package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// splitOwnFlags takes xdpfw's own leading flags off a rule spec, whose
// iptables options cobra must not parse.
func splitOwnFlags(args []string, withValue map[string]bool, bools map[string]bool) (map[string]string, []string, error) {
	own := map[string]string{}
	for len(args) > 0 {
		a := args[0]
		name, val, hasVal := strings.Cut(a, "=")
		switch {
		case withValue[name]:
			if !hasVal {
				if len(args) < 2 {
					return nil, nil, fmt.Errorf("%s needs a value", name)
				}
				val, args = args[1], args[1:]
			}
			own[name] = val
		case bools[a]:
			own[a] = "true"
		default:
			return own, args, nil
		}
		args = args[1:]
	}
	return own, args, nil
}

func newAdd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "add [--position N] [--no-rebuild] CHAIN RULESPEC...",
		Short: "Add one rule at runtime (iptables -A / -I)",
		Long: `add puts one rule in force at once, appended to its chain or inserted as rule
number N (--position N, as iptables -I CHAIN N). RULESPEC is iptables syntax.
The counters of the other rules carry over.

The rule is compiled alone and put in force through the delta stage, a small
table the data plane checks after its classifier trees: packets see it within
milliseconds, whatever the size of the rule set. Then the classifier is
rebuilt with the rule folded in and the delta stage cleared, in one atomic
switch (about a second at 100,000 rules). --no-rebuild leaves the rule in the
delta stage (every packet then checks it too): the next change that rebuilds,
or 'xdpfw rebuild', folds it in. An edit that does not fit the delta stage
(` + deltaCapacity + `) rebuilds at once. When a rule before or after the edit
logs (-j LOG or --log), the edited rule set is compiled in full instead, as
apply does: the delta stage cannot carry LOG notes.`,
		Example: `  xdpfw add INPUT -p tcp --dport 22 -j ACCEPT
  xdpfw add --position 1 INPUT -s 203.0.113.0/24 -j DROP
  xdpfw add --no-rebuild INPUT -s 198.51.100.7 -j DROP; xdpfw rebuild`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			own, rest, help, err := e.ownFlags(args, []string{"--position"}, noRebuildFlag)
			if err != nil || help {
				return orHelp(cmd, err)
			}
			if len(rest) < 2 {
				return usageError{fmt.Errorf("usage: xdpfw add [--position N] CHAIN RULESPEC (e.g. add INPUT -p tcp --dport 22 -j ACCEPT)")}
			}
			pos := 0
			if p, ok := own["--position"]; ok {
				if pos, err = strconv.Atoi(p); err != nil || pos < 1 {
					return usageError{fmt.Errorf("--position %q: want a rule number from 1", p)}
				}
			}
			return e.editRule(rest[0], rest[1:], own[noRebuildFlag] != "", func(fw *firewall.Firewall, r rules.Rule) (*firewall.Result, string, error) {
				res, err := fw.Add(r, pos)
				return res, "added: " + r.String(), err
			})
		},
	}
	return cmd
}

// ownFlags is the prologue of commands whose rule spec cobra must not
// parse: it takes off -h/--help, --pin-dir, --state-dir, --wait and the named
// value and boolean flags, and honours the path flags.
func (e *env) ownFlags(args []string, valueFlags []string, boolFlags ...string) (own map[string]string, rest []string, help bool, err error) {
	withValue := map[string]bool{"--pin-dir": true, "--state-dir": true, "--wait": true}
	for _, f := range valueFlags {
		withValue[f] = true
	}
	bools := map[string]bool{"-h": true, "--help": true}
	for _, f := range boolFlags {
		bools[f] = true
	}
	own, rest, err = splitOwnFlags(args, withValue, bools)
	if err != nil {
		return nil, nil, false, usageError{err}
	}
	if v, ok := own["--pin-dir"]; ok {
		e.paths.PinDir = v
	}
	if v, ok := own["--state-dir"]; ok {
		e.paths.StateDir = v
	}
	if v, ok := own["--wait"]; ok {
		w, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, nil, false, usageError{fmt.Errorf("--wait %q: want seconds", v)}
		}
		e.setWait(w)
	}
	return own, rest, own["-h"] != "" || own["--help"] != "", nil
}

// orHelp returns err, or shows the help when there is none.
func orHelp(cmd *cobra.Command, err error) error {
	if err != nil {
		return err
	}
	return cmd.Help()
}
