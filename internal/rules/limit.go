package rules

import (
	"fmt"
	"strings"
)

// LimitMatch is -m limit [--limit RATE] [--limit-burst N]: a token bucket
// of the rule's own (iptables' xt_limit; docs/limits.md). The rule
// matches a packet only while the bucket has a token, and takes one when
// it does; the bucket holds Burst tokens and gains one per Rate.
type LimitMatch struct {
	// Rate as iptables-save prints it (print_rate of libxt_limit: the
	// largest unit that holds the rate in whole events); IntervalNS is
	// the time one token takes to come back.
	Rate  LogRate
	Burst uint32
}

// iptables' defaults (libxt_limit: XT_LIMIT_AVG 3/hour, XT_LIMIT_BURST 5)
// and bounds: --limit-burst at most 10000; a rate of more than 10000 a
// second is "too fast" (its period in 1/10000 s is 0).
const (
	DefaultLimitBurst = 5
	MaxLimitBurst     = 10000
	limitScale        = 10000 // XT_LIMIT_SCALE: periods are in 1/10000 s
)

// DefaultLimit is -m limit alone: 3 a hour, 5 at once.
func DefaultLimit() LimitMatch {
	return LimitMatch{Rate: LogRate{N: 3, Unit: PerHour}, Burst: DefaultLimitBurst}
}

// IntervalNS is the time between two tokens.
func (l LimitMatch) IntervalNS() uint64 { return l.Rate.IntervalNS() }

// limitUnits are the units --limit takes, as libxt_limit's parse_rate: any
// prefix of the word, in any case ("s", "sec", "Second", "m", "h", "d").
var limitUnits = [...]struct {
	word string
	unit RateUnit
}{{"second", PerSecond}, {"minute", PerMinute}, {"hour", PerHour}, {"day", PerDay}}

// parseLimitRate reads --limit's argument the way iptables does, and
// returns it as iptables-save prints it: "N[/UNIT]" (a bare N is per
// second), N at least 1 and at most 10000 a second.
func parseLimitRate(s string) (LogRate, *valueErr) {
	num, word, slash := strings.Cut(s, "/")
	unit := PerSecond
	if slash {
		found := false
		for _, u := range limitUnits {
			if word != "" && len(word) <= len(u.word) && strings.EqualFold(word, u.word[:len(word)]) {
				unit, found = u.unit, true
				break
			}
		}
		if !found {
			return LogRate{}, &valueErr{off: len(num) + 1, tok: word, msg: "unknown rate unit",
				hint: "use sec, min, hour or day (e.g. 3/min), as iptables' --limit"}
		}
	}
	n, ok := parseUint(num, 1<<31-1)
	if !ok || n < 1 {
		return LogRate{}, &valueErr{tok: num, msg: "bad rate",
			hint: "N/sec, N/min, N/hour or N/day with N at least 1"}
	}
	period := uint64(limitScale*rateUnits[unit].seconds) / uint64(n)
	if period == 0 {
		return LogRate{}, &valueErr{tok: s, msg: "rate too fast",
			hint: "iptables' -m limit allows at most 10000/sec"}
	}
	return limitRateOf(uint32(period)), nil
}

// limitRateOf is the rate iptables-save prints for a period (in 1/10000 s;
// libxt_limit's print_rate, and iptables-nft's translation into nft's
// "limit rate N/UNIT"): the largest unit whose rate in whole events loses
// less than the remainder.
func limitRateOf(period uint32) LogRate {
	mult := [...]uint64{limitScale * 86400, limitScale * 3600, limitScale * 60, limitScale}
	units := [...]RateUnit{PerDay, PerHour, PerMinute, PerSecond}
	p := uint64(period)
	i := 1
	for ; i < len(mult); i++ {
		if p > mult[i] || mult[i]/p < mult[i]%p {
			break
		}
	}
	return LogRate{N: uint32(mult[i-1] / p), Unit: units[i-1]}
}

// optLimit handles -m limit --limit RATE.
func (p *ruleParser) optLimit(o optUse) *Error {
	a := o.args[0]
	r, ve := parseLimitRate(a.text)
	if ve != nil {
		return p.valueErr(a, ve)
	}
	p.r.Match.Limit.Rate = r
	return nil
}

