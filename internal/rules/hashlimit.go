package rules

import (
	"fmt"
	"strconv"
	"strings"
)

// HashLimitMatch is -m hashlimit: -m limit with one token bucket per key
// built from the packet (iptables' xt_hashlimit, revision 3;
// docs/limits.md). The rules that name one table (--hashlimit-name) share
// its buckets. --hashlimit-upto matches while the packet's bucket has a
// token, and takes it; --hashlimit-above takes a token when there is one
// and matches when there is none.
type HashLimitMatch struct {
	Above bool // --hashlimit-above (or ! --hashlimit-upto)
	// PeriodUS is the time one token takes to come back, in microseconds
	// (the kernel's cfg.avg, XT_HASHLIMIT_SCALE_v2).
	PeriodUS uint64
	Burst    uint32
	Mode     HashMode // the key's fields; none: one bucket for every packet
	Name     string
	// SrcMask and DstMask are the prefix lengths the addresses of the key
	// keep (--hashlimit-srcmask/-dstmask); -1: every bit of the packet's
	// family.
	SrcMask, DstMask int
	// The table's bounds and timers, kept and printed as given: Size and
	// Max (0: the kernel's default), GCIntervalMS, and ExpireMS (an idle
	// bucket is forgotten after it: full again).
	Size, Max, GCIntervalMS, ExpireMS uint32
}

// HashMode is the set of fields of --hashlimit-mode.
type HashMode uint8

// The fields of a hashlimit key, in the order iptables-save prints them.
const (
	HashSrcIP HashMode = 1 << iota
	HashSrcPort
	HashDstIP
	HashDstPort
)

var hashModeNames = [...]string{"srcip", "srcport", "dstip", "dstport"}

