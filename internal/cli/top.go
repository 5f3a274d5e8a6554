package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/xdpfw/xdpfw/internal/telemetry"
)

type topOptions struct {
	interval time.Duration
	rows     int
	once     bool
	frames   int
	asJSON   bool
}

func newTop(e *env) *cobra.Command {
	var o topOptions
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Live view of the busiest rules and drop reasons, in packets per second",
		Long: `top takes a snapshot of the counters every --interval and shows the rates
between the last two: total and dropped packets per second, the -n busiest
rules and policies, packets by reason (with drops), and what the programs
returned (XDP_PASS, XDP_DROP, XDP_TX, TC_ACT_OK, TC_ACT_SHOT); while
latency sampling is on (load or stats --latency-sample N), the per-packet
processing time of the packets timed in the interval, per chain and
outcome (p50, p90, p99, p99.9, max).

On a terminal it redraws in place; q or Ctrl-C quits and restores the
terminal. When stdout is not a terminal, or with --once or --frames, it
prints one frame per interval instead (batch mode): --once waits one
interval and prints one frame, for scripts. --json prints each frame as a
JSON object (rules limited to the -n busiest).`,
		Example: `  xdpfw top
  xdpfw top --interval 5s -n 30
  xdpfw top --once --json | jq '.rules[0]'
  xdpfw top --frames 10 > top.log`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.interval < 10*time.Millisecond || o.rows < 1 || o.frames < 0 {
				return usageError{fmt.Errorf("--interval must be at least 10ms, -n at least 1, --frames not negative")}
			}
			if o.once {
				o.frames = 1
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			take := func() (*telemetry.Snapshot, error) { return telemetry.Take(e.paths) }
			if out, ok := e.stdout.(*os.File); ok && o.frames == 0 && !o.asJSON &&
				term.IsTerminal(int(out.Fd())) && term.IsTerminal(int(os.Stdin.Fd())) {
				return topInteractive(ctx, os.Stdin, out, take, o)
			}
			return topBatch(ctx, e, take, o)
		},
	}
	cmd.Flags().DurationVar(&o.interval, "interval", time.Second, "time between snapshots")
	cmd.Flags().IntVarP(&o.rows, "rows", "n", 15, "rules and policies to show, busiest first")
	cmd.Flags().BoolVar(&o.once, "once", false, "print one frame (rates over one interval) and exit")
	cmd.Flags().IntVar(&o.frames, "frames", 0, "print this many frames and exit (batch mode; 0: until interrupted)")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print each frame as JSON (batch mode)")
	return cmd
}

// sleep waits d, or less when ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// topBatch prints one frame per interval: o.frames of them, or until
// interrupted (which is not an error).
func topBatch(ctx context.Context, e *env, take func() (*telemetry.Snapshot, error), o topOptions) error {
	prev, err := take()
	if err != nil {
		return err
	}
	for n := 0; o.frames == 0 || n < o.frames; n++ {
		if !sleep(ctx, o.interval) {
			return nil
		}
		cur, err := take()
		if err != nil {
			return err
		}
		r := telemetry.Diff(prev, cur)
		prev = cur
		if o.asJSON {
			r.Rules = r.Rules[:min(len(r.Rules), o.rows)]
			if err := e.printJSON(r); err != nil {
				return err
			}
			continue
		}
		if n > 0 {
			fmt.Fprintln(e.stdout)
		}
		if err := renderTop(e.stdout, r, o.rows, 0); err != nil {
			return err
		}
	}
	return nil
}

// topInteractive redraws a frame per interval on the terminal until q,
// Ctrl-C or a signal, and leaves the terminal as it found it.
func topInteractive(ctx context.Context, in, out *os.File, take func() (*telemetry.Snapshot, error), o topOptions) error {
	prev, err := take()
	if err != nil {
		return err
	}
	state, err := term.MakeRaw(int(in.Fd()))
	if err != nil {
		return fmt.Errorf("putting the terminal in raw mode: %w", err)
	}
	// Alternate screen, cursor hidden; undone in reverse on the way out.
	fmt.Fprint(out, "\x1b[?1049h\x1b[?25l")
	defer func() {
		fmt.Fprint(out, "\x1b[?25h\x1b[?1049l")
		_ = term.Restore(int(in.Fd()), state)
	}()
	quit := make(chan struct{})
	go func() { // ends with the process: a read on a terminal cannot be interrupted
		b := make([]byte, 16)
		for {
			n, err := in.Read(b)
			if err != nil {
				return
			}
			for _, c := range b[:n] {
				if c == 'q' || c == 'Q' || c == 3 /* Ctrl-C: raw mode sends no SIGINT */ {
					close(quit)
					return
				}
			}
		}
	}()
	draw := func(frame string) {
		var b strings.Builder
		b.WriteString("\x1b[H\x1b[2J")
		b.WriteString(strings.ReplaceAll(frame, "\n", "\r\n")) // raw mode: no newline translation
		fmt.Fprint(out, b.String())
	}
	draw(fmt.Sprintf("xdpfw top: measuring for %s... (q quits)\n", o.interval))
	tick := time.NewTicker(o.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-quit:
			return nil
		case <-tick.C:
		}
		cur, err := take()
		if err != nil {
			return err
		}
		r := telemetry.Diff(prev, cur)
		prev = cur
		rows, height := o.rows, 0
		if _, h, err := term.GetSize(int(out.Fd())); err == nil {
			height = h
		}
		var b strings.Builder
		if err := renderTop(&b, r, rows, height); err != nil {
			return err
		}
		draw(b.String() + "q quits")
	}
}

