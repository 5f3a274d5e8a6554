package bench

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"

	"github.com/xdpfw/xdpfw/internal/packet"
)

// benchRule is one INPUT rule of a generated benchmark rule set: a box of
// source and destination prefixes (invalid: any), a protocol (0: any) and
// port ranges (TCP and UDP only; {0, 65535}: any).
type benchRule struct {
	src, dst     netip.Prefix
	proto        uint8
	sport, dport [2]uint16
	drop         bool
}

var anyPort = [2]uint16{0, 65535}

func (r *benchRule) text(b *strings.Builder) {
	b.WriteString("-A INPUT")
	for _, f := range []struct {
		opt string
		p   netip.Prefix
	}{{"-s", r.src}, {"-d", r.dst}} {
		if f.p.IsValid() {
			fmt.Fprintf(b, " %s %s", f.opt, f.p)
		}
	}
	switch r.proto {
	case packet.ProtoTCP:
		b.WriteString(" -p tcp")
	case packet.ProtoUDP:
		b.WriteString(" -p udp")
	case packet.ProtoICMP:
		b.WriteString(" -p icmp")
	}
	for _, f := range []struct {
		opt string
		r   [2]uint16
	}{{"--sport", r.sport}, {"--dport", r.dport}} {
		switch {
		case f.r == anyPort:
		case f.r[0] == f.r[1]:
			fmt.Fprintf(b, " %s %d", f.opt, f.r[0])
		default:
			fmt.Fprintf(b, " %s %d:%d", f.opt, f.r[0], f.r[1])
		}
	}
	if r.drop {
		b.WriteString(" -j DROP\n")
	} else {
		b.WriteString(" -j ACCEPT\n")
	}
}

// rulesText is the iptables-restore text of rs: INPUT policy DROP, rs in
// order.
func rulesText(rs []benchRule) string {
	var b strings.Builder
	b.WriteString("-P INPUT DROP\n")
	for i := range rs {
		rs[i].text(&b)
	}
	return b.String()
}

// benchFrameLen is the length of every frame the benchmarks build (the
// spread driver's SPREAD_FRAME): Ethernet + IPv6 + TCP fit, with payload.
const benchFrameLen = 96

// framePacket is a packet whose frame is benchFrameLen bytes, from src to
// dst with protocol proto (TCP SYN, UDP or ICMP echo) and ports sport,
// dport.
func framePacket(src, dst netip.Addr, proto uint8, sport, dport uint16) *packet.Packet {
	p := packet.Packet{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		Src: src, Dst: dst, Proto: proto, SPort: sport, DPort: dport}
	switch proto {
	case packet.ProtoTCP:
		p.TCPFlags = packet.TCPSyn
	case packet.ProtoICMP:
		p.ICMPType = 8
	}
	n := len(p.Bytes())
	p.Payload = make([]byte, benchFrameLen-n)
	return &p
}

// randIn is a random address of prefix p (invalid: of 10.0.0.0/8 for
// IPv4 rule sets, which is where the generated rules' other addresses
// live).
func randIn(r *rand.Rand, p netip.Prefix, v6 bool) netip.Addr {
	if !p.IsValid() {
		if v6 {
			p = netip.MustParsePrefix("2001:db8::/32")
		} else {
			p = netip.MustParsePrefix("10.0.0.0/8")
		}
	}
	a := p.Addr().As16()
	off := 0
	if p.Addr().Is4() {
		off = 12
	}
	for bit := p.Bits(); bit < p.Addr().BitLen(); bit++ {
		if r.IntN(2) == 1 {
			a[off+bit/8] |= 0x80 >> (bit % 8)
		}
	}
	if p.Addr().Is4() {
		return netip.AddrFrom4([4]byte(a[12:]))
	}
	return netip.AddrFrom16(a)
}

func randPort(r *rand.Rand, pr [2]uint16) uint16 {
	return pr[0] + uint16(r.IntN(int(pr[1])-int(pr[0])+1))
}

// pointIn is a random frame inside r's box. A rule without a protocol
// gets TCP or UDP (ports any).
func (r *benchRule) pointIn(rnd *rand.Rand, v6 bool) *packet.Packet {
	proto := r.proto
	if proto == 0 {
		proto = []uint8{packet.ProtoTCP, packet.ProtoUDP}[rnd.IntN(2)]
	}
	return framePacket(randIn(rnd, r.src, v6), randIn(rnd, r.dst, v6), proto, randPort(rnd, r.sport), randPort(rnd, r.dport))
}

