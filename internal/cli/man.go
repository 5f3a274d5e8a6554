package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

func newMan(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "man DIR",
		Short: "Write the man pages (xdpfw.1, xdpfw-load.1, ...) into DIR",
		Long: `man writes one man page per command, generated from the same definitions
as --help, into DIR (made if missing). 'make man' writes them to bin/man.`,
		Example: `  xdpfw man /usr/local/share/man/man1 && mandb -q
  man xdpfw-daemon`,
		Args:   cobra.ExactArgs(1),
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			hdr := &doc.GenManHeader{Title: "XDPFW", Section: "1", Source: "xdpfw " + Version, Manual: "xdpfw manual"}
			root := cmd.Root()
			root.DisableAutoGenTag = true
			if err := doc.GenManTree(root, hdr, args[0]); err != nil {
				return fmt.Errorf("writing man pages: %w", err)
			}
			fmt.Fprintf(e.stdout, "man pages written to %s\n", args[0])
			return nil
		},
	}
}
