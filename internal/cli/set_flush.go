package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newSetFlush(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "flush NAME",
		Short: "Remove every element of a set (the set and rules using it stay)",
		Long: `flush empties a set. Rules using it stay in force and match nothing in it
until elements are added again; only the set map changes.`,
		Example: `  xdpfw set flush blocklist`,
		Args:    nArgs(1, 1, "set flush NAME"),
		RunE: func(cmd *cobra.Command, a []string) error {
			s, err := e.openSets()
			if err != nil {
				return err
			}
			defer s.Close()
			n, err := s.Flush(a[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "flushed set %s: %d elements removed\n", a[0], n)
			return nil
		},
	}
}
