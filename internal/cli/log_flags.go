package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/firewall"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// logFlags are --log-rate and --log-burst of load and apply (the budget of
// logged rules that set none), and --log-snap of load (docs/log.md).
type logFlags struct {
	rate  string
	burst uint32
	snap  int
}

func (l *logFlags) add(cmd *cobra.Command, load bool, dflt string) {
	fs := cmd.Flags()
	fs.StringVar(&l.rate, "log-rate", "", fmt.Sprintf("log events per logged rule (LOG, or --log) that sets no --log-rate: "+
		"N/sec, N/min, N/hour or N/day (%s)", dflt))
	fs.Uint32Var(&l.burst, "log-burst", 0, fmt.Sprintf("log events such a rule may emit at once (%s)", dflt))
	if load {
		fs.IntVar(&l.snap, "log-snap", -1, fmt.Sprintf("bytes of each logged packet its event carries, 0 to %d (default %d; a reload keeps the value in force)",
			compile.MaxLogSnap, compile.DefaultLogSnap))
	}
}

// apply puts the flags given into opt.
func (l *logFlags) apply(cmd *cobra.Command, opt *firewall.Options) error {
	if cmd.Flags().Changed("log-rate") {
		r, err := rules.ParseLogRate(l.rate)
		if err != nil {
			return usageError{fmt.Errorf("--log-rate %w", err)}
		}
		opt.LogRate = r
	}
	if cmd.Flags().Changed("log-burst") && (l.burst < 1 || l.burst > rules.MaxLogBurst) {
		return usageError{fmt.Errorf("--log-burst %d: want 1 to %d", l.burst, rules.MaxLogBurst)}
	}
	opt.LogBurst = l.burst
	if cmd.Flags().Changed("log-snap") {
		if l.snap < 0 || l.snap > compile.MaxLogSnap {
			return usageError{fmt.Errorf("--log-snap %d: want 0 to %d bytes", l.snap, compile.MaxLogSnap)}
		}
		snap := l.snap
		opt.LogSnap = &snap
	}
	return nil
}

// logDefaults names the defaults in the help.
var logDefaults = fmt.Sprintf("default %s, burst %d", compile.DefaultLogRate, compile.DefaultLogBurst)
