package firewall

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// MaxRejectRate bounds REJECT's answer rate and burst per source: a million
// answers a second per source is already no limit at all.
const MaxRejectRate = 1000000

// ParseRejectRate reads a REJECT answer rate, "N/s" (also N/sec, N/second,
// or a bare N), N from 1 to MaxRejectRate.
func ParseRejectRate(s string) (uint32, error) {
	num, unit, _ := strings.Cut(s, "/")
	switch unit {
	case "", "s", "sec", "second":
	default:
		return 0, fmt.Errorf("%q: the unit is per second (N/s)", rules.Clip(s))
	}
	n, err := strconv.ParseUint(num, 10, 32)
	if err != nil || n < 1 || n > MaxRejectRate {
		return 0, fmt.Errorf("%q: want N/s with N from 1 to %d", rules.Clip(s), MaxRejectRate)
	}
	return uint32(n), nil
}
