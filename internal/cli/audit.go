package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/firewall"
)

func newAudit(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Check a candidate rule set on live traffic without enforcing it",
		Long: `audit runs a candidate rule set beside the rules in force. Every packet the
XDP program decides by a rule (INPUT and FORWARD) is classified by the
candidate too, after the enforced verdict is known: the candidate's rules
count what they would decide, and a packet whose verdict would differ
(the rules in force accept it and the candidate would not: "would drop";
or the reverse: "would accept") is counted and becomes an event in the
log ring, rate limited, which xdpfw log prints. The candidate never
changes a verdict, and nothing is delayed but by its classification
(nanoseconds, inside the same XDP run).

  audit start FILE   compile FILE (the syntax apply reads) and audit it;
                     replaces an audit running before
  audit list         the candidate's rules with their counters, as list
                     shows the rules in force, and the audit's totals
  audit promote      enforce the audited candidate (apply of the rules
                     audit start read, not of the file as it is now) and
                     end the audit
  audit stop         end the audit

The candidate has counters, -m limit buckets and log budgets of its own;
it reads the connection states, -m recent lists and -m hashlimit buckets
of the rules in force and changes none of them; its LOG rules count but
send no events. An audit goes on across apply and edits of the rules in
force (it compares with whatever is in force) and ends with load or
detach --all. docs/audit.md has the details and the cost.`,
	}
	cmd.AddCommand(newAuditStart(e), newAuditStop(e), newAuditPromote(e), newAuditList(e))
	return cmd
}

func newAuditStart(e *env) *cobra.Command {
	var (
		src   sourceFlags
		opt   firewall.AuditOptions
		burst uint32
	)
	cmd := &cobra.Command{
		Use:   "start [RULES_FILE]",
		Short: "Audit a candidate rule set on live traffic",
		Long: `audit start compiles RULES_FILE as apply would and puts it beside the rules
in force, which stay in force. A file with any error, or one that does not
fit the tables load sized (--max-rules), changes nothing: an audit running
before goes on.

Events for packets whose verdict would differ are rate limited over all
rules together: --log-burst at once, then --log-rate per second.`,
		Example: `  xdpfw audit start /etc/xdpfw/rules.new
  xdpfw log                  # "AUDIT would drop ..." events
  xdpfw audit list
  xdpfw audit promote        # or: xdpfw audit stop`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			files, err := src.sources(cmd, args, true, "audit start")
			if err != nil {
				return err
			}
			rs, err := e.readRules(files)
			if err != nil {
				return err
			}
			opt.File = files.File
			if opt.File == "" {
				opt.File = files.IPv4File
			}
			opt.Burst = burst
			fw, err := e.open()
			if err != nil {
				return err
			}
			defer fw.Close()
			res, err := fw.StartAudit(rs, opt)
			if err != nil {
				return err
			}
			e.printWarnings(res.Warnings)
			verb := "auditing"
			if res.Replaced {
				verb = "auditing (in place of the audit before)"
			}
			fmt.Fprintf(e.stdout, "%s %d rules (%d classifier entries) beside the rules in force; nothing enforced\n",
				verb, res.Rules, res.Entries)
			return nil
		},
	}
	src.add(cmd)
	cmd.Flags().Float64Var(&opt.Rate, "log-rate", firewall.DefaultAuditRate, "events per second for packets whose verdict would differ, after the burst")
	cmd.Flags().Uint32Var(&burst, "log-burst", firewall.DefaultAuditBurst, "events at once before --log-rate applies")
	return cmd
}

func newAuditStop(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "stop",
		Short: "End the audit (the rules in force stay as they are)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fw, err := e.open()
			if err != nil {
				return err
			}
			defer fw.Close()
			if err := fw.StopAudit(); err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, "no audit runs")
			return nil
		},
	}
}

func newAuditPromote(e *env) *cobra.Command {
	var flags changeFlags
	cmd := &cobra.Command{
		Use:   "promote",
		Short: "Enforce the audited candidate and end the audit",
		Long: `audit promote applies the candidate that audit start read (as apply does:
atomic, counters of rules whose text is unchanged carry over; the
candidate's own audit counters do not), then ends the audit. If apply
fails, nothing changes and the audit goes on.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opt, err := flags.options(cmd)
			if err != nil {
				return err
			}
			fw, err := e.open()
			if err != nil {
				return err
			}
			defer fw.Close()
			res, err := fw.PromoteAudit(opt)
			if res != nil {
				e.printResult(res)
				e.printGeneration(res)
			}
			return err
		},
	}
	flags.add(cmd, false)
	return cmd
}

func newAuditList(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the candidate's rules with their counters, and the audit's totals",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fw, err := e.openRead()
			if err != nil {
				return err
			}
			defer fw.Close()
			return printAudit(e, fw, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printAudit prints the audit in force (audit list, list --audit).
func printAudit(e *env, fw *firewall.Firewall, asJSON bool) error {
	a, err := fw.AuditList()
	if errors.Is(err, firewall.ErrNoAudit) && !asJSON {
		fmt.Fprintln(e.stdout, "no audit runs")
		return nil
	}
	if err != nil {
		return err
	}
	if asJSON {
		return e.printJSON(a)
	}
	c := a.Counters
	fmt.Fprintf(e.stdout, "audit of %s since %s (events: %g/s, burst %d)\n", a.File, a.Started.Local().Format("2006-01-02 15:04:05"), a.Rate, a.Burst)
	fmt.Fprintf(e.stdout, "  %d packets seen; would drop %d, would accept %d; events suppressed %d, lost %d\n",
		c.Seen.Packets, c.WouldDrop.Packets, c.WouldAccept.Packets, c.Suppressed.Packets, c.Lost.Packets)
	return printListing(e, a.Rules, false)
}
