package cli

import (
	"fmt"
	"net/netip"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/firewall"
)

func newSetAdd(e *env) *cobra.Command {
	var file string
	const usage = "set add NAME ELEMENT... | set add NAME --file FILE"
	cmd := &cobra.Command{
		Use:   "add NAME [ELEMENT...] [--file FILE]",
		Short: "Add addresses or networks to a set",
		Long: `add puts elements into a set: addresses, or for hash:net sets networks
(10.0.0.0/8, 2001:db8::/32; host bits are cleared). Elements the set holds
already are left as they are (and counted as such).

--file reads one element per line ('#' comments and blank lines allowed;
'-' reads standard input). If any element is malformed or of the wrong
family or type, nothing is added and every error is shown as file:line:col;
if the set would hold more than its --size, nothing is added either.

Only the set map changes: the rules, their counters and the generation stay,
and traffic is not disturbed.`,
		Example: `  xdpfw set add blocklist 203.0.113.0/24 198.51.100.7
  xdpfw set add blocklist --file blocklist.txt
  curl -s https://example.net/drop.txt | xdpfw set add blocklist --file -`,
		Args: nArgs(1, -1, usage),
		RunE: func(cmd *cobra.Command, a []string) error {
			s, ps, err := e.setElems(cmd, a, file, usage)
			if err != nil {
				return err
			}
			defer s.Close()
			ch, err := s.Add(a[0], ps)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s: %d added, %d already present; %s (size %d)\n",
				a[0], ch.Changed, ch.Skipped, plural(ch.Count, "element"), ch.Size)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "read elements from FILE, one per line ('-': standard input)")
	return cmd
}

func newSetDel(e *env) *cobra.Command {
	var (
		file      string
		missingOK bool
	)
	const usage = "set del NAME ELEMENT... | set del NAME --file FILE"
	cmd := &cobra.Command{
		Use:   "del NAME [ELEMENT...] [--file FILE] [--missing-ok]",
		Short: "Remove addresses or networks from a set",
		Long: `del removes elements from a set, given as arguments or in a file as for add.
An element is removed only as it was added: deleting 10.0.0.1 does not
touch 10.0.0.0/8.

Every element must be in the set, or nothing is removed (the error names
the missing ones); --missing-ok removes those that are and reports the
others. Only the set map changes, as with add.`,
		Example: `  xdpfw set del blocklist 198.51.100.7
  xdpfw set del blocklist --file unblock.txt --missing-ok`,
		Args: nArgs(1, -1, usage),
		RunE: func(cmd *cobra.Command, a []string) error {
			s, ps, err := e.setElems(cmd, a, file, usage)
			if err != nil {
				return err
			}
			defer s.Close()
			ch, err := s.Del(a[0], ps, missingOK)
			if err != nil {
				return err
			}
			printDel(e, a[0], ch)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "read elements from FILE, one per line ('-': standard input)")
	cmd.Flags().BoolVar(&missingOK, "missing-ok", false, "remove the elements that are in the set, report the others")
	return cmd
}

func printDel(e *env, name string, ch *firewall.SetChange) {
	fmt.Fprintf(e.stdout, "%s: %d removed", name, ch.Changed)
	if ch.Skipped > 0 {
		fmt.Fprintf(e.stdout, ", %d not in the set", ch.Skipped)
	}
	fmt.Fprintf(e.stdout, "; %s (size %d)\n", plural(ch.Count, "element"), ch.Size)
}

// setElems opens the sets and reads the elements of an add or del: the
// arguments after the set name and/or --file, parsed for the set's kind.
func (e *env) setElems(cmd *cobra.Command, a []string, file, usage string) (*firewall.Sets, []netip.Prefix, error) {
	if len(a) == 1 && file == "" {
		return nil, nil, usageError{fmt.Errorf("usage: xdpfw %s", usage)}
	}
	// Read the file (or standard input, which may take as long as its
	// writer likes) before taking the lock that every change waits for.
	var name string
	var src []byte
	if file != "" {
		var err error
		if name, src, err = readInput(cmd, file); err != nil {
			return nil, nil, err
		}
	}
	s, err := e.openSets()
	if err != nil {
		return nil, nil, err
	}
	kind, err := s.Kind(a[0])
	if err == nil {
		var ps []netip.Prefix
		if ps, err = parseElems(kind, a[1:], name, src); err == nil {
			return s, ps, nil
		}
	}
	s.Close()
	return nil, nil, err
}
