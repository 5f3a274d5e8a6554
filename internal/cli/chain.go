package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/firewall"
)

func newChain(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "chain",
		Short: "Create or delete user-defined chains (iptables -N, -X)",
		Long: `A user-defined chain holds rules that other chains jump to (-j NAME) or go to
(-g NAME). A packet walks it and, unless a rule decides, comes back after the
jump (RETURN, or the chain's end); after -g it goes back to where the chain
that went there was called from, or to the built-in chain's policy.

xdpfw flattens chains when it compiles the rules, so they cost nothing per
packet. Edit a chain's rules with add, insert, delete, replace and flush,
naming the chain as CHAIN. A chain that holds rules or that a rule jumps to
cannot be deleted, as with iptables -X.`,
		Example: `  xdpfw chain new ssh-in
  xdpfw add ssh-in -s 192.0.2.0/24 -j ACCEPT
  xdpfw add ssh-in -j DROP
  xdpfw insert INPUT -p tcp --dport 22 -j ssh-in
  xdpfw list -S
  xdpfw delete INPUT -p tcp --dport 22 -j ssh-in
  xdpfw flush ssh-in
  xdpfw chain delete ssh-in`,
	}
	change := func(what string, do func(*firewall.Firewall) (*firewall.Result, error)) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			fw, err := e.open()
			if err != nil {
				return err
			}
			defer fw.Close()
			res, err := do(fw)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s %s; generation %d: %d rules in force\n", what, args[0], res.Generation, res.Rules)
			return nil
		}
	}
	var name string
	newCmd := &cobra.Command{
		Use:    "new NAME",
		Short:  "Create an empty user-defined chain (iptables -N)",
		Args:   cobra.ExactArgs(1),
		PreRun: func(_ *cobra.Command, args []string) { name = args[0] },
		RunE:   change("created chain", func(fw *firewall.Firewall) (*firewall.Result, error) { return fw.NewChain(name) }),
	}
	delCmd := &cobra.Command{
		Use:    "delete NAME",
		Short:  "Delete an empty user-defined chain no rule jumps to (iptables -X)",
		Args:   cobra.ExactArgs(1),
		PreRun: func(_ *cobra.Command, args []string) { name = args[0] },
		RunE:   change("deleted chain", func(fw *firewall.Firewall) (*firewall.Result, error) { return fw.DeleteChain(name) }),
	}
	cmd.AddCommand(newCmd, delCmd)
	return cmd
}
