package cli

import (
	"fmt"
	"net/netip"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/rules"
)

func newSet(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "set",
		Short: "Named address sets (ipset-style) for -m set --match-set",
		Long: `A named set holds IPv4 or IPv6 addresses (hash:ip) or networks (hash:net).
A rule tests a packet's source or destination against it with one lookup,
however many elements it holds:

  -A INPUT -m set --match-set blocklist src -j DROP
  -A INPUT -p tcp --dport 22 -m set ! --match-set admins src -j DROP

Create sets first, then load rules that name them: set commands work
before 'xdpfw load' (they pin the set map, which load then uses), and a
rule naming a set that does not exist is refused at file:line:col.

Adding and removing elements changes the set map only: rules are not
recompiled, counters and the generation do not move, and traffic is not
disturbed. A set of a million networks loads in a couple of seconds.

All sets together hold at most 2,097,152 elements; each set at most its
--size (default 65,536). A set in use by a rule cannot be destroyed.
Detaching the last interface keeps the sets; 'detach --all' removes them.`,
		Example: `  xdpfw set create blocklist hash:net
  xdpfw set add blocklist 203.0.113.0/24 198.51.100.7
  xdpfw set add blocklist --file /etc/xdpfw/blocklist.txt
  xdpfw load -i eth0 rules.conf          # rules may now name blocklist
  xdpfw set del blocklist 198.51.100.7
  xdpfw set list blocklist
  ipset save | xdpfw set restore -       # take over sets from ipset`,
	}
	cmd.AddCommand(newSetCreate(e), newSetAdd(e), newSetDel(e), newSetList(e), newSetFlush(e), newSetDestroy(e), newSetRestore(e))
	return cmd
}

// plural is "1 thing" or "N things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// nArgs checks the number of positional arguments, as a usage error.
func nArgs(lo, hi int, usage string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if len(a) < lo || hi >= 0 && len(a) > hi {
			return usageError{fmt.Errorf("usage: xdpfw %s", usage)}
		}
		return nil
	}
}

// openSets opens the named sets, loaded or not.
func (e *env) openSets() (*firewall.Sets, error) { return firewall.OpenSets(e.paths) }

// readInput reads a file, or standard input for "-"; it returns the name
// errors are reported under.
func readInput(cmd *cobra.Command, path string) (string, []byte, error) {
	if path == "-" {
		b, err := rules.ReadInput("<stdin>", cmd.InOrStdin())
		return "<stdin>", b, err
	}
	b, err := rules.ReadInputFile(path)
	return path, b, err
}

// parseElems parses the elements given as arguments and those of src
// (read from name; nil: none) for a set of kind k.
func parseElems(k rules.SetKind, elems []string, name string, src []byte) ([]netip.Prefix, error) {
	ps, err := rules.ParseSetElemArgs(elems, k)
	if err != nil || src == nil {
		return ps, err
	}
	more, err := rules.ParseSetElems(name, src, k)
	if err != nil {
		return nil, err
	}
	return append(ps, more...), nil
}
