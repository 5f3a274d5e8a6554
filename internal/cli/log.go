package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/telemetry"
)

type logOpts struct {
	asJSON, follow, stats bool
	count                 int
	pcap                  string
}

func newLog(e *env) *cobra.Command {
	var o logOpts
	cmd := &cobra.Command{
		Use:   "log [--follow] [--json] [--count N] [--pcap FILE] | log --stats",
		Short: "Print the packets LOG rules and --log rules logged (text, JSON, pcapng)",
		Long: `log reads the events of the logged rules: -j LOG rules, which log a packet
and let the next rules decide, and ACCEPT, DROP and REJECT rules with --log,
which log the packets they decide. One event per rule and packet, in the
kernel's iptables LOG format (prefix, IN=/OUT=, MAC=, SRC=, DST=, LEN=,
TOS=, PREC=, TTL=, ID= or TC=, HOPLIMIT=, FLOWLBL=, PROTO=, SPT=, DPT=,
WINDOW=, RES=, TCP flags, URGP=, ...: the kernel's fields in its order) with xdpfw's CHAIN=, RULE= (the logging
rule's number in 'xdpfw list'), VERDICT= and BY= (the deciding rule, when
another). --json prints one JSON object per line instead.

Without --follow, log prints the events waiting in the kernel's ring buffer
(older events first, possibly from long ago) and exits; with it, it keeps
printing until interrupted (SIGINT, SIGTERM). --count N stops after N
events. --pcap FILE also writes the logged packets' first bytes (the snap
length set at load with --log-snap, default 128) to a pcapng file that
tcpdump and Wireshark read, each packet with its log line as comment.

Each logged rule emits at most its rate (default 10/sec, burst 20); what it
suppresses, and what a full ring buffer (1 MiB) loses, is counted: the
summary on stderr, and --stats, say how many.

Only one process can read the events: the ring buffer hands each event to
one reader, so a second 'xdpfw log' is refused. xdpfw daemon with
log.events: journal or syslog forwards the events and holds the reader's
place while it runs; read the journal (or syslog) then.`,
		Example: `  xdpfw log                              the events waiting, then exit
  xdpfw log --follow                     keep printing (Ctrl-C stops)
  xdpfw log --follow --json | jq .src    one JSON object per event
  xdpfw log --follow --pcap drops.pcapng && tcpdump -r drops.pcapng
  xdpfw log --count 10                   at most 10 events
  xdpfw log --stats                      emitted / suppressed / lost per rule`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.count < 0 {
				return usageError{fmt.Errorf("--count must be positive")}
			}
			if o.stats {
				return e.logStats(o.asJSON)
			}
			return e.logEvents(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&o.follow, "follow", "f", false, "keep reading until interrupted")
	fl.BoolVar(&o.asJSON, "json", false, "print one JSON object per event")
	fl.IntVar(&o.count, "count", 0, "stop after this many events (0: no limit)")
	fl.StringVar(&o.pcap, "pcap", "", "also write the logged packets to this pcapng file")
	fl.BoolVar(&o.stats, "stats", false, "print the events emitted, suppressed (rate limit) and lost (ring buffer full) per rule, and exit")
	return cmd
}

// logEvents prints the events (and writes the pcapng file).
func (e *env) logEvents(ctx context.Context, o logOpts) error {
	in, err := firewall.ReadInForce(e.paths)
	if err != nil {
		return err
	}
	rd, err := telemetry.OpenReader(e.paths.PinDir, e.paths.StateDir)
	if err != nil {
		return err
	}
	defer rd.Close()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		rd.Close() // interrupts a waiting Next
	}()

	var (
		pw  *telemetry.PcapngWriter
		pf  *os.File
		pbw *bufio.Writer
	)
	if o.pcap != "" {
		if pf, err = os.Create(o.pcap); err != nil {
			return err
		}
		defer pf.Close()
		pbw = bufio.NewWriter(pf)
		if pw, err = telemetry.NewPcapngWriter(pbw, in.LogSnap); err != nil {
			return err
		}
	}
	out := bufio.NewWriter(e.stdout)
	defer out.Flush()
	// With --follow, each event goes out as it comes.
	flush := func() error {
		if !o.follow {
			return nil
		}
		if pw != nil {
			if err := pw.Flush(); err != nil {
				return err
			}
			if err := pbw.Flush(); err != nil {
				return err
			}
		}
		return out.Flush()
	}
	names := telemetry.KernelIfNames()
	rules := telemetry.IndexRules(in.Rules, in.IDs)
	cand := telemetry.Rules{} // the audited candidate's (docs/audit.md)
	if crs, ids, err := firewall.ReadAudit(e.paths); err == nil && crs != nil {
		cand = telemetry.IndexRules(crs, ids)
	}
	reread := map[uint32]bool{} // rule ids the state was re-read for
	enc := json.NewEncoder(out)
	n, byLOG := 0, 0
	for o.count == 0 || n < o.count {
		ev, err := rd.Next(o.follow)
		if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
			break
		}
		if err != nil {
			return err
		}
		if ev.Audit {
			if _, ok := cand[ev.RuleID]; !ok { // an audit started since
				if crs, ids, err := firewall.ReadAudit(e.paths); err == nil && crs != nil {
					cand = telemetry.IndexRules(crs, ids)
				}
			}
		} else if _, ok := rules[ev.RuleID]; !ok && !reread[ev.RuleID] {
			// a rule added since: read the rule set in force again
			reread[ev.RuleID] = true
			if in, err := firewall.ReadInForce(e.paths); err == nil {
				rules = telemetry.IndexRules(in.Rules, in.IDs)
			}
		}
		if !ev.Audit {
			rules.Trim(&ev)
		}
		n++
		if ev.ByLOG {
			byLOG++
		}
		switch {
		case o.asJSON && ev.Audit:
			rec := ev.Record(cand, names)
			rec.By = rules.Name(ev.VerdictID)
			err = enc.Encode(rec)
		case o.asJSON:
			err = enc.Encode(ev.Record(rules, names))
		case ev.Audit:
			_, err = fmt.Fprintf(out, "%s %s\n", ev.Time.Format("2006-01-02T15:04:05.000000Z07:00"), ev.AuditLine(cand, rules, names))
		default:
			_, err = fmt.Fprintf(out, "%s %s\n", ev.Time.Format("2006-01-02T15:04:05.000000Z07:00"), ev.Line(rules, names))
		}
		if err == nil && pw != nil {
			err = pw.WriteEvent(&ev, rules, names)
		}
		if err == nil {
			err = flush()
		}
		if err != nil {
			return err
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if pw != nil {
		if err := pw.Flush(); err != nil {
			return fmt.Errorf("writing %s: %w", o.pcap, err)
		}
		if err := pbw.Flush(); err != nil {
			return fmt.Errorf("writing %s: %w", o.pcap, err)
		}
		if err := pf.Close(); err != nil {
			return fmt.Errorf("writing %s: %w", o.pcap, err)
		}
	}
	e.logSummary(n, byLOG, o.pcap)
	return nil
}

// logSummary says on stderr what was read and what logging lost.
func (e *env) logSummary(n, byLOG int, pcap string) {
	fmt.Fprintf(e.stderr, "xdpfw log: %d events (%d by LOG rules, %d by --log rules)", n, byLOG, n-byLOG)
	if pcap != "" {
		fmt.Fprintf(e.stderr, ", written to %s", pcap)
	}
	dp, err := datapath.Open(e.paths.PinDir)
	if err != nil {
		fmt.Fprintln(e.stderr)
		return
	}
	defer dp.Close()
	st, err := dp.LogStats()
	if err != nil {
		fmt.Fprintln(e.stderr)
		return
	}
	fmt.Fprintf(e.stderr, "; since the rules were loaded: %d emitted, %d suppressed by rate limits, %d lost to a full ring buffer",
		st.Total.Emitted, st.Total.Suppressed, st.Total.Lost)
	if st.Overflow > 0 {
		fmt.Fprintf(e.stderr, ", %d packets matched more LOG rules than log one", st.Overflow)
	}
	fmt.Fprintln(e.stderr)
}

// logRuleStats is one rule's line of --stats.
type logRuleStats struct {
	Chain string `json:"chain"`
	Num   int    `json:"num"`
	ID    uint32 `json:"id"`
	Rule  string `json:"rule"`
	datapath.LogCounter
}

// logStats prints --stats.
func (e *env) logStats(asJSON bool) error {
	in, err := firewall.ReadInForce(e.paths)
	if err != nil {
		return err
	}
	dp, err := datapath.Open(e.paths.PinDir)
	if err != nil {
		return err
	}
	defer dp.Close()
	st, err := dp.LogStats()
	if err != nil {
		return err
	}
	idx := telemetry.IndexRules(in.Rules, in.IDs)
	var rows []logRuleStats
	for id, c := range st.Rules {
		r := idx[id]
		rows = append(rows, logRuleStats{Chain: r.Chain.String(), Num: r.Num, ID: id, Rule: r.Text, LogCounter: c})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Chain != rows[j].Chain {
			return rows[i].Chain < rows[j].Chain
		}
		return rows[i].Num < rows[j].Num
	})
	if asJSON {
		return e.printJSON(struct {
			Rules      []logRuleStats      `json:"rules"`
			Total      datapath.LogCounter `json:"total"`
			Overflow   uint64              `json:"overflow"`
			Unbudgeted uint64              `json:"unbudgeted"`
			// ConnLimitFull: new connections -m connlimit could not count, dropped
			ConnLimitFull uint64 `json:"connlimit_full"`
			Reader        string `json:"reader,omitempty"`
		}{rows, st.Total, st.Overflow, st.Unbudgeted, st.ConnLimitFull, telemetry.ReaderPID(e.paths.StateDir)})
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "chain\tnum\temitted\tsuppressed\tlost\trule")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", r.Chain, r.Num, r.Emitted, r.Suppressed, r.Lost, r.Rule)
	}
	fmt.Fprintf(tw, "total\t\t%d\t%d\t%d\t\n", st.Total.Emitted, st.Total.Suppressed, st.Total.Lost)
	if err := tw.Flush(); err != nil {
		return err
	}
	if st.Overflow > 0 {
		fmt.Fprintf(e.stdout, "%d packets matched more LOG rules than log one packet (the first 4 log it)\n", st.Overflow)
	}
	if st.ConnLimitFull > 0 {
		fmt.Fprintf(e.stdout, "%d packets of new connections dropped: a -m connlimit rule had %d connections of their address counted already (docs/limits.md)\n",
			st.ConnLimitFull, compile.ConnLimitSlots)
	}
	if pid := telemetry.ReaderPID(e.paths.StateDir); pid != "" {
		fmt.Fprintf(e.stdout, "events are being read by pid %s\n", pid)
	}
	return nil
}
