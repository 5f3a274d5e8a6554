package cli

import (
	"bufio"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/firewall"
)

// setListing is `set list --json` without a name.
type setListing struct {
	Sets     []firewall.SetInfo `json:"sets"`
	Elements int                `json:"elements"` // all sets together
	Capacity int                `json:"capacity"` // the most all sets together may hold
}

func newSetList(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [NAME]",
		Short: "List the sets, or one set with its elements",
		Long: `Without NAME, list summarizes every set: type, family, size, element count
and the rules in force that use it (chain and number, as 'xdpfw list'
numbers them). With NAME, it shows that set and every element, read from
the data plane.`,
		Example: `  xdpfw set list
  xdpfw set list blocklist
  xdpfw set list blocklist --json`,
		Args: nArgs(0, 1, "set list [NAME] [--json]"),
		RunE: func(cmd *cobra.Command, a []string) error {
			s, err := e.openSets()
			if err != nil {
				return err
			}
			defer s.Close()
			if len(a) == 1 {
				c, err := s.Get(a[0])
				if err != nil {
					return err
				}
				if asJSON {
					return e.printJSON(c)
				}
				return printSet(e, c)
			}
			l := setListing{Sets: s.List(), Capacity: datapath.MaxSetElems}
			for _, i := range l.Sets {
				l.Elements += i.Count
			}
			if asJSON {
				return e.printJSON(l)
			}
			if len(l.Sets) == 0 {
				fmt.Fprintln(e.stdout, "no sets (xdpfw set create NAME hash:net makes one)")
				return nil
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "name\ttype\tfamily\tsize\telements\tused by")
			for _, i := range l.Sets {
				users := make([]string, len(i.UsedBy))
				for k, u := range i.UsedBy {
					users[k] = fmt.Sprintf("%s %d", u.Chain, u.Num)
				}
				used := strings.Join(users, ", ")
				if used == "" {
					used = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", i.Name, i.Type, i.Family, i.Size, i.Count, used)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s, %s (all sets together hold at most %d)\n", plural(len(l.Sets), "set"),
				plural(l.Elements, "element"), l.Capacity)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printSet prints a set as `ipset list NAME` does.
func printSet(e *env, c *firewall.SetContents) error {
	w := bufio.NewWriter(e.stdout)
	fmt.Fprintf(w, "Name: %s\nType: %s\nFamily: %s\nSize: %d\nElements: %d\n", c.Name, c.Type, c.Family, c.Size, c.Count)
	if len(c.UsedBy) == 0 {
		fmt.Fprintln(w, "Used by: -")
	}
	for _, u := range c.UsedBy {
		fmt.Fprintf(w, "Used by: %s\n", u)
	}
	fmt.Fprintln(w, "Members:")
	for _, el := range c.Elements {
		w.WriteString(el)
		w.WriteByte('\n')
	}
	return w.Flush()
}
