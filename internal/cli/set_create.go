package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/rules"
)

func newSetCreate(e *env) *cobra.Command {
	var (
		family string
		size   int
		exist  bool
	)
	const usage = "set create NAME hash:ip|hash:net [--family inet|inet6] [--size N] [--exist]"
	cmd := &cobra.Command{
		Use:   "create NAME hash:ip|hash:net",
		Short: "Create an empty named set",
		Long: `create makes an empty set. hash:ip holds single addresses (an address, or
one written as /32 or /128); hash:net holds networks of any prefix length.
A set holds one family: inet (IPv4, the default) or inet6 (IPv6); a rule
using it matches packets of that family only.

--size is the most elements the set may hold (default 65,536; at most
2,097,152, the capacity of all sets together): an add that would go beyond
it adds nothing. With --exist, a set of that name, type and family that
exists already is kept (and resized to --size when given), so scripts can
run create every time.

Names are 1-31 letters, digits, '.', '_' and '-', as ipset allows.`,
		Example: `  xdpfw set create blocklist hash:net
  xdpfw set create admins6 hash:ip --family inet6
  xdpfw set create big hash:net --size 1048576
  xdpfw set create big hash:net --size 2000000 --exist   # grow it`,
		Args: nArgs(2, 2, usage),
		RunE: func(cmd *cobra.Command, a []string) error {
			name := a[0]
			if !rules.ValidSetName(name) {
				return usageError{fmt.Errorf("%q: not a set name: %s", name, rules.SetNameHint)}
			}
			typ, err := rules.ParseSetType(a[1])
			if err != nil {
				return usageError{err}
			}
			fam, err := rules.ParseSetFamily(family)
			if err != nil {
				return usageError{err}
			}
			if cmd.Flags().Changed("size") && (size < 1 || size > datapath.MaxSetElems) {
				return usageError{fmt.Errorf("--size %d: want 1 to %d (all sets together hold at most %d elements)",
					size, datapath.MaxSetElems, datapath.MaxSetElems)}
			}
			s, err := e.openSets()
			if err != nil {
				return err
			}
			defer s.Close()
			kind := rules.SetKind{Type: typ, Family: fam}
			created, err := s.Create(name, firewall.SetSpec{Kind: kind, Size: size}, exist)
			if err != nil {
				return err
			}
			info := s.List()
			for _, i := range info {
				if i.Name != name {
					continue
				}
				if created {
					fmt.Fprintf(e.stdout, "created set %s (%s %s, size %d)\n", name, i.Type, i.Family, i.Size)
				} else {
					fmt.Fprintf(e.stdout, "set %s exists (%s %s, size %d, %d elements)\n", name, i.Type, i.Family, i.Size, i.Count)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&family, "family", "inet", "inet (IPv4) or inet6 (IPv6)")
	cmd.Flags().IntVar(&size, "size", 0, fmt.Sprintf("most elements the set may hold (default %d)", firewall.DefaultSetSize))
	cmd.Flags().BoolVar(&exist, "exist", false, "no error if the set exists with this type and family (resize it to --size)")
	return cmd
}
