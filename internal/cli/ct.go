package cli

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/conntrack"
	"github.com/xdpfw/xdpfw/internal/datapath"
)

func newConntrack(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "conntrack",
		Short: "List, count, flush and garbage-collect tracked connections",
		Long: `Connection tracking runs in the data plane when a rule uses
-m conntrack --ctstate (or -m state --state). Each connection is one entry,
created by the first accepted packet in either hook (XDP ingress: INPUT and
FORWARD; tc egress: OUTPUT), found by both directions with one lookup.

States a packet can be in (for --ctstate):
  NEW          starts a connection, or belongs to one that has seen no reply
  ESTABLISHED  belongs to a connection that has seen a reply
  RELATED      an ICMP error quoting a tracked connection
  INVALID      fits no connection: a TCP packet other than a SYN without
               one, an ACK before the SYN-ACK, flags no stack sends
  UNTRACKED    non-first fragments (no ports), ICMPv6 ND/MLD, other ICMP

Timeouts (seconds; set with load/apply --ct-timeout NAME=SECONDS):
  ` + timeoutHelp() + `

An entry past its deadline counts as gone at once. Expired entries still
take room until the daemon (xdpfw daemon) or 'conntrack gc' removes them: when the table
is full, NEW connections are dropped and counted (--ct-full), existing ones
keep working.`,
	}
	cmd.AddCommand(newCTList(e), newCTStats(e), newCTFlush(e), newCTGC(e))
	return cmd
}

func timeoutHelp() string {
	var parts []string
	for i, n := range conntrack.TimeoutNames {
		parts = append(parts, fmt.Sprintf("%s %d", n, conntrack.DefaultTimeouts[i]))
	}
	return strings.Join(parts, ", ")
}

func newCTList(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List tracked connections (originator first)",
		Example: `  xdpfw conntrack list
  xdpfw conntrack list --json | jq '.[] | select(.state == "ESTABLISHED")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fw, err := e.openRead() // reads only: never waits behind a change
			if err != nil {
				return err
			}
			defer fw.Close()
			es, err := fw.Datapath().Connections()
			if err != nil {
				return err
			}
			if asJSON {
				if es == nil {
					es = []conntrack.Entry{}
				}
				return e.printJSON(es)
			}
			for _, c := range es {
				fmt.Fprintln(e.stdout, c)
			}
			fmt.Fprintf(e.stdout, "%d connections\n", len(es))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newCTStats(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Count connections by state, and conntrack events (created, table full, invalid)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fw, err := e.openRead()
			if err != nil {
				return err
			}
			defer fw.Close()
			st, err := fw.Datapath().CTStats()
			if err != nil {
				return err
			}
			if asJSON {
				return e.printJSON(st)
			}
			fmt.Fprintf(e.stdout, "entries %d of %d (%d expired, not yet collected)\n", st.Entries, st.Max, st.Expired)
			states := make([]string, 0, len(st.ByState))
			for s := range st.ByState {
				states = append(states, s)
			}
			sort.Strings(states)
			for _, s := range states {
				fmt.Fprintf(e.stdout, "  %-12s %d\n", s, st.ByState[s])
			}
			for _, n := range conntrack.StatNames {
				fmt.Fprintf(e.stdout, "%-17s %d\n", n, st.Counters[n])
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newCTFlush(e *env) *cobra.Command {
	return ctRemove(e, &cobra.Command{
		Use:   "flush",
		Short: "Remove every tracked connection",
		Long: `flush empties the table. Packets of connections that were established
are then NEW (UDP, ICMP) or INVALID (TCP mid-stream) to the rules until a
new connection is tracked. With --nat xdpfw, the NAT bindings go too: a
connection's next packet is translated anew.`,
	}, (*datapath.Datapath).CTFlush, "connections")
}

func newCTGC(e *env) *cobra.Command {
	return ctRemove(e, &cobra.Command{
		Use:   "gc",
		Short: "Remove expired connections now",
		Long: `gc removes the entries past their deadline (the data plane already treats
them as gone, but they take room in the table). xdpfw daemon runs it at an
adaptive interval; without the daemon, run it from a timer, e.g. every minute.
With --nat xdpfw, the NAT bindings of the connections it removes go too
(docs/nat.md, "The life of a translated connection").`,
		Example: `  xdpfw conntrack gc`,
	}, (*datapath.Datapath).CTGC, "expired connections")
}

// ctRemove completes a command that removes entries with remove.
func ctRemove(e *env, cmd *cobra.Command, remove func(*datapath.Datapath) (int, error), what string) *cobra.Command {
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		fw, err := e.open()
		if err != nil {
			return err
		}
		defer fw.Close()
		n, err := remove(fw.Datapath())
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "removed %d %s\n", n, what)
		return nil
	}
	return cmd
}