// renderTop writes one frame: a header, the busiest rules and policies,
// reasons and actions with a rate. height > 0 cuts the rule rows so the
// frame fits that many lines.
func renderTop(w io.Writer, r *telemetry.Rates, rows, height int) error {
	var ifs []string
	for _, i := range r.Interfaces {
		ifs = append(ifs, i.Name+" "+i.State())
	}
	fmt.Fprintf(w, "xdpfw top  %s  generation %d  over %.2fs  %s\n", r.To.Format("15:04:05"), r.Generation, r.Seconds,
		strings.Join(ifs, ", "))
	fmt.Fprintf(w, "total %s pkt/s %sbit/s   dropped %s pkt/s\n\n", si(r.Total.PPS), si(8*r.Total.BPS), si(r.Dropped.PPS))

	var reasons, actions []string
	for _, x := range r.Reasons {
		if x.PPS > 0 {
			reasons = append(reasons, fmt.Sprintf("%8s %8s %12d  %s\n", si(x.PPS), si(x.DropPPS), x.Packets, x.Reason.Reason))
		}
	}
	for _, x := range r.Actions {
		if x.PPS > 0 {
			actions = append(actions, fmt.Sprintf("%8s %8s %12d  %s %s\n", si(x.PPS), si(8*x.BPS), x.Packets, x.Hook, x.Action.Action))
		}
	}
	var lat []string
	for _, x := range r.Latency {
		lat = append(lat, fmt.Sprintf("%8s %8s %8s %8s %8s %8s  %s %s\n", si(x.PPS), ns(x.P50), ns(x.P90), ns(x.P99), ns(x.P999),
			ns(float64(x.Max)), x.Chain, x.Outcome))
	}
	latLines := 0
	if len(lat) > 0 { // a gap and a header
		latLines = 2 + len(lat)
	}
	if height > 0 { // header 3, three table headers and two gaps, the footer
		rows = max(1, min(rows, height-9-max(len(reasons), 1)-len(actions)-latLines))
	}
	fmt.Fprintf(w, "%8s %8s %12s %10s  %s\n", "pkt/s", "bit/s", "packets", "last hit", "rule")
	ri, pi := 0, 0
	for n := 0; n < rows && (ri < len(r.Rules) || pi < len(r.Policies)); n++ {
		if pi >= len(r.Policies) || ri < len(r.Rules) && r.Rules[ri].PPS >= r.Policies[pi].PPS {
			x := r.Rules[ri]
			fmt.Fprintf(w, "%8s %8s %12d %10s  %s %d: %s\n", si(x.PPS), si(8*x.BPS), x.Packets,
				strings.TrimSuffix(ago(x.Last, r.To), " ago"), x.Chain, x.Num, x.Text)
			ri++
			continue
		}
		x := r.Policies[pi]
		fmt.Fprintf(w, "%8s %8s %12d %10s  %s policy %s %s\n", si(x.PPS), si(8*x.BPS), x.Packets,
			strings.TrimSuffix(ago(x.Last, r.To), " ago"), x.Chain, x.Family, x.Verdict)
		pi++
	}
	fmt.Fprintf(w, "\n%8s %8s %12s  %s\n", "pkt/s", "drop/s", "packets", "reason")
	for _, s := range reasons {
		fmt.Fprint(w, s)
	}
	if len(reasons) == 0 {
		fmt.Fprintf(w, "%8s %8s %12s  (no packets)\n", "", "", "")
	}
	fmt.Fprintf(w, "\n%8s %8s %12s  %s\n", "pkt/s", "bit/s", "packets", "action")
	for _, s := range actions {
		fmt.Fprint(w, s)
	}
	if len(lat) > 0 {
		fmt.Fprintf(w, "\n%8s %8s %8s %8s %8s %8s  %s\n", "timed/s", "p50", "p90", "p99", "p99.9", "max", "latency (this interval)")
		for _, s := range lat {
			fmt.Fprint(w, s)
		}
	}
	return nil
}

// si prints v with a k/M/G/T suffix and about 3 significant digits.
func si(v float64) string {
	units := []string{"", "k", "M", "G", "T"}
	i := 0
	for v >= 999.5 && i < len(units)-1 {
		v /= 1000
		i++
	}
	switch {
	case v == 0:
		return "0"
	case v >= 99.5 || i == 0 && v >= 10:
		return fmt.Sprintf("%.0f%s", v, units[i])
	case v >= 9.95:
		return fmt.Sprintf("%.1f%s", v, units[i])
	}
	return fmt.Sprintf("%.2f%s", v, units[i])
}
