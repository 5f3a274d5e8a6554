package rules

import (
	"fmt"
	"net/netip"
	"strings"
)

// RecentOp is what -m recent does with the packet's address.
type RecentOp uint8

// The operations of -m recent, as xt_recent's XT_RECENT_SET ... flags.
const (
	RecentSet    RecentOp = iota + 1 // --set: record the address (a new entry, or one more time stamp); always matches
	RecentCheck                      // --rcheck: matches when the address is in the list (within --seconds, --hitcount times)
	RecentUpdate                     // --update: as --rcheck, and a match adds a time stamp
	RecentRemove                     // --remove: matches when the address is in the list, and removes it
)

var recentOps = [...]string{RecentSet: "--set", RecentCheck: "--rcheck", RecentUpdate: "--update", RecentRemove: "--remove"}

// String returns the option ("--set").
func (o RecentOp) String() string {
	if int(o) < len(recentOps) && recentOps[o] != "" {
		return recentOps[o]
	}
	return fmt.Sprintf("recent-op(%d)", uint8(o))
}

// RecentMatch is -m recent: a named list of recently seen addresses
// (iptables' xt_recent; docs/limits.md). Rules that name the same list
// share it.
type RecentMatch struct {
	Op       RecentOp
	Invert   bool   // ! --rcheck ...: the rule matches when the test fails
	Seconds  uint32 // --seconds: only time stamps this recent count (0: all)
	HitCount uint32 // --hitcount: at least this many of them (0: one)
	// TTL is --rttl (--rcheck and --update only): the address is found
	// only when the TTL (hop limit) the list holds for it is the packet's,
	// or either is 0 (xt_recent's recent_entry_lookup).
	TTL  bool
	Name string // --name (default DEFAULT)
	Dest bool   // --rdest: the destination address (else --rsource, the source)
	// Mask is --mask, applied to the address before it is looked up;
	// invalid (the zero Addr): every bit, of the packet's family.
	Mask netip.Addr
}

// Bounds of -m recent: xt_recent's name length (XT_RECENT_NAME_LEN, with
// its NUL) and the time stamps xdpfw keeps per address (the kernel keeps
// at least --hitcount of them, 32 without one: the same answers).
const (
	DefaultRecentName = "DEFAULT"
	MaxRecentName     = 199
	MaxRecentHitCount = 32
)

// optRecentOp handles --set, --rcheck, --update and --remove.
func (p *ruleParser) optRecentOp(o optUse) *Error {
	m := p.r.Match.Recent
	for op, name := range recentOps {
		if name == o.opt.text {
			m.Op = RecentOp(op)
		}
	}
	m.Invert = o.invert
	return nil
}

// optRecentSeconds handles --seconds N.
func (p *ruleParser) optRecentSeconds(o optUse) *Error {
	a := o.args[0]
	n, ok := parseUint(a.text, 1<<32-1)
	if !ok || n == 0 {
		return p.errAt(a, a.text, "bad --seconds", "a number of seconds from 1, as iptables")
	}
	p.r.Match.Recent.Seconds = uint32(n)
	return nil
}

// optRecentHitCount handles --hitcount N.
func (p *ruleParser) optRecentHitCount(o optUse) *Error {
	a := o.args[0]
	n, ok := parseUint(a.text, 1<<32-1)
	if !ok || n == 0 || n > MaxRecentHitCount {
		return p.errAt(a, a.text, "bad --hitcount",
			fmt.Sprintf("a count from 1 to %d: xdpfw keeps %d time stamps per address (the kernel allows up to 255)", MaxRecentHitCount, MaxRecentHitCount))
	}
	p.r.Match.Recent.HitCount = uint32(n)
	return nil
}

// optRecentName handles --name NAME.
func (p *ruleParser) optRecentName(o optUse) *Error {
	a := o.args[0]
	if a.text == "" || len(a.text) > MaxRecentName || a.text == "." || a.text == ".." || strings.ContainsAny(a.text, "/\x00") {
		return p.errAt(a, a.text, "bad --name", fmt.Sprintf("1 to %d characters, no /, not . or .. (a file name, as iptables)", MaxRecentName))
	}
	p.r.Match.Recent.Name = a.text
	return nil
}

// optRecentTTL handles --rttl.
func (p *ruleParser) optRecentTTL(o optUse) *Error {
	p.r.Match.Recent.TTL = true
	return nil
}

