package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/firewall"
)

// changeFlags are the settings load and apply (and apply --check) take:
// one place reads them into firewall.Options, and firewall.Validate checks
// the result, for a change and a check alike.
type changeFlags struct {
	load       bool // load's flags (sizes, --log-snap) too
	malformed  string
	maxRules   int
	allowEmpty bool
	forward    string
	ct         ctFlags
	reject     rejectFlags
	logs       logFlags
	latSample  uint32
	prioCPUs   string
}

// add registers the flags: load's (sizes, --log-snap; defaults named) or apply's.
func (c *changeFlags) add(cmd *cobra.Command, load bool) {
	c.load = load
	fs := cmd.Flags()
	if load {
		fs.StringVar(&c.malformed, "malformed", "", "verdict for malformed packets: drop (default) or accept")
		c.reject.add(cmd, rejectDefaults+"; a reload keeps the values in force")
		c.logs.add(cmd, true, logDefaults+"; a reload keeps the values in force")
		fs.IntVar(&c.maxRules, "max-rules", 0, fmt.Sprintf("size the classifier for this many entries (rules after multiport/-i expansion; "+
			"1 to %d; default: %d, or, for a rule file whose tables do not fit that, the smallest power of two that holds them with a quarter "+
			"to spare, within half the memory available; a reload keeps the size loaded; the kernel memory the tables take is checked "+
			"against what the machine has; changing it makes the tables anew beside the loaded ones and switches to them, the rules and state carried over)",
			datapath.MaxEntries, compile.DefaultMaxEntries))
		fs.Uint32Var(&c.latSample, "latency-sample", 0, latencySampleHelp+" (default: 0, off; a reload keeps the value in force)")
	} else {
		fs.StringVar(&c.malformed, "malformed", "", "verdict for malformed packets: drop or accept (default: unchanged)")
		c.reject.add(cmd, "default: unchanged")
		c.logs.add(cmd, false, "default: unchanged")
	}
	c.ct.register(cmd, load)
	prioDefault, fwdDefault := "default: unchanged; they change with the rules, all or nothing", "default: unchanged"
	if load {
		prioDefault, fwdDefault = "default auto, a reload keeps the value in force", "default xdp; a reload keeps the value in force"
	}
	fs.StringVar(&c.prioCPUs, "priority-cpus", "", "the CPUs the rule file's xdpfw-priority table hands its BULK class to "+
		"(through a cpumap; HIGH packets are judged at once on the CPU that received them, every packet by every rule): "+
		"a list such as 1 or 2-3,6 (best: CPUs that take no NIC interrupts), auto (every online CPU; with one CPU none) "+
		"or none (priority off: every packet judged where it arrives); "+prioDefault+" (docs/realtime.md, Priority)")
	fs.StringVar(&c.forward, "forward", "", "how packets the FORWARD chain accepts are forwarded: xdp, by xdpfw's fast path in XDP "+
		"(FIB lookup, TTL, MACs, redirect to another interface xdpfw is attached to; the kernel forwards what it cannot do exactly as the "+
		"kernel would, what comes in or goes out by a natively attached veth, and, where the kernel has conntrack, a connection until an "+
		"answer came back untranslated, so that the kernel's NAT is never bypassed; counted by reason in status); xdp-veth, the same through "+
		"such veth devices too (their peers must send finished checksums and take redirected frames: docs/forward.md); or stack, by the kernel ("+fwdDefault+")")
	fs.BoolVar(&c.allowEmpty, "allow-empty", false, "put in force a rule file with no rule, no policy and no *filter section "+
		"(it accepts everything); without it such a file (empty, blank, only comments) is refused")
}

// options reads the flags given into firewall options and validates them
// (firewall.Validate checks them again with the rule set).
func (c *changeFlags) options(cmd *cobra.Command) (firewall.Options, error) {
	opt := firewall.Options{Malformed: c.malformed, AllowEmpty: c.allowEmpty, Forward: c.forward}
	var err error
	if opt.RejectRate, opt.RejectBurst, err = c.reject.values(cmd); err != nil {
		return opt, err
	}
	if err := c.reject.setGlobal(&opt); err != nil {
		return opt, err
	}
	if err := c.logs.apply(cmd, &opt); err != nil {
		return opt, err
	}
	if c.prioCPUs != "" && c.prioCPUs != "auto" {
		if _, err := datapath.ParseCPUList(c.prioCPUs); err != nil {
			return opt, usageError{fmt.Errorf("--priority-cpus: %w", err)}
		}
	}
	opt.PriorityCPUs = c.prioCPUs
	if c.load {
		if cmd.Flags().Changed("max-rules") && (c.maxRules < 1 || c.maxRules > datapath.MaxEntries) {
			return opt, usageError{fmt.Errorf("--max-rules %d: want 1 to %d", c.maxRules, datapath.MaxEntries)}
		}
		opt.MaxRules = c.maxRules
		if cmd.Flags().Changed("latency-sample") {
			n := c.latSample
			opt.LatencySample = &n
		}
	}
	if err := c.ct.apply(cmd, &opt, c.load); err != nil {
		return opt, err
	}
	return opt, opt.Validate()
}
