package compile

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// ctOption is one option of -m conntrack in a rule's canonical text.
var ctOption = regexp.MustCompile(` (! )?--ct(state|proto|status|dir|origsrc|origdst|replsrc|repldst) [^ ]+`)

// splitCT writes each -m conntrack option of line in a match of its own
// (a --ctstate without SNAT or DNAT, at random, as -m state --state), as
// iptables-save prints such a rule; a --ctstate without SNAT or DNAT gets,
// at random, a second, random state match.
func splitCT(r *rand.Rand, line string) (string, *rules.CTStateMatch) {
	var extra *rules.CTStateMatch
	line = strings.Replace(line, " -m conntrack", "", 1)
	line = ctOption.ReplaceAllStringFunc(line, func(o string) string {
		if !strings.Contains(o, "--ctstate") || strings.Contains(o, "NAT") {
			return " -m conntrack" + o
		}
		out := " -m conntrack" + o
		if r.IntN(2) == 0 {
			out = " -m state" + strings.Replace(o, "--ctstate", "--state", 1)
		}
		if r.IntN(2) == 0 {
			var states []string
			extra = &rules.CTStateMatch{Invert: r.IntN(2) == 0}
			for i, s := range []string{"NEW", "ESTABLISHED", "RELATED", "INVALID", "UNTRACKED"} { // the bits' order
				if r.IntN(2) == 0 || i == 4 && extra.Mask == 0 {
					states = append(states, s)
					extra.Mask |= 1 << i
				}
			}
			second := " -m conntrack --ctstate " + strings.Join(states, ",")
			if extra.Invert {
				second = " -m conntrack ! --ctstate " + strings.Join(states, ",")
			}
			if r.IntN(2) == 0 {
				out = second + out
			} else {
				out += second
			}
		}
		return out
	})
	return line, extra
}

// TestSplitCTMatchesAgree: random rule sets, each rule's -m conntrack
// options written as several matches (splitCT), decide every random packet
// as the sets written as iptables-save prints them, where the second state
// match is dropped and a packet must pass it besides: the parser's
// intersection of the matches is their one -m conntrack and the second
// state test; a packet without a connection (INVALID, UNTRACKED), which
// xt_conntrack judges by a match's state test alone, fails a split rule
// that had a state test beside other options (their matches have none). A
// split rule that matches no packet is refused; the set is then skipped.
func TestSplitCTMatchesAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 3))
	names := []string{"lo", "eth0", "eth1"}
	compared, split := 0, 0
	for set := range 800 {
		rs := rules.RandomRuleSet(r, 1+r.IntN(20))
		lines := strings.Split(rs.String(), "\n")
		extra := make([]*rules.CTStateMatch, len(rs.Rules)) // rule i's second state test
		j := 0
		for i, l := range lines {
			if j < len(rs.Rules) && l == rs.Rules[j].String() {
				if strings.Contains(l, " --ct") {
					split++
					lines[i], extra[j] = splitCT(r, l)
				}
				j++
			}
		}
		if j != len(rs.Rules) {
			t.Fatalf("set %d: %d of %d rules found in its text\n%s", set, j, len(rs.Rules), rs)
		}
		text := strings.Join(lines, "\n")
		srs, err := rules.Parse("t.rules", []byte(text), rules.ParseOptions{})
		if err != nil {
			if strings.Contains(err.Error(), "match no packet") {
				continue
			}
			t.Fatalf("set %d: %v\n%s", set, err, text)
		}
		for k := range 200 {
			p := randomRefPacket(r, rs, names)
			exp := *rs // the rules whose second state test fails p match nothing
			exp.Rules = slices.Clone(rs.Rules)
			q := p // as the chains see it: the raw table's NOTRACK first
			if rawNotrack(rs, &q) {
				q.CTState = CTUntracked
			}
			for i, e := range extra {
				if e != nil && (e.Mask&ctStateBits(q) != 0) == e.Invert {
					exp.Rules[i].Match.CTState = &rules.CTStateMatch{}
				}
				// a packet without a connection passes the one -m conntrack
				// by its state test alone, but fails a split match that
				// has another option and no state test
				m := &rs.Rules[i].Match
				if m.CTState != nil && (m.CTProto != nil || m.CTStatus != nil || m.CTDir != nil || m.CTAddrs()) &&
					(q.CTState == CTInvalid || q.CTState == CTUntracked) {
					exp.Rules[i].Match.CTState = &rules.CTStateMatch{}
				}
			}
			if got, want := Decide(srs, p).Rule, Decide(&exp, p).Rule; got != want {
				t.Fatalf("set %d packet %d: split decides rule %d, iptables-save's form %d\npacket %+v\n%s\nwas\n%s", set, k, got, want, p, text, rs)
			}
		}
		compared++
	}
	if compared < 600 || split < 1000 {
		t.Fatalf("%d sets compared, %d rules split: the test checked too little", compared, split)
	}
	t.Logf("%d sets compared, %d rules split", compared, split)
}
