package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// noRebuildFlag leaves a single edit in the delta stage.
const noRebuildFlag = "--no-rebuild"

// deltaCapacity describes the delta stage's bounds for the help texts.
var deltaCapacity = fmt.Sprintf("%d entries, %d deleted rules", compile.DeltaMax, compile.DeltaDeadMax)

func newRebuild(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "rebuild",
		Short: "Fold the edits waiting in the delta stage into the classifier",
		Long: `Single edits (add, insert, replace, delete) are put in force through the delta
stage, which every packet checks after the classifier trees. rebuild compiles
the rule set in force into new trees and clears the delta stage, in one atomic
switch: nothing changes for packets but the cost of the check. The edit
commands do this themselves unless given --no-rebuild; 'xdpfw status' shows
what waits. It does nothing when nothing waits.`,
		Example: `  xdpfw add --no-rebuild INPUT -s 198.51.100.7 -j DROP
  xdpfw add --no-rebuild INPUT -s 198.51.100.8 -j DROP
  xdpfw rebuild`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fw, err := e.open()
			if err != nil {
				return err
			}
			defer fw.Close()
			res, err := fw.Rebuild()
			if err != nil {
				return err
			}
			if !res.Rebuilt {
				fmt.Fprintf(e.stdout, "nothing to rebuild: no edit waits in the delta stage (generation %d)\n", res.Generation)
				return nil
			}
			fmt.Fprintf(e.stdout, "rebuilt in %s: %d rules in force (generation %d), delta stage empty\n", ms(res.InForce), res.Rules, res.Generation)
			return nil
		},
	}
}

// editRule runs a single-edit command whose rule is CHAIN RULESPEC: it
// parses the rule, opens the firewall, makes the edit (do, which also says
// what it did) and reports it (finishEdit).
func (e *env) editRule(chain string, spec []string, noRebuild bool,
	do func(*firewall.Firewall, rules.Rule) (*firewall.Result, string, error)) error {
	r, err := rules.ParseRuleArgs(chain, spec, rules.ParseOptions{})
	if err != nil {
		return err
	}
	fw, err := e.open()
	if err != nil {
		return err
	}
	defer fw.Close()
	res, what, err := do(fw, r)
	if err != nil {
		return err
	}
	return e.finishEdit(fw, res, what, noRebuild)
}

// finishEdit reports a single edit in force (what), then rebuilds unless
// noRebuild and says how it went.
func (e *env) finishEdit(fw *firewall.Firewall, res *firewall.Result, what string, noRebuild bool) error {
	e.printResult(res)
	fmt.Fprintf(e.stdout, "%s (generation %d)\n", what, res.Generation)
	if !res.Delta {
		fmt.Fprintf(e.stdout, "in force after %s (classifier rebuilt)\n", ms(res.InForce))
		return nil
	}
	stage := fmt.Sprintf("in force after %s through the delta stage (%d of %d entries, %d of %d deleted rules)",
		ms(res.InForce), res.DeltaEntries, compile.DeltaMax, res.DeltaDeleted, compile.DeltaDeadMax)
	if noRebuild {
		fmt.Fprintf(e.stdout, "%s; rebuild pending ('xdpfw rebuild' or the next change folds it)\n", stage)
		return nil
	}
	rb, err := fw.Rebuild()
	if err != nil {
		return fmt.Errorf("the edit is in force, but rebuilding the classifier failed (it stays in the delta stage): %w", err)
	}
	fmt.Fprintf(e.stdout, "%s; classifier rebuilt in %s\n", stage, ms(rb.InForce))
	return nil
}

// ms formats a duration in milliseconds.
func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
