package compile

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestSeveralCTMatchesAgree: a rule of several -m conntrack and -m state
// matches (the parser keeps their intersection) decides, in the data
// plane's Go twin and in the reference, as the kernel's matches do one by
// one: a packet must pass each; a packet without a connection (INVALID,
// UNTRACKED) passes a match only by its state test (xt_conntrack returns
// there), a connection's packet as that match alone decides it.
func TestSeveralCTMatchesAgree(t *testing.T) {
	cases := [][]string{
		{"-m conntrack --ctstate NEW", "-m conntrack --ctstatus ASSURED"},
		{"-m state --state NEW", "-m conntrack --ctstate NEW,ESTABLISHED"},
		{"-m state --state NEW,RELATED", "-m state --state RELATED,ESTABLISHED"},
		{"-m conntrack ! --ctstate NEW", "-m conntrack ! --ctstate INVALID"},
		{"-m conntrack --ctstate NEW,ESTABLISHED", "-m state ! --state NEW"},
		{"-m conntrack --ctstate NEW", "-m conntrack --ctstate NEW,SNAT"},
		{"-m conntrack ! --ctstate SNAT", "-m conntrack ! --ctstate DNAT"},
		{"-m conntrack ! --ctstatus ASSURED", "-m conntrack ! --ctstatus CONFIRMED"},
		{"-m conntrack --ctstatus ASSURED", "-m conntrack --ctstatus ASSURED,SEEN_REPLY"},
		{"-m conntrack --ctproto 6", "-m conntrack ! --ctproto 17"},
		{"-m conntrack --ctdir REPLY", "-m conntrack --ctdir REPLY --ctstate ESTABLISHED"},
		{"-m conntrack --ctstate INVALID,NEW", "-m conntrack --ctstatus ASSURED"},
		{"-m state ! --state ESTABLISHED", "-m conntrack --ctdir REPLY"},
		{"-m conntrack --ctproto 6", "-m state ! --state INVALID,UNTRACKED"},
		{"-m conntrack --ctstate NEW,UNTRACKED --ctstatus SEEN_REPLY", "-m conntrack --ctproto 6"},
		// One match whose state test lets packets without a connection
		// through beside tests that read one: the kernel passes them by
		// the state test alone (conntrack_mt returns before the others).
		{"-m conntrack --ctstate INVALID,NEW --ctstatus ASSURED"},
		{"-m conntrack ! --ctstate NEW --ctproto 17"},
		{"-m conntrack --ctstate INVALID --ctdir REPLY"},
		{"-m conntrack --ctstate UNTRACKED,ESTABLISHED ! --ctstatus CONFIRMED"},
		{"-m conntrack ! --ctstate ESTABLISHED ! --ctproto 6 --ctdir ORIGINAL"},
		{"-m conntrack ! --ctstate RELATED --ctorigsrc 10.0.0.0/8"},
		{"-m conntrack ! --ctstate DNAT --ctstatus ASSURED"},
		{"-m conntrack --ctstate INVALID,SNAT --ctproto 17"},
		// without a state test, none
		{"-m conntrack ! --ctstatus ASSURED"},
		{"-m conntrack ! --ctproto 6"},
		// several matches, each with a state test: the conjunction of
		// their state tests decides such a packet
		{"-m state --state NEW,UNTRACKED", "-m conntrack --ctstate UNTRACKED,NEW --ctproto 6"},
		{"-m conntrack --ctstate INVALID,NEW --ctstatus ASSURED", "-m state --state INVALID,ESTABLISHED,NEW"},
		{"-m conntrack ! --ctstate NEW --ctstatus ASSURED", "-m state ! --state ESTABLISHED"},
	}
	r := rand.New(rand.NewPCG(25, 2))
	names := []string{"lo", "eth0"}
	parse := func(m string) *rules.RuleSet {
		rs, err := rules.Parse("t.rules", []byte("-A INPUT "+m+" -j ACCEPT"), rules.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	for _, ms := range cases {
		rs := parse(strings.Join(ms, " "))
		tb, _, err := Compile(Input{RuleSet: rs, IDs: ids(1), Ifaces: testIfaces})
		if err != nil {
			t.Fatalf("%v: %v", ms, err)
		}
		var one []*rules.RuleSet // each match alone
		for _, m := range ms {
			one = append(one, parse(m))
		}
		matched := 0
		for k := range 3000 {
			p := randomRefPacket(r, rs, names)
			p.Chain, p.OutIface = rules.ChainInput, ""
			p.CTState = uint8(r.IntN(int(NumCTStates)))
			p.CTInfo = uint8(r.UintN(64)) | []uint8{0, CTIReply}[r.IntN(2)]
			p.CTProto = []uint8{6, 17}[r.IntN(2)]
			kernel := true
			for i := range ms {
				if p.CTState == CTInvalid || p.CTState == CTUntracked {
					m := one[i].Rules[0].Match
					s := m.CTState
					fam := m.Family == rules.FamilyAny || (m.Family == rules.FamilyIPv4) == p.Src.Is4() // iptables or ip6tables
					kernel = kernel && fam && s != nil && (s.Mask&(1<<p.CTState) != 0) != s.Invert
				} else {
					kernel = kernel && Decide(one[i], p).Rule == 0
				}
			}
			want := Decide(rs, p).Rule == 0
			got, _ := twinDecide(rs, tb, &State{Now: 1e12}, &p)
			if want != kernel || (got == 0) != want {
				t.Fatalf("%v (as %s), packet %d %+v: kernel %v, reference %v, twin %v", ms, rs.Rules[0].Text, k, p, kernel, want, got == 0)
			}
			if want {
				matched++
			}
		}
		if matched == 0 {
			t.Errorf("%v: no packet matched", ms)
		}
	}
}