// optRecentReap refuses --reap.
func (p *ruleParser) optRecentReap(o optUse) *Error {
	return p.errAt(o.opt, "", "--reap is not supported",
		"remove it: the kernel then removes the list's least recently seen address when its last time stamp is older than --seconds; "+
			"xdpfw's lists share one LRU map and cannot find a list's oldest address, and --seconds already ignores older time stamps")
}

// optRecentSide handles --rsource and --rdest.
func (p *ruleParser) optRecentSide(o optUse) *Error {
	p.r.Match.Recent.Dest = o.opt.text == "--rdest"
	return nil
}

// optRecentMask handles --mask ADDRESS.
func (p *ruleParser) optRecentMask(o optUse) *Error {
	a := o.args[0]
	m, err := netip.ParseAddr(a.text)
	if err != nil || m.Zone() != "" || m.Is4In6() {
		return p.errAt(a, a.text, "bad --mask", "an IPv4 or IPv6 netmask, e.g. 255.255.255.0 or ffff:ffff:ffff:ffff::")
	}
	f := FamilyIPv4
	if m.Is6() {
		f = FamilyIPv6
	}
	if err := p.setFamily(f, a, a.text, famName(f)+" mask", fmt.Sprintf("--mask %s (%s)", a.text, famName(f))); err != nil {
		return err
	}
	p.r.Match.Recent.Mask = m
	return nil
}

// FullMask is -m recent's default --mask for family f: every bit (the
// zero Addr for FamilyAny: the packet's family's).
func FullMask(f Family) netip.Addr {
	switch f {
	case FamilyIPv4:
		return netip.AddrFrom4([4]byte{255, 255, 255, 255})
	case FamilyIPv6:
		return netip.AddrFrom16([16]byte{0: 0xff, 1: 0xff, 2: 0xff, 3: 0xff, 4: 0xff, 5: 0xff, 6: 0xff, 7: 0xff,
			8: 0xff, 9: 0xff, 10: 0xff, 11: 0xff, 12: 0xff, 13: 0xff, 14: 0xff, 15: 0xff})
	}
	return netip.Addr{}
}

// recentModule handles -m recent.
func (p *ruleParser) recentModule(at token) *Error {
	if p.r.Match.Recent != nil {
		return p.errAt(at, "", "-m recent given twice", "xdpfw takes one -m recent per rule")
	}
	if p.stateAt != nil && p.stateMod != "recent" {
		return p.errAt(at, "", "-m recent beside -m "+p.stateMod, "xdpfw takes one rate or state match per rule: split the rule in two")
	}
	p.r.Match.Recent = &RecentMatch{Name: DefaultRecentName}
	p.stateAt, p.stateMod = &at, "recent"
	p.modules["recent"] = &moduleUse{tok: at, used: true}
	p.checks = append(p.checks, func() *Error {
		m := p.r.Match.Recent
		switch {
		case m.Op == 0:
			return p.errAt(at, "", "-m recent needs --set, --rcheck, --update or --remove", "")
		case (m.Op == RecentSet || m.Op == RecentRemove) && (m.Seconds != 0 || m.HitCount != 0):
			return p.errAt(at, "", m.Op.String()+" takes no --seconds or --hitcount", "they qualify --rcheck and --update (the kernel refuses the rule)")
		case (m.Op == RecentSet || m.Op == RecentRemove) && m.TTL:
			return p.errAt(at, "", "--rttl cannot be used together with "+m.Op.String(), "it qualifies --rcheck and --update (as iptables)")
		}
		if !m.Mask.IsValid() { // one AST for one text: the mask iptables-save prints
			m.Mask = FullMask(p.r.Match.Family)
		}
		return nil
	})
	return nil
}

// formatRecent writes -m recent as iptables-save prints it.
func formatRecent(w *specWriter, m *RecentMatch, fam Family) {
	w.add(false, "-m", "recent")
	w.add(m.Invert, m.Op.String())
	if m.Seconds != 0 {
		w.add(false, "--seconds", fmt.Sprint(m.Seconds))
	}
	if m.HitCount != 0 {
		w.add(false, "--hitcount", fmt.Sprint(m.HitCount))
	}
	if m.TTL {
		w.add(false, "--rttl")
	}
	w.add(false, "--name", m.Name)
	if mask := m.Mask; mask.IsValid() || fam != FamilyAny {
		if !mask.IsValid() {
			mask = FullMask(fam)
		}
		w.add(false, "--mask", mask.String())
	}
	if m.Dest {
		w.add(false, "--rdest")
	} else {
		w.add(false, "--rsource")
	}
}