// disjointRules is the micro benchmark's default rule set (RuleSetText).
func disjointRules(n int, family string) []benchRule {
	rs := make([]benchRule, 0, n)
	for i := 0; i < n-1; i++ {
		r := benchRule{proto: packet.ProtoUDP, sport: anyPort}
		r.dport[0] = uint16(1000 + i%5000)
		r.dport[1] = r.dport[0]
		if family == "ipv6" {
			r.src = netip.MustParsePrefix(fmt.Sprintf("2001:db8:%x:%x::/64", i>>16, i&0xffff))
		} else {
			r.src = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte((i / 250) % 250), byte(i % 250), 0}), 24)
		}
		rs = append(rs, r)
	}
	last := benchRule{proto: packet.ProtoUDP, sport: anyPort, dport: [2]uint16{53, 53},
		src: netip.MustParsePrefix("192.0.2.0/24")}
	if family == "ipv6" {
		last.src = netip.MustParsePrefix("2001:db8:ffff::/48")
	}
	return append(rs, last)
}

// Rule sets of `bench micro --ruleset`.
const (
	RuleSetDisjoint = "disjoint"
	RuleSetACL      = "classbench-acl"
	RuleSetFW       = "classbench-fw"
	RuleSetIPC      = "classbench-ipc"
)

// RuleSets are the names --ruleset accepts.
var RuleSets = []string{RuleSetDisjoint, RuleSetACL, RuleSetFW, RuleSetIPC}

// cbProfile is the shape of a ClassBench-style seed: the distributions
// its rules are drawn from (after ClassBench's ACL, FW and IPC seeds:
// ACLs name hosts and services precisely, firewalls use wildcards and port
// ranges, IP chains mix both).
type cbProfile struct {
	srcLens, dstLens []int     // prefix lengths drawn from (0: any)
	portClass        []float64 // dport: any, exact, well-known range, 1024:65535, arbitrary
	sportRange       float64   // P(a source port range)
	protos           []uint8   // drawn from (0: any)
	nest             float64   // P(a rule is made inside an earlier one)
	drop             float64   // P(DROP)
}

var cbProfiles = map[string]cbProfile{
	RuleSetACL: {srcLens: []int{0, 8, 16, 24, 24, 28, 32, 32, 32, 32}, dstLens: []int{16, 24, 24, 28, 32, 32, 32, 32},
		portClass: []float64{0.2, 0.6, 0.05, 0.1, 0.05}, sportRange: 0.02,
		protos: []uint8{6, 6, 6, 6, 6, 17, 17, 17, 1, 0}, nest: 0.4, drop: 0.3},
	RuleSetFW: {srcLens: []int{0, 0, 0, 8, 16, 24, 32}, dstLens: []int{0, 8, 16, 16, 24, 24, 28, 32, 32},
		portClass: []float64{0.3, 0.3, 0.1, 0.2, 0.1}, sportRange: 0.15,
		protos: []uint8{6, 6, 6, 17, 17, 1, 0, 0}, nest: 0.5, drop: 0.5},
	RuleSetIPC: {srcLens: []int{0, 16, 20, 24, 28, 32, 32}, dstLens: []int{0, 16, 20, 24, 28, 32, 32},
		portClass: []float64{0.35, 0.35, 0.1, 0.1, 0.1}, sportRange: 0.1,
		protos: []uint8{6, 6, 6, 17, 17, 1, 0}, nest: 0.4, drop: 0.4},
}

// cbFirstOctets are the /8s ClassBench-style rules draw their addresses
// from (not 198 and 203, whose documentation /24s the miss probe uses).
var cbFirstOctets = []byte{10, 23, 31, 45, 62, 77, 89, 100, 130, 141, 152, 172, 185, 192, 212, 217}