// optLimitBurst handles -m limit --limit-burst N.
func (p *ruleParser) optLimitBurst(o optUse) *Error {
	a := o.args[0]
	n, ok := parseUint(a.text, MaxLimitBurst)
	if !ok {
		return p.errAt(a, a.text, "bad --limit-burst", fmt.Sprintf("a number from 1 to %d, as iptables", MaxLimitBurst))
	}
	if n == 0 {
		return p.errAt(a, a.text, "--limit-burst 0 lets no packet through",
			"iptables-legacy refuses it and iptables-nft reads it as 5; write a burst from 1 (5 is the default)")
	}
	p.r.Match.Limit.Burst = uint32(n)
	return nil
}

// limitModule handles -m limit: the bucket with iptables' defaults, which
// its options change.
func (p *ruleParser) limitModule(at token) *Error {
	if p.stateAt != nil && p.stateMod != "limit" {
		return p.errAt(at, "", "-m limit beside -m "+p.stateMod, "xdpfw takes one rate or state match per rule: split the rule in two")
	}
	if p.r.Match.Limit != nil {
		return p.errAt(at, "", "-m limit given twice",
			"xdpfw keeps one bucket per rule: write one -m limit (iptables would keep two, each taking a token)")
	}
	l := DefaultLimit()
	p.r.Match.Limit = &l
	p.stateAt, p.stateMod = &at, "limit"
	p.modules["limit"] = &moduleUse{tok: at, used: true} // its options are optional
	p.checks = append(p.checks, func() *Error {
		// On a LOG rule the limit is the rule's log budget (docs/limits.md).
		t := &p.r.Target
		if t.Verdict == VerdictLog && (!t.LogRate.IsZero() || t.LogBurst != 0) {
			return p.errAt(at, "", "-m limit and --log-rate/--log-burst both given",
				"on a LOG rule -m limit is its budget: keep -m limit --limit R --limit-burst B")
		}
		return nil
	})
	return nil
}

// stateOnChainTarget refuses -m limit or -m recent (the module at token
// at) on a rule that decides nothing itself: a jump, a goto, RETURN or no
// -j. Compiled chains are flattened (docs/compat.md, Chains): whether the
// rules after such a rule apply would depend on the bucket or the list at
// the moment the packet passes, which no classifier entry can hold, so
// xdpfw refuses the rule rather than guess (ignoring the match would fail
// open or closed).
func (p *ruleParser) stateOnChainTarget(at token) *Error {
	switch v := p.r.Target.Verdict; v {
	case VerdictJump, VerdictGoto, VerdictReturn, VerdictNone:
		what := map[Verdict]string{VerdictJump: "-j " + p.r.Target.Chain, VerdictGoto: "-g " + p.r.Target.Chain,
			VerdictReturn: "-j RETURN", VerdictNone: "no -j (a counting rule)"}[v]
		return p.errAt(at, "", fmt.Sprintf("-m %s on a rule with %s is not supported yet: the rules after it would apply or not by the state of the %s at that moment, which flattened chains cannot express",
			p.stateMod, what, map[string]string{"limit": "bucket", "recent": "list", "hashlimit": "packet's bucket", "connlimit": "connection count"}[p.stateMod]),
			"give the -m "+p.stateMod+" to the rule that decides (ACCEPT, DROP, REJECT or LOG), or keep this rule set in the kernel's iptables")
	}
	return nil
}

// afterState refuses a match option that follows -m limit or -m recent:
// iptables tests a rule's matches in order, so a packet that passes the
// limit and fails a later match (-m limit --limit 1/s -m tcp --dport 22)
// takes a token and does not match (with -m recent: is recorded). xdpfw
// tests the bucket (the list) last, once every other test passed: the
// order iptables-save prints when the module is written last.
func (p *ruleParser) afterState(t token, spec optSpec) *Error {
	if p.stateAt == nil {
		return nil
	}
	test := false
	switch t.text {
	case "--sport", "--source-port", "--dport", "--destination-port", "--tcp-flags", "--syn",
		"--icmp-type", "--icmpv6-type":
		test = true
	default: // an option of a module, or -m MODULE (optModule: spec.module is the module)
		test = spec.module != "" && spec.module != p.stateMod && spec.module != "comment" &&
			spec.module != "limit" && spec.module != "recent" && spec.module != "hashlimit" && spec.module != "connlimit" // those say what is wrong themselves
	}
	if !test {
		return nil
	}
	what := "takes a token"
	switch p.stateMod {
	case "hashlimit":
		what = "takes a token of the packet's bucket"
	case "recent":
		what = "records or looks up the address"
	case "connlimit":
		what = "counts the packet's connection"
	}
	return p.errAt(t, "", fmt.Sprintf("%s after -m %s: iptables %s before testing it", t.text, p.stateMod, what),
		fmt.Sprintf("write -m %s after the rule's other matches (only -m comment may follow it)", p.stateMod))
}
