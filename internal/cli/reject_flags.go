package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/compile"
)

// rejectFlags are --reject-rate and --reject-burst of load and apply: the
// per-source budget of REJECT's answers (docs/reject.md).
type rejectFlags struct {
	rate  string
	burst uint32
}

// maxRejectRate bounds both flags: a million answers a second per source
// is already no limit at all.
const maxRejectRate = 1000000

func (r *rejectFlags) add(cmd *cobra.Command, dflt string) {
	fs := cmd.Flags()
	fs.StringVar(&r.rate, "reject-rate", "", fmt.Sprintf("REJECT answers per second per source (IPv4 address, IPv6 /64; OUTPUT: per destination), as N/s (%s)", dflt))
	fs.Uint32Var(&r.burst, "reject-burst", 0, fmt.Sprintf("REJECT answers a quiet source may get at once (%s)", dflt))
}

// values returns the flags as firewall options (0: not given).
func (r *rejectFlags) values() (rate, burst uint32, err error) {
	if r.rate != "" {
		if rate, err = parseRate(r.rate); err != nil {
			return 0, 0, usageError{err}
		}
	}
	if r.burst > maxRejectRate {
		return 0, 0, usageError{fmt.Errorf("--reject-burst %d: at most %d", r.burst, maxRejectRate)}
	}
	return rate, r.burst, nil
}

// parseRate reads "N/s" (also N/sec, N/second, or a bare N): 1..maxRejectRate.
func parseRate(s string) (uint32, error) {
	num, unit, _ := strings.Cut(s, "/")
	switch unit {
	case "", "s", "sec", "second":
	default:
		return 0, fmt.Errorf("--reject-rate %q: the unit is per second (N/s)", s)
	}
	n, err := strconv.ParseUint(num, 10, 32)
	if err != nil || n < 1 || n > maxRejectRate {
		return 0, fmt.Errorf("--reject-rate %q: want N/s with N from 1 to %d", s, maxRejectRate)
	}
	return uint32(n), nil
}

// rejectDefaults names the defaults in the help.
var rejectDefaults = fmt.Sprintf("default %d/s, burst %d", compile.DefaultRejectRate, compile.DefaultRejectBurst)
