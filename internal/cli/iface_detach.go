package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/firewall"
)

func newDetach(e *env) *cobra.Command {
	var (
		ifaces []string
		all    bool
	)
	cmd := &cobra.Command{
		Use:   "detach (-i IFACE... | --all)",
		Short: "Remove the firewall from interfaces",
		Long: `detach removes the XDP program from each -i interface. When the last one is
detached, everything is removed (links, program, maps, the recorded rules)
but for the named sets, which stay for the next load as they were before
it; --all removes them too. --all works whatever state a previous run left
behind: it also detaches xdpfw's links that the kernel runs on interfaces of
this network namespace without a pin in --pin-dir (the bpffs was unmounted
while something kept it alive; 'xdpfw status' lists them).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if all {
				if err := firewall.Teardown(e.paths); err != nil {
					return err
				}
				fmt.Fprintln(e.stdout, "xdpfw removed")
				return nil
			}
			if len(ifaces) == 0 {
				return usageError{fmt.Errorf("detach needs -i IFACE or --all")}
			}
			fw, err := e.open()
			if err != nil {
				return err
			}
			defer fw.Close()
			for _, iface := range ifaces {
				last, err := fw.Detach(iface)
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "detached from %s\n", iface)
				if last {
					if n := fw.NumSets(); n > 0 {
						fmt.Fprintf(e.stdout, "no interface left: xdpfw removed but for %s (detach --all removes them)\n", plural(n, "named set"))
					} else {
						fmt.Fprintln(e.stdout, "no interface left: xdpfw removed")
					}
					break
				}
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVarP(&ifaces, "interface", "i", nil, "interface to detach from (repeatable)")
	cmd.Flags().BoolVar(&all, "all", false, "detach from every interface and remove all pinned state")
	return cmd
}