// classBenchRules is a deterministic ClassBench-style IPv4 rule set of n
// rules of the given profile (RuleSetACL, RuleSetFW, RuleSetIPC): mixed
// prefix lengths in 16 /8s (cbFirstOctets), port ranges, a protocol mix, and a
// share of rules (the profile's nest) made inside an earlier rule's box —
// narrower in at least one dimension — so prefixes nest and ranges
// overlap. Every rule names a source or a destination, so a packet from
// and to addresses outside those /8s matches none. Rules are ordered
// most specific first (specificity), as real ACLs put their exceptions
// before the broader rules: a rule comes before every rule whose box holds
// its own, so nesting hides no rule (a rule the ones before it cover
// together can still be hidden: aimFrames counts them).
func classBenchRules(profile string, n int) []benchRule {
	pr := cbProfiles[profile]
	rnd := rand.New(rand.NewPCG(uint64(n), uint64(len(profile))*0x9e3779b97f4a7c15))
	type gen struct {
		r     benchRule
		depth int
	}
	out := make([]gen, 0, n)
	prefix := func(bits int) netip.Prefix {
		if bits == 0 {
			return netip.Prefix{}
		}
		a := randIn(rnd, netip.Prefix{}, false).As4()
		a[0] = cbFirstOctets[rnd.IntN(len(cbFirstOctets))]
		return netip.PrefixFrom(netip.AddrFrom4(a), max(bits, 8)).Masked()
	}
	ports := func(class []float64) [2]uint16 {
		x := rnd.Float64()
		for c, p := range class {
			if x >= p {
				x -= p
				continue
			}
			switch c {
			case 1:
				p := []uint16{22, 25, 53, 80, 123, 443, 993, 3306, 5432, 8080}[rnd.IntN(10)]
				if rnd.IntN(4) == 0 {
					p = uint16(1 + rnd.IntN(65535))
				}
				return [2]uint16{p, p}
			case 2:
				return [2]uint16{0, 1023}
			case 3:
				return [2]uint16{1024, 65535}
			case 4:
				lo := uint16(rnd.IntN(60000))
				return [2]uint16{lo, lo + uint16(1+rnd.IntN(5000))}
			}
			break
		}
		return anyPort
	}
	narrowPrefix := func(p netip.Prefix) netip.Prefix {
		if !p.IsValid() {
			return prefix(8 * (1 + rnd.IntN(4)))
		}
		if p.Bits() == 32 {
			return p
		}
		bits := min(32, p.Bits()+1+rnd.IntN(8))
		return netip.PrefixFrom(randIn(rnd, p, false), bits).Masked()
	}
	narrowPorts := func(r [2]uint16) [2]uint16 {
		if r[0] == r[1] {
			return r
		}
		lo := randPort(rnd, r)
		return [2]uint16{lo, lo + uint16(rnd.IntN(int(r[1]-lo)+1))}
	}
	for len(out) < n {
		var g gen
		if len(out) > 0 && rnd.Float64() < pr.nest {
			parent := out[rnd.IntN(len(out))]
			g = gen{r: parent.r, depth: parent.depth + 1}
			// narrow one or two dimensions the parent leaves room in
			for k := 0; k < 1+rnd.IntN(2); k++ {
				switch rnd.IntN(4) {
				case 0:
					g.r.src = narrowPrefix(g.r.src)
				case 1:
					g.r.dst = narrowPrefix(g.r.dst)
				case 2:
					if g.r.proto == 6 || g.r.proto == 17 {
						g.r.dport = narrowPorts(g.r.dport)
					}
				case 3:
					if g.r.proto == 0 {
						g.r.proto = []uint8{6, 17}[rnd.IntN(2)]
					}
				}
			}
			if g.r == parent.r {
				g.r.dst = narrowPrefix(g.r.dst)
			}
			if g.r == parent.r {
				continue // a /32 pair with exact ports: nothing to narrow
			}
			g.r.drop = rnd.Float64() < pr.drop
		} else {
			g.r = benchRule{src: prefix(pr.srcLens[rnd.IntN(len(pr.srcLens))]), dst: prefix(pr.dstLens[rnd.IntN(len(pr.dstLens))]),
				proto: pr.protos[rnd.IntN(len(pr.protos))], sport: anyPort, dport: anyPort, drop: rnd.Float64() < pr.drop}
			if !g.r.src.IsValid() && !g.r.dst.IsValid() {
				g.r.dst = prefix(24)
			}
			if g.r.proto == 6 || g.r.proto == 17 {
				g.r.dport = ports(pr.portClass)
				if rnd.Float64() < pr.sportRange {
					g.r.sport = [2]uint16{1024, 65535}
				}
			}
		}
		out = append(out, g)
	}
	slices.SortStableFunc(out, func(a, b gen) int { return cmp.Compare(b.r.specificity(), a.r.specificity()) })
	rs := make([]benchRule, n)
	for i, g := range out {
		rs[i] = g.r
	}
	return rs
}

// specificity is how narrow r's box is, in bits: a box inside another is
// more specific than it.
func (r *benchRule) specificity() float64 {
	bits := func(p netip.Prefix) float64 {
		if !p.IsValid() {
			return 0
		}
		return float64(p.Bits())
	}
	ports := func(pr [2]uint16) float64 { return 16 - math.Log2(float64(pr[1])-float64(pr[0])+1) }
	s := bits(r.src) + bits(r.dst) + ports(r.sport) + ports(r.dport)
	if r.proto != 0 {
		s += 8
	}
	return s
}

// contains says whether r's box holds all of s's.
func (r *benchRule) contains(s *benchRule) bool {
	in := func(p, q netip.Prefix) bool {
		return !p.IsValid() || q.IsValid() && p.Bits() <= q.Bits() && p.Contains(q.Addr())
	}
	return in(r.src, s.src) && in(r.dst, s.dst) && (r.proto == 0 || r.proto == s.proto) &&
		r.sport[0] <= s.sport[0] && s.sport[1] <= r.sport[1] && r.dport[0] <= s.dport[0] && s.dport[1] <= r.dport[1]
}

// benchRules is the rule set named by name (RuleSets) of n rules.
func benchRules(name string, n int, family string) ([]benchRule, error) {
	switch name {
	case "", RuleSetDisjoint:
		return disjointRules(n, family), nil
	case RuleSetACL, RuleSetFW, RuleSetIPC:
		if family != "ipv4" {
			return nil, fmt.Errorf("--ruleset %s is IPv4 only", name)
		}
		return classBenchRules(name, n), nil
	}
	return nil, fmt.Errorf("--ruleset %q: one of %s", name, strings.Join(RuleSets, ", "))
}
