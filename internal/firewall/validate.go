package firewall

import (
	"errors"
	"fmt"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// InvalidError is a rule set or an option that Validate refuses; nothing
// was changed (the CLI exits with status 2).
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

// ErrEmpty refuses a rule set that says nothing (rules.RuleSet.Empty).
var ErrEmpty = errors.New("the rule set is empty (no rule, no policy, no *filter section): it would accept every packet; " +
	"if that is what you want, give --allow-empty (or run `xdpfw flush`)")

// Validate checks a rule set and the options of a change, everything that
// can be checked without the kernel: Load and Apply call it before they
// change anything, and `apply --check` and `daemon --check` call it too, so
// a check passes exactly what a change would. The sizes are checked
// against the machine's memory by datapath.Load, before any map exists.
func Validate(rs *rules.RuleSet, opt Options) error {
	if err := opt.Validate(); err != nil {
		return err
	}
	if rs.Empty() && !opt.AllowEmpty {
		return &InvalidError{ErrEmpty}
	}
	return nil
}

// Validate checks the options alone (Validate checks them with a rule
// set), an *InvalidError if they are wrong.
func (o Options) Validate() error {
	if err := o.check(); err != nil {
		return &InvalidError{err}
	}
	return nil
}

// check validates the options (zero values mean "keep" or "the default";
// conntrack.ParseTimeouts checks the timeouts).
func (o Options) check() error {
	for _, v := range []struct{ name, val string }{{"--malformed", o.Malformed}, {"--ct-full", o.CTFull}} {
		if v.val != "" && v.val != "drop" && v.val != "accept" {
			return fmt.Errorf("%s %q: want drop or accept", v.name, rules.Clip(v.val))
		}
	}
	if o.Forward != "" {
		if _, err := datapath.ParseForwardMode(o.Forward); err != nil {
			return err
		}
	}
	if o.MaxRules < 0 || o.MaxRules > datapath.MaxEntries {
		return fmt.Errorf("--max-rules %d: want 1 to %d", o.MaxRules, datapath.MaxEntries)
	}
	if o.CTMax < 0 || o.CTMax > datapath.MaxConntrack {
		return fmt.Errorf("--ct-max %d: want 1 to %d", o.CTMax, datapath.MaxConntrack)
	}
	if o.RejectRate > MaxRejectRate {
		return fmt.Errorf("--reject-rate %d/s: at most %d", o.RejectRate, MaxRejectRate)
	}
	if o.RejectBurst > MaxRejectRate {
		return fmt.Errorf("--reject-burst %d: want 1 to %d", o.RejectBurst, MaxRejectRate)
	}
	if o.LogBurst > rules.MaxLogBurst {
		return fmt.Errorf("--log-burst %d: want 1 to %d", o.LogBurst, rules.MaxLogBurst)
	}
	if o.LogSnap != nil && (*o.LogSnap < 0 || *o.LogSnap > compile.MaxLogSnap) {
		return fmt.Errorf("--log-snap %d: want 0 to %d bytes", *o.LogSnap, compile.MaxLogSnap)
	}
	return nil
}