// String returns the mode as iptables-save prints it ("srcip,dstport").
func (m HashMode) String() string {
	var parts []string
	for i, n := range hashModeNames {
		if m&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	return strings.Join(parts, ",")
}

// Defaults and bounds of -m hashlimit (libxt_hashlimit): burst 5, at most
// 10^6; garbage collection every second; rates at most 10^6 a second.
const (
	DefaultHashLimitBurst = 5
	MaxHashLimitBurst     = 1000000
	DefaultHashGCInterval = 1000
	hashScale             = 1000000 // XT_HASHLIMIT_SCALE_v2: periods in microseconds
	MaxHashLimitName      = 255     // XT_HASHLIMIT_NAME_LEN, with its NUL
)

// IntervalNS is the time between two tokens.
func (h *HashLimitMatch) IntervalNS() uint64 { return h.PeriodUS * 1000 }

// hashRate is the rate iptables-save prints for a period in microseconds
// (libxt_hashlimit's print_rate), and the length of its unit in ms (the
// default --hashlimit-htable-expire that goes with it).
func hashRate(period uint64) (string, uint32) {
	mult := [...]uint64{hashScale * 86400, hashScale * 3600, hashScale * 60, hashScale}
	names := [...]string{"day", "hour", "min", "sec"}
	i := 1
	for ; i < len(mult); i++ {
		if period > mult[i] || mult[i]/period < mult[i]%period {
			break
		}
	}
	return fmt.Sprintf("%d/%s", mult[i-1]/period, names[i-1]), uint32(mult[i-1] / hashScale * 1000)
}

// parseHashRate reads --hashlimit-upto's argument as libxt_hashlimit's
// parse_rate: N[/UNIT], UNIT any prefix of second, minute, hour or day
// (a bare N is per second). It returns the period in microseconds and the
// unit's length in ms (the default expiry).
func parseHashRate(s string) (uint64, uint32, *valueErr) {
	if i := strings.Index(s, "b/s"); i > 0 {
		return 0, 0, &valueErr{tok: s, msg: "byte rates are not supported",
			hint: "xdpfw's -m hashlimit counts packets: give a packet rate (N/sec, N/min, N/hour or N/day)"}
	}
	num, word, slash := strings.Cut(s, "/")
	mult := uint64(1)
	if slash {
		found := false
		for _, u := range [...]struct {
			word string
			mult uint64
		}{{"second", 1}, {"minute", 60}, {"hour", 3600}, {"day", 86400}} {
			if word != "" && len(word) <= len(u.word) && strings.EqualFold(word, u.word[:len(word)]) {
				mult, found = u.mult, true
				break
			}
		}
		if !found {
			return 0, 0, &valueErr{off: len(num) + 1, tok: word, msg: "unknown rate unit",
				hint: "use sec, min, hour or day (e.g. 3/min), as iptables' --hashlimit-upto"}
		}
	}
	n, ok := parseUint(num, 1<<31-1)
	if !ok || n < 1 {
		return 0, 0, &valueErr{tok: num, msg: "bad rate", hint: "N/sec, N/min, N/hour or N/day with N at least 1"}
	}
	period := hashScale * mult / uint64(n)
	if period == 0 {
		return 0, 0, &valueErr{tok: s, msg: "rate too fast", hint: "iptables' -m hashlimit allows at most 1000000/sec"}
	}
	return period, uint32(mult * 1000), nil
}

// hashLimitModule handles -m hashlimit.
func (p *ruleParser) hashLimitModule(at token) *Error {
	if p.stateMod == "hashlimit" {
		return p.errAt(at, "", "-m hashlimit given twice", "xdpfw takes one -m hashlimit per rule")
	}
	if p.stateAt != nil {
		return p.errAt(at, "", "-m hashlimit beside -m "+p.stateMod, "xdpfw takes one rate or state match per rule: split the rule in two")
	}
	h := &HashLimitMatch{Burst: DefaultHashLimitBurst, GCIntervalMS: DefaultHashGCInterval, SrcMask: -1, DstMask: -1}
	p.r.Match.HashLimit = h
	p.stateAt, p.stateMod = &at, "hashlimit"
	p.modules["hashlimit"] = &moduleUse{tok: at, used: true}
	rate, expire := false, uint32(0)
	p.hashRateSet = func(period uint64, unitMS uint32) { rate, h.PeriodUS, expire = true, period, unitMS }
	p.checks = append(p.checks, func() *Error {
		if err := p.stateOnChainTarget(at); err != nil {
			return err
		}
		switch {
		case !rate:
			return p.errAt(at, "", "-m hashlimit needs --hashlimit-upto or --hashlimit-above", "e.g. --hashlimit-upto 10/sec")
		case h.Name == "":
			return p.errAt(at, "", "-m hashlimit needs --hashlimit-name", "the name of its table of buckets, as iptables requires")
		case h.Burst > 1 && h.IntervalNS() > (1<<63)/uint64(h.Burst-1):
			return p.errAt(at, "", "--hashlimit-burst too large for this rate",
				"a full bucket must refill within about 290 years: lower the burst or raise the rate")
		}
		if h.ExpireMS == 0 { // as libxt_hashlimit: the rate's unit
			h.ExpireMS = expire
		}
		// one AST for one text: the family's full mask is the default
		full, known := map[Family]int{FamilyIPv4: 32, FamilyIPv6: 128}[p.r.Match.Family]
		for _, m := range []*int{&h.SrcMask, &h.DstMask} {
			if known && *m == full {
				*m = -1
			}
		}
		return nil
	})
	return nil
}

// optHashRate handles --hashlimit-upto, --hashlimit-above and the old
// --hashlimit (upto); ! inverts upto into above and above into upto.
func (p *ruleParser) optHashRate(o optUse) *Error {
	a := o.args[0]
	period, unit, ve := parseHashRate(a.text)
	if ve != nil {
		return p.valueErr(a, ve)
	}
	p.r.Match.HashLimit.Above = (o.opt.text == "--hashlimit-above") != o.invert
	p.hashRateSet(period, unit)
	return nil
}

// optHashUint handles the numeric options of -m hashlimit.
func (p *ruleParser) optHashUint(o optUse) *Error {
	a := o.args[0]
	h := p.r.Match.HashLimit
	n, ok := parseUint(a.text, 1<<32-1)
	switch o.opt.text {
	case "--hashlimit-burst":
		if !ok || n < 1 || n > MaxHashLimitBurst {
			return p.errAt(a, a.text, "bad --hashlimit-burst", fmt.Sprintf("a number of packets from 1 to %d, as iptables", MaxHashLimitBurst))
		}
		h.Burst = uint32(n)
	case "--hashlimit-srcmask", "--hashlimit-dstmask":
		if !ok || n > 128 {
			return p.errAt(a, a.text, "bad "+o.opt.text, "a prefix length: 0 to 32 (IPv4) or 0 to 128 (IPv6)")
		}
		if n > 32 {
			if err := p.setFamily(FamilyIPv6, a, a.text, "an IPv6 prefix length", o.opt.text+" "+a.text+" (IPv6)"); err != nil {
				return err
			}
		}
		if o.opt.text == "--hashlimit-srcmask" {
			h.SrcMask = n
		} else {
			h.DstMask = n
		}
	default: // --hashlimit-htable-size, -max, -gcinterval, -expire
		if !ok {
			return p.errAt(a, a.text, "bad "+o.opt.text, "a number from 0 to 4294967295")
		}
		if n == 0 && (o.opt.text == "--hashlimit-htable-gcinterval" || o.opt.text == "--hashlimit-htable-expire") {
			return p.errAt(a, a.text, "bad "+o.opt.text, "milliseconds, at least 1 (the kernel refuses 0)")
		}
		*map[string]*uint32{"--hashlimit-htable-size": &h.Size, "--hashlimit-htable-max": &h.Max,
			"--hashlimit-htable-gcinterval": &h.GCIntervalMS, "--hashlimit-htable-expire": &h.ExpireMS}[o.opt.text] = uint32(n)
	}
	return nil
}

// optHashMode handles --hashlimit-mode FIELD[,FIELD...].
func (p *ruleParser) optHashMode(o optUse) *Error {
	a := o.args[0]
	var m HashMode
	off := 0
	for _, f := range strings.FieldsFunc(a.text, func(r rune) bool { return r == ',' || r == '|' }) {
		i := strings.Index(a.text[off:], f) + off
		off = i + len(f)
		found := false
		for b, n := range hashModeNames {
			if f == n {
				m |= 1 << b
				found = true
			}
		}
		if !found {
			return p.valueErr(a, &valueErr{off: i, tok: f, msg: "unknown --hashlimit-mode field", hint: "srcip, srcport, dstip or dstport, separated by commas"})
		}
	}
	p.r.Match.HashLimit.Mode = m
	return nil
}

// optHashName handles --hashlimit-name NAME.
func (p *ruleParser) optHashName(o optUse) *Error {
	a := o.args[0]
	if a.text == "" || len(a.text) >= MaxHashLimitName || strings.ContainsAny(a.text, "/\x00") {
		return p.errAt(a, a.text, "bad --hashlimit-name", fmt.Sprintf("1 to %d characters, no / (a file name under /proc, as iptables)", MaxHashLimitName-1))
	}
	p.r.Match.HashLimit.Name = a.text
	return nil
}

// optHashRateMatch refuses --hashlimit-rate-match and -rate-interval.
func (p *ruleParser) optHashRateMatch(o optUse) *Error {
	return p.errAt(o.opt, "", o.opt.text+" is not supported",
		"xdpfw's -m hashlimit is the token bucket (--hashlimit-upto/--hashlimit-above); the rate-measuring mode of revision 3 is not implemented")
}

// formatHashLimit writes -m hashlimit as iptables-save prints it
// (libxt_hashlimit's hashlimit_mt_save).
func formatHashLimit(w *specWriter, h *HashLimitMatch, fam Family) {
	opt := "--hashlimit-upto"
	if h.Above {
		opt = "--hashlimit-above"
	}
	rate, quantum := hashRate(h.PeriodUS)
	w.add(false, "-m", "hashlimit", opt, rate, "--hashlimit-burst", strconv.Itoa(int(h.Burst)))
	if h.Mode != 0 {
		w.add(false, "--hashlimit-mode", h.Mode.String())
	}
	w.add(false, "--hashlimit-name", h.Name)
	num := func(opt string, v uint32, show bool) {
		if show {
			w.add(false, opt, strconv.FormatUint(uint64(v), 10))
		}
	}
	num("--hashlimit-htable-size", h.Size, h.Size != 0)
	num("--hashlimit-htable-max", h.Max, h.Max != 0)
	num("--hashlimit-htable-gcinterval", h.GCIntervalMS, h.GCIntervalMS != DefaultHashGCInterval)
	num("--hashlimit-htable-expire", h.ExpireMS, h.ExpireMS != quantum)
	num("--hashlimit-srcmask", uint32(h.SrcMask), h.SrcMask >= 0)
	num("--hashlimit-dstmask", uint32(h.DstMask), h.DstMask >= 0)
}
