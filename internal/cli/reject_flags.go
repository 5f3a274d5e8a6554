package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/firewall"
)

// rejectFlags are --reject-rate and --reject-burst of load and apply: the
// per-source budget of REJECT's answers (docs/reject.md).
type rejectFlags struct {
	rate   string
	burst  uint32
	global string
}

func (r *rejectFlags) add(cmd *cobra.Command, dflt string) {
	fs := cmd.Flags()
	fs.StringVar(&r.rate, "reject-rate", "", fmt.Sprintf("REJECT answers per second per source (IPv4 address, IPv6 /64; OUTPUT: per destination), as N/s (%s)", dflt))
	fs.Uint32Var(&r.burst, "reject-burst", 0, fmt.Sprintf("REJECT answers a quiet source may get at once (%s)", dflt))
	fs.StringVar(&r.global, "reject-global-rate", "", fmt.Sprintf("REJECT answers per second from all sources together, and at once, as N/s: "+
		"a cap spoofed sources cannot multiply; over it the packet is dropped, counted as reject-rate-limited (%s)", dflt))
}

// setGlobal puts --reject-global-rate into opt (0: not given).
func (r *rejectFlags) setGlobal(opt *firewall.Options) error {
	if r.global == "" {
		return nil
	}
	g, err := firewall.ParseRejectRate(r.global)
	if err != nil {
		return usageError{fmt.Errorf("--reject-global-rate %w", err)}
	}
	opt.RejectGlobalRate = g
	return nil
}

// values returns the flags as firewall options (0: not given).
func (r *rejectFlags) values(cmd *cobra.Command) (rate, burst uint32, err error) {
	if cmd.Flags().Changed("reject-rate") {
		if rate, err = firewall.ParseRejectRate(r.rate); err != nil {
			return 0, 0, usageError{fmt.Errorf("--reject-rate %w", err)}
		}
	}
	if cmd.Flags().Changed("reject-burst") && (r.burst < 1 || r.burst > firewall.MaxRejectRate) {
		return 0, 0, usageError{fmt.Errorf("--reject-burst %d: want 1 to %d", r.burst, firewall.MaxRejectRate)}
	}
	return rate, r.burst, nil
}

// rejectDefaults names the defaults in the help.
var rejectDefaults = fmt.Sprintf("default %d/s, burst %d; global %d/s", compile.DefaultRejectRate, compile.DefaultRejectBurst,
	compile.DefaultRejectGlobalRate)
