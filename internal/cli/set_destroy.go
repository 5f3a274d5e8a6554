package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newSetDestroy(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "destroy NAME",
		Short: "Remove a set and its elements (refused while a rule uses it)",
		Long: `destroy removes a set and its elements. It is refused, naming the rules,
while a rule in force uses the set: delete those rules first (xdpfw delete
CHAIN NUM, or apply a file without them). Set ids are never reused.`,
		Example: `  xdpfw set destroy blocklist`,
		Args:    nArgs(1, 1, "set destroy NAME"),
		RunE: func(cmd *cobra.Command, a []string) error {
			s, err := e.openSets()
			if err != nil {
				return err
			}
			defer s.Close()
			if err := s.Destroy(a[0]); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "destroyed set %s\n", a[0])
			return nil
		},
	}
}
