package rules

import (
	"fmt"
	"strconv"
)

// ConnLimitMatch is -m connlimit (iptables' xt_connlimit over the
// kernel's nf_conncount; docs/limits.md): the rule keeps, per key (the
// packet's source or destination address under Mask), the connections
// whose packets reached it and passed its other matches; the packet's own
// connection is one of them. --connlimit-above N matches when more than N
// of them are alive (not closed), --connlimit-upto N when at most N are.
type ConnLimitMatch struct {
	Above bool   // --connlimit-above (or ! --connlimit-upto)
	Limit uint32 // N
	// Mask is the prefix length of the key's address (--connlimit-mask);
	// -1: every bit of the packet's family (the default).
	Mask int
	Dst  bool // --connlimit-daddr: the key is the destination address (default: the source)
}

// connLimitModule handles -m connlimit.
func (p *ruleParser) connLimitModule(at token) *Error {
	if p.stateMod == "connlimit" {
		return p.errAt(at, "", "-m connlimit given twice", "xdpfw takes one -m connlimit per rule")
	}
	if p.stateAt != nil {
		return p.errAt(at, "", "-m connlimit beside -m "+p.stateMod, "xdpfw takes one rate or state match per rule: split the rule in two")
	}
	c := &ConnLimitMatch{Mask: -1}
	p.r.Match.ConnLimit = c
	p.stateAt, p.stateMod = &at, "connlimit"
	p.modules["connlimit"] = &moduleUse{tok: at, used: true}
	set := false
	p.connLimitSet = func() { set = true }
	p.checks = append(p.checks, func() *Error {
		if err := p.stateOnChainTarget(at); err != nil {
			return err
		}
		if !set {
			return p.errAt(at, "", "-m connlimit needs --connlimit-above or --connlimit-upto", "e.g. --connlimit-above 10, as iptables requires")
		}
		// one AST for one text: the family's full mask is the default
		if full, known := map[Family]int{FamilyIPv4: 32, FamilyIPv6: 128}[p.r.Match.Family]; known && c.Mask == full {
			c.Mask = -1
		}
		return nil
	})
	return nil
}

// optConnLimit handles --connlimit-above and --connlimit-upto; ! inverts
// one into the other, as iptables-save prints them.
func (p *ruleParser) optConnLimit(o optUse) *Error {
	a := o.args[0]
	n, ok := parseUint(a.text, 1<<32-1)
	if !ok {
		return p.errAt(a, a.text, "bad "+o.opt.text, "a number of connections from 0 to 4294967295")
	}
	c := p.r.Match.ConnLimit
	c.Limit = uint32(n)
	c.Above = (o.opt.text == "--connlimit-above") != o.invert
	p.connLimitSet()
	return nil
}

// optConnLimitMask handles --connlimit-mask PREFIX.
func (p *ruleParser) optConnLimitMask(o optUse) *Error {
	a := o.args[0]
	n, ok := parseUint(a.text, 128)
	if !ok {
		return p.errAt(a, a.text, "bad --connlimit-mask", "a prefix length: 0 to 32 (IPv4) or 0 to 128 (IPv6)")
	}
	if n > 32 {
		if err := p.setFamily(FamilyIPv6, a, a.text, "an IPv6 prefix length", "--connlimit-mask "+a.text+" (IPv6)"); err != nil {
			return err
		}
	}
	p.r.Match.ConnLimit.Mask = n
	return nil
}

// optConnLimitSide handles --connlimit-saddr and --connlimit-daddr.
func (p *ruleParser) optConnLimitSide(o optUse) *Error {
	p.r.Match.ConnLimit.Dst = o.opt.text == "--connlimit-daddr"
	return nil
}

// formatConnLimit writes -m connlimit as iptables-save prints it
// (libxt_connlimit's connlimit_save4/6: the limit, the mask, the side).
func formatConnLimit(w *specWriter, c *ConnLimitMatch, fam Family) {
	opt := "--connlimit-upto"
	if c.Above {
		opt = "--connlimit-above"
	}
	w.add(false, "-m", "connlimit", opt, strconv.FormatUint(uint64(c.Limit), 10))
	if mask := c.Mask; mask >= 0 || fam != FamilyAny {
		if mask < 0 {
			mask = map[Family]int{FamilyIPv4: 32, FamilyIPv6: 128}[fam]
		}
		w.add(false, "--connlimit-mask", fmt.Sprint(mask))
	}
	if c.Dst {
		w.add(false, "--connlimit-daddr")
	} else {
		w.add(false, "--connlimit-saddr")
	}
}

// MaskBits is the prefix length the key keeps for a packet of family v6.
func (c *ConnLimitMatch) MaskBits(v6 bool) int {
	switch {
	case c.Mask >= 0:
		return c.Mask
	case v6:
		return 128
	}
	return 32
}
