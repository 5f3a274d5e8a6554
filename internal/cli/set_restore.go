package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/rules"
)

func newSetRestore(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "restore [FILE|-]",
		Short: "Create and fill sets from `ipset save` output",
		Long: `restore reads what 'ipset save' prints: 'create NAME hash:ip|hash:net
[family inet|inet6] [maxelem N] ...' and 'add NAME ELEMENT' lines (standard
input without FILE, or with '-'). maxelem becomes the set's size;
hashsize, bucketsize and initval are ipset tuning and are ignored. Options
that change what a set matches (timeout, nomatch, netmask, counters,
comment) and other set types are refused.

A set that exists already is kept if its create line matches it (type,
family and maxelem); elements it holds already are skipped. The whole file
is checked first: with any error nothing changes.`,
		Example: `  ipset save > sets.save && xdpfw set restore sets.save
  ipset save blocklist | xdpfw set restore`,
		Args: nArgs(0, 1, "set restore [FILE|-]"),
		RunE: func(cmd *cobra.Command, a []string) error {
			path := "-"
			if len(a) == 1 {
				path = a[0]
			}
			name, src, err := readInput(cmd, path)
			if err != nil {
				return err
			}
			s, err := e.openSets()
			if err != nil {
				return err
			}
			defer s.Close()
			existing := func(set string) (rules.SetKind, bool) {
				k, err := s.Kind(set)
				return k, err == nil
			}
			r, err := rules.ParseIpsetSave(name, src, existing)
			if err != nil {
				return err
			}
			res, err := s.Restore(r)
			if err != nil {
				return err
			}
			created := ""
			if len(res.Created) > 0 {
				created = " (" + strings.Join(res.Created, ", ") + ")"
			}
			fmt.Fprintf(e.stdout, "restored: %s created%s, %s added, %d already present\n",
				plural(len(res.Created), "set"), created, plural(res.Added, "element"), res.Skipped)
			return nil
		},
	}
}
