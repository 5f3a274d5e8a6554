package compile

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// TestLimitTreeAgreesWithReference: rule sets with -m limit rules, packets
// in sequence, the buckets modelled on both sides with the clock standing
// (no token comes back): the tree walk (ClassifyWith, taking the deciding
// rule's token as fw_classify_in does) and the reference (DecideAt) decide
// every packet alike. Once a bucket is empty its rule must let packets on
// to the entries after it, in its leaf and in the other trees: a -m limit
// entry that ended a leaf, or cut the entries after it, shows here.
func TestLimitTreeAgreesWithReference(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 3))
	names := []string{"lo", "eth0", "eth1", "veth0"}
	refused := 0
	for set := range 200 {
		rs := rules.RandomRuleSet(r, 1+r.IntN(40))
		rules.RandomLimits(r, rs, 30)
		tb := compileTest(t, rs)
		ref := &State{}
		tat := map[uint32]uint64{} // the twin's buckets, by rule id
		byID := map[uint32]*rules.LimitMatch{}
		for i := range rs.Rules {
			byID[uint32(FirstRuleID+i)] = rs.Rules[i].Match.Limit
		}
		ready := func(id uint32) bool {
			l := byID[id]
			return bucketReady(tat[id], 0, l.IntervalNS(), l.Burst)
		}
		for k := range 400 {
			p := randomRefPacket(r, rs, names)
			want := DecideAt(rs, p, ref)
			c := tb.ClassifyWith(&p, testDev(&p), &Stateful{Ready: ready})
			gotID := c.Root.RuleID
			if c.Entry >= 0 {
				e := tb.Entries[c.Entry]
				gotID = e.RuleID
				if e.Limit {
					l := byID[e.RuleID]
					tat[e.RuleID] += l.IntervalNS()
				}
			}
			wantID := PolicyID(uint8(p.Chain), p.Src.Is6())
			if want.Rule >= 0 {
				wantID = uint32(FirstRuleID + want.Rule)
			}
			if gotID != wantID {
				t.Fatalf("set %d packet %d: tree says id %d, reference id %d\npacket %+v\n%s", set, k, gotID, wantID, p, rs)
			}
			for i := range rs.Rules { // a rule that matched, and had no token
				if l := rs.Rules[i].Match.Limit; l != nil && i < want.Rule+1 && Matches(&rs.Rules[i].Match, p) &&
					rs.Rules[i].Chain == p.Chain && i != want.Rule {
					refused++
					break
				}
			}
		}
	}
	if refused == 0 {
		t.Fatal("no packet passed a -m limit rule whose bucket was empty: the test checked nothing")
	}
	t.Logf("%d packets went past a -m limit rule without a token", refused)
}

// TestLimitEntryNeverEndsLeaf: a -m limit rule that covers every packet
// of its region leaves the entries after it in the leaf (they decide when
// its bucket is empty), where a plain rule cuts them.
func TestLimitEntryNeverEndsLeaf(t *testing.T) {
	for _, tc := range []struct {
		first string
		want  int // candidates of the udp packet's walk
	}{
		{"-A INPUT -p udp -j ACCEPT", 1},
		{"-A INPUT -p udp -m limit -j ACCEPT", 2},
	} {
		rs, err := rules.Parse("t", []byte(tc.first+"\n-A INPUT -p udp -j DROP\n"), rules.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tb := compileTest(t, rs)
		p := RefPacket{Chain: rules.ChainInput, Src: mustAddr("10.0.0.1"), Dst: mustAddr("10.0.0.2"), Proto: 17, L4: true}
		if got := len(tb.Lookup(0, KeyOf(&p, Dev{}))); got != tc.want {
			t.Errorf("%s: the walk finds %d candidates, want %d", tc.first, got, tc.want)
		}
		if tc.want == 2 {
			if c := tb.ClassifyWith(&p, Dev{}, &Stateful{Ready: func(uint32) bool { return false }}); c.Entry < 0 || tb.Entries[c.Entry].RuleID != FirstRuleID+1 {
				t.Errorf("%s: with its bucket empty the packet is decided by entry %d, want the DROP", tc.first, c.Entry)
			}
		}
	}
}

// TestLimitNoFastRule: a -m limit rule that tests only the state is no
// fast rule (it does not decide every packet in those states), and the
// states it may match are no fast rule's after it either.
func TestLimitNoFastRule(t *testing.T) {
	rs, err := rules.Parse("t", []byte("-A INPUT -m conntrack --ctstate ESTABLISHED -m limit -j ACCEPT\n"+
		"-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT\n"), rules.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tb := compileTest(t, rs)
	if r := tb.Roots[0]; r.FastStates != rules.CTRelated || r.FastRuleID != FirstRuleID+1 {
		t.Errorf("fast rule id %d for states %#x; want rule 1 for RELATED only", r.FastRuleID, r.FastStates)
	}
}

// TestRecentTreeAgreesWithReference: rule sets with -m recent rules,
// packets in sequence, the lists modelled with the clock standing: the
// tree walk (ClassifyWith, settling the -m recent entries it met in
// index order, as fw_state_settle) and the reference (DecideAt, rule by
// rule) decide every packet alike and leave the same lists. A -m recent
// entry that ended a leaf, decided in the walk, or was settled out of
// order shows here.
func TestRecentTreeAgreesWithReference(t *testing.T) {
	stateTreeAgrees(t, rand.New(rand.NewPCG(15, 4)), 200, func(r *rand.Rand, rs *rules.RuleSet) { rules.RandomRecent(r, rs, 25) })
}

// TestRecentTTLForward: -m recent's TTL is the packet's as it arrived in
// FORWARD too (xt_recent adds back the one ip_forward took, where -m ttl
// tests the decremented one): an address listed from INPUT is found by a
// FORWARD --rttl rule for a packet of the same arriving TTL, and one
// listed from FORWARD by an INPUT one.
func TestRecentTTLForward(t *testing.T) {
	rs, err := rules.Parse("t", []byte(`-A INPUT -p udp --dport 1 -m recent --set --name T -j ACCEPT
-A INPUT -p udp --dport 2 -m recent --rcheck --rttl --name T -j ACCEPT
-A FORWARD -p udp --dport 1 -m recent --set --name T -j ACCEPT
-A FORWARD -p udp --dport 2 -m recent --rcheck --rttl --name T -j ACCEPT
`), rules.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := &State{Now: 1}
	var got []int
	for _, c := range []struct {
		chain rules.Chain
		port  uint16
		ttl   uint8
	}{
		{rules.ChainInput, 1, 64}, {rules.ChainForward, 2, 64}, {rules.ChainForward, 2, 63},
		{rules.ChainForward, 1, 30}, {rules.ChainInput, 2, 30}, {rules.ChainInput, 2, 29},
	} {
		p := RefPacketOf(&packet.Packet{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.9.0.1"),
			Proto: packet.ProtoUDP, SPort: 9, DPort: c.port, TTL: c.ttl}, "eth0")
		p.Chain = c.chain
		got = append(got, DecideAt(rs, p, st).Rule)
	}
	if want := "[0 3 -1 2 1 -1]"; fmt.Sprint(got) != want {
		t.Errorf("rules %v, want %v", got, want)
	}
}

// TestRecentNotesBound: a rule set where one packet could meet more -m
// recent rules than the data plane settles is refused; narrowed, it loads.
func TestRecentNotesBound(t *testing.T) {
	var broad, narrow strings.Builder
	for i := range 9 {
		fmt.Fprintf(&broad, "-A INPUT -p tcp -m recent --rcheck --name l%d -j DROP\n", i)
		fmt.Fprintf(&narrow, "-A INPUT -p tcp --dport %d -m recent --rcheck --name l%d -j DROP\n", 1000+i, i)
	}
	for _, tc := range []struct {
		src string
		ok  bool
	}{{broad.String(), false}, {narrow.String(), true}} {
		rs, err := rules.Parse("t", []byte(tc.src), rules.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = Compile(Input{RuleSet: rs, IDs: ids(len(rs.Rules)), Ifaces: testIfaces})
		if (err == nil) != tc.ok {
			t.Errorf("compile: %v, want ok %v\n%s", err, tc.ok, tc.src)
		}
		if err != nil && !strings.Contains(err.Error(), "could meet 9 rules with -m recent") {
			t.Errorf("error %q does not say why", err)
		}
	}
}

// twinState is the Go twin's side of the buckets and lists (Stateful) for
// the rules of rs, kept in st as the reference keeps its own.
func twinState(rs *rules.RuleSet, tb *Tables, st *State, p *RefPacket) *Stateful {
	idx := func(id uint32) int { return int(id - FirstRuleID) }
	return &Stateful{
		Ready: func(id uint32) bool {
			l := rs.Rules[idx(id)].Match.Limit
			return st.ready(idx(id), l.IntervalNS(), l.Burst)
		},
		Take: func(id uint32) bool {
			l := rs.Rules[idx(id)].Match.Limit
			return st.take(idx(id), l.IntervalNS(), l.Burst)
		},
		Recent: func(entry int) bool {
			return st.recent(rs.Rules[idx(tb.Entries[entry].RuleID)].Match.Recent, p)
		},
	}
}

// twinDecide classifies p with the twin and takes the token of a rule
// that decides in the walk with -m limit (fw_log_emit); it returns the
// deciding rule (-1: the policy) and the rules counted.
func twinDecide(rs *rules.RuleSet, tb *Tables, st *State, p *RefPacket) (int, []int) {
	c := tb.ClassifyWith(p, testDev(p), twinState(rs, tb, st, p))
	rule := -1
	if c.Entry >= 0 {
		e := &tb.Entries[c.Entry]
		rule = int(e.RuleID - FirstRuleID)
		if l := rs.Rules[rule].Match.Limit; e.Limit && !e.Noted() {
			st.take(rule, l.IntervalNS(), l.Burst)
		}
	}
	var counts []int
	for _, id := range c.Counts {
		counts = append(counts, int(id-FirstRuleID))
	}
	return rule, counts
}

// TestStateOnChainsAgreeWithReference: rule sets with chains whose jumps,
// gotos, RETURNs and rules without -j have -m limit or -m recent
// (rules.RandomStateOnChains; deciding rules with them too), packets in
// sequence with the clock standing: the twin (probes and guards settled
// in rule order) and the reference (chains walked with a stack, each rule
// testing its bucket or list when the packet reaches it) decide every
// packet alike, count the same rules and leave the same buckets and
// lists. A probe settled out of order, a token not taken (or taken twice)
// by a rule that decides nothing, or a guard on the wrong bit shows here.
func TestStateOnChainsAgreeWithReference(t *testing.T) {
	defer func(h bool) { rules.RandomHeaderMatches = h }(rules.RandomHeaderMatches)
	rules.RandomHeaderMatches = false
	r := rand.New(rand.NewPCG(15, 21))
	names := []string{"lo", "eth0", "eth1", "veth0"}
	sets, refused, probed, emptied := 0, 0, 0, 0
	for set := 0; set < 300; set++ {
		rs := rules.RandomRuleSet(r, 1+r.IntN(30))
		rules.RandomChains(r, rs)
		rules.RandomStateOnChains(r, rs, 50)
		if set%2 == 0 {
			rules.RandomLimits(r, rs, 15)
			rules.RandomRecent(r, rs, 10)
		}
		tb, _, err := Compile(Input{RuleSet: rs, IDs: ids(len(rs.Rules)), Ifaces: testIfaces})
		if err != nil {
			refused++ // a bound (notes, probes, guards) or a negation without a form: refused whole
			continue
		}
		sets++
		if tb.HasProbes() {
			probed++
		}
		ref, twin := &State{Now: 1e12}, &State{Now: 1e12}
		for k := 0; k < 300; k++ {
			p := randomRefPacket(r, rs, names)
			want := DecideAt(rs, p, ref)
			got, counts := twinDecide(rs, tb, twin, &p)
			wantCounts := slices.Clone(want.Counts)
			slices.Sort(wantCounts)
			slices.Sort(counts)
			if got != want.Rule || !slices.Equal(counts, wantCounts) || !maps.Equal(ref.Tat, twin.Tat) || len(ref.Lists) != len(twin.Lists) {
				t.Fatalf("set %d packet %d: twin decides rule %d counting %v, reference %d counting %v; buckets %v / %v, %d / %d addresses listed\npacket %+v\n%s\n%v",
					set, k, got, counts, want.Rule, wantCounts, twin.Tat, ref.Tat, len(twin.Lists), len(ref.Lists), p, rs, tb.Entries)
			}
		}
		for _, tat := range ref.Tat {
			if tat > ref.Now+uint64(time.Hour) { // a bucket some packets found empty (bursts are at most 3)
				emptied++
			}
		}
	}
	if sets < 150 || probed < 100 || emptied == 0 {
		t.Fatalf("%d rule sets compiled (%d refused), %d with probes, %d buckets emptied: the test checked too little", sets, refused, probed, emptied)
	}
	t.Logf("%d rule sets (%d with probes; %d refused), %d buckets emptied", sets, probed, refused, emptied)
}

// TestProbeBounds: more rules with -m limit or -m recent that decide
// nothing on the way of one built-in chain's packets than the data plane
// keeps results for (MaxProbes) is refused at the rule past the bound,
// naming the chain; so is such a rule in a chain OUTPUT reaches (tc egress
// settles none). At the bound, the set loads.
func TestProbeBounds(t *testing.T) {
	rulesOf := func(n int, chain string) string {
		var b strings.Builder
		b.WriteString("-N c\n")
		fmt.Fprintf(&b, "-A %s -j c\n", chain)
		for i := range n {
			fmt.Fprintf(&b, "-A c -p udp --dport %d -m limit --limit 1/hour -j RETURN\n", 1000+i)
		}
		b.WriteString("-A c -j DROP\n")
		return b.String()
	}
	for _, tc := range []struct {
		src, err string
	}{
		{rulesOf(MaxProbes, "INPUT"), ""},
		{rulesOf(MaxProbes+1, "INPUT"), fmt.Sprintf("t.rules:%d:1: chain c (INPUT -> c): more than %d rules with -m limit or -m recent that decide nothing", MaxProbes+3, MaxProbes)},
		{rulesOf(1, "OUTPUT"), "t.rules:3:1: -m limit on a rule that decides nothing itself (-j RETURN) cannot be used in a chain OUTPUT reaches (OUTPUT -> c)"},
		{"-A INPUT -p tcp -m recent --set\n-A OUTPUT -p tcp -m limit -j RETURN\n", "t.rules:2:1: -m limit on a rule that decides nothing itself (-j RETURN) cannot be used in a chain OUTPUT reaches (OUTPUT)"},
	} {
		_, _, _, err := compileText(t, tc.src)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%v\n%s", err, tc.src)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("error %v, want %q\n%s", err, tc.err, tc.src)
		}
	}
}

// TestHashLimitTreeAgreesWithReference: the same with -m hashlimit rules
// (and a few -m recent rules beside), the buckets modelled with the clock
// standing, the same buckets left. A --hashlimit-above rule that took its
// token must let the packet on; one settled out of order, or decided in
// the walk, shows.
func TestHashLimitTreeAgreesWithReference(t *testing.T) {
	matched := stateTreeAgrees(t, rand.New(rand.NewPCG(15, 5)), 200, func(r *rand.Rand, rs *rules.RuleSet) {
		rules.RandomHashLimit(r, rs, 20)
		rules.RandomRecent(r, rs, 5)
	})
	if matched == 0 {
		t.Fatal("no -m hashlimit rule matched: the test checked too little")
	}
}

// TestHashLimitChainsAgree: the same with user chains (rules.RandomChains:
// jumps, gotos, RETURNs), -m hashlimit rules in them flattened into the
// chains that reach them (hardened-host.v4's SSH_IN). Sets whose
// -m hashlimit rules a chain OUTPUT reaches holds are refused.
func TestHashLimitChainsAgree(t *testing.T) {
	matched := stateTreeAgrees(t, rand.New(rand.NewPCG(15, 6)), 150, func(r *rand.Rand, rs *rules.RuleSet) {
		rules.RandomChains(r, rs)
		rules.RandomHashLimit(r, rs, 20)
	})
	if matched == 0 {
		t.Fatal("no -m hashlimit rule matched: the test checked too little")
	}
}

// stateTreeAgrees runs 300 random rule sets that knob gives state rules
// (-m recent, -m hashlimit) and 300 packets each through the tree walk
// (ClassifyWith, settling the state entries it met in index order, as
// fw_state_settle, with a State of its own; a bucket or a list by the
// entry's EntryHashLimit flag) and the reference (DecideAt,
// rule by rule), and requires the same decisions and as many list
// addresses and buckets on both sides, and at least minSets sets that
// compile. It returns how many -m hashlimit settlings matched.
func stateTreeAgrees(t *testing.T, r *rand.Rand, minSets int, knob func(*rand.Rand, *rules.RuleSet)) (matched int) {
	t.Helper()
	names := []string{"lo", "eth0", "eth1", "veth0"}
	settled, sets, stateLogs := 0, 0, 0
	for set := 0; set < 300; set++ {
		rs := rules.RandomRuleSet(r, 1+r.IntN(30))
		knob(r, rs)
		tb, _, err := Compile(Input{RuleSet: rs, IDs: ids(len(rs.Rules)), Ifaces: testIfaces})
		if err != nil {
			continue // more state rules than one packet may meet: refused
		}
		sets++
		ref, twin := &State{Now: 1e12}, &State{Now: 1e12}
		byID := map[uint32]int{}
		for i := range rs.Rules {
			byID[uint32(FirstRuleID+i)] = i
		}
		for k := 0; k < 300; k++ {
			p := randomRefPacket(r, rs, names)
			want := DecideAt(rs, p, ref)
			c := tb.ClassifyWith(&p, testDev(&p), &Stateful{Recent: func(entry int) bool {
				settled++
				m := &rs.Rules[byID[tb.Entries[entry].RuleID]].Match
				// which state, by the entry's flags as fw_state_settle
				// reads them (FW_EF_HASHLIMIT): no map lookup to find out
				hash := tb.Entries[entry].Flags()&(EntryState|EntryHashLimit) == EntryState|EntryHashLimit
				if hash != (m.HashLimit != nil) {
					t.Fatalf("set %d: entry %d of rule id %d (%s): flags %#x, -m hashlimit %v",
						set, entry, tb.Entries[entry].RuleID, tb.Entries[entry], tb.Entries[entry].Flags(), m.HashLimit != nil)
				}
				if !hash {
					return twin.recent(m.Recent, &p)
				}
				ok := twin.hashlimit(m.HashLimit, &p)
				if ok {
					matched++
				}
				return ok
			}})
			gotID, wantID := decidedIDs(tb, c, want, &p)
			if gotID != wantID || len(ref.Lists) != len(twin.Lists) || len(ref.Buckets) != len(twin.Buckets) {
				t.Fatalf("set %d packet %d: tree says id %d (%d addresses, %d buckets), reference id %d (%d, %d)\npacket %+v\n%s",
					set, k, gotID, len(twin.Lists), len(twin.Buckets), wantID, len(ref.Lists), len(ref.Buckets), p, rs)
			}
			// LOG rules with -m recent or -m hashlimit log when their test
			// matches, in rule order, as the reference's
			var wantLogs []uint32
			for _, i := range want.Logs {
				wantLogs = append(wantLogs, uint32(FirstRuleID+i))
				if m := &rs.Rules[i].Match; m.Recent != nil || m.HashLimit != nil {
					stateLogs++
				}
			}
			if !slices.Equal(c.Logs, wantLogs) {
				t.Fatalf("set %d packet %d: tree logs rule ids %v, reference %v\npacket %+v\n%s", set, k, c.Logs, wantLogs, p, rs)
			}
		}
	}
	if sets < minSets || settled == 0 {
		t.Fatalf("%d rule sets compiled, %d state entries settled: the test checked too little", sets, settled)
	}
	if stateLogs == 0 {
		t.Fatal("no LOG rule with -m recent or -m hashlimit logged: the test checked nothing of them")
	}
	t.Logf("%d rule sets, %d state entries settled, %d hashlimit matches, %d logs of LOG rules with a state match", sets, settled, matched, stateLogs)
	return matched
}

// TestConnLimitTreeAgreesWithReference: random rule sets with -m
// connlimit (rules.RandomConnLimit, -m hashlimit and -m recent beside),
// packets of a few clients and servers so that keys repeat: the tree walk
// settling its notes (a count by the entry's EntryConnLimit flag) and the
// reference decide alike and keep the same counts; the connections the
// decisions accept are tracked on both sides alike (a first packet
// accepted creates its connection), a few reset, and the reference's
// "cannot count" (a key's ConnLimitSlots taken: dropped) is the twin's.
func TestConnLimitTreeAgreesWithReference(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 7))
	names := []string{"lo", "eth0", "eth1", "veth0"}
	sets, settled, matched, full := 0, 0, 0, 0
	for set := 0; set < 300; set++ {
		rs := rules.RandomRuleSet(r, 1+r.IntN(30))
		rules.RandomConnLimit(r, rs, 25)
		rules.RandomHashLimit(r, rs, 5)
		tb, _, err := Compile(Input{RuleSet: rs, IDs: ids(len(rs.Rules)), Ifaces: testIfaces})
		if err != nil {
			continue
		}
		sets++
		ref, twin := &State{Now: 1e12, Conns: &Conntrack{}}, &State{Now: 1e12, Conns: &Conntrack{}}
		byID := map[uint32]int{}
		for i := range rs.Rules {
			byID[uint32(FirstRuleID+i)] = i
		}
		hosts := []netip.Addr{netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("10.1.0.2"), netip.MustParseAddr("10.1.7.3"),
			netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")}
		for k := 0; k < 300; k++ {
			p := randomRefPacket(r, rs, names)
			if p.Src.Is4() {
				p.Src, p.Dst = hosts[r.IntN(3)], hosts[r.IntN(3)]
			} else {
				p.Src, p.Dst = hosts[3+r.IntN(2)], hosts[3+r.IntN(2)]
			}
			p.SPort = uint16(1000 + r.IntN(8))
			id := ConnOf(&p)
			if closed, ok := ref.Conns.Tracked[id]; ok && !closed && p.CTState == CTNew && r.IntN(2) == 0 {
				p.CTState = CTEstablished // a later packet of a tracked connection
			}
			if rawNotrack(rs, &p) { // as the classifier sees it (the count's callback reads p)
				p.CTState = CTUntracked
			}
			want := DecideAt(rs, p, ref)
			twinFull := false
			c := tb.ClassifyWith(&p, testDev(&p), &Stateful{Recent: func(entry int) bool {
				settled++
				e := &tb.Entries[entry]
				i := byID[e.RuleID]
				m := &rs.Rules[i].Match
				conn := e.Flags()&(EntryState|EntryConnLimit) == EntryState|EntryConnLimit
				if conn != (m.ConnLimit != nil) {
					t.Fatalf("set %d: entry %d (%s): flags %#x, -m connlimit %v", set, entry, e, e.Flags(), m.ConnLimit != nil)
				}
				switch {
				case twinFull:
					return false // dropped already: nothing after it runs
				case m.HashLimit != nil:
					return twin.hashlimit(m.HashLimit, &p)
				case !conn:
					return twin.recent(m.Recent, &p)
				}
				ok, f := twin.connlimit(i, m.ConnLimit, &p)
				twinFull = twinFull || f
				if ok {
					matched++
				}
				return ok && !f
			}})
			gotID, wantID := decidedIDs(tb, c, want, &p)
			refFull := want.Reason == ReasonCTFull
			if refFull {
				full++
			}
			if twinFull != refFull || (!refFull && gotID != wantID) || fmt.Sprint(ref.Conns.Counted) != fmt.Sprint(twin.Conns.Counted) {
				t.Fatalf("set %d packet %d: tree says id %d (full %v, counts %v), reference id %d (full %v, counts %v)\npacket %+v\n%s",
					set, k, gotID, twinFull, twin.Conns.Counted, wantID, refFull, ref.Conns.Counted, p, rs)
			}
			// conntrack: an accepted first packet creates its connection
			// (on both sides alike); now and then one is reset
			if !refFull && want.Verdict == rules.VerdictAccept && p.CTState == CTNew {
				ref.Conns.Tracked = setTracked(ref.Conns.Tracked, id, false)
				twin.Conns.Tracked = setTracked(twin.Conns.Tracked, id, false)
			}
			if r.IntN(10) == 0 {
				for id := range ref.Conns.Tracked {
					ref.Conns.Tracked[id], twin.Conns.Tracked[id] = true, true
					break
				}
			}
		}
	}
	if sets < 200 || matched == 0 {
		t.Fatalf("%d rule sets compiled, %d state entries settled, %d connlimit matches: the test checked too little", sets, settled, matched)
	}
	t.Logf("%d rule sets, %d state entries settled, %d connlimit matches, %d dropped uncounted", sets, settled, matched, full)
}

// decidedIDs are the rule ids (a policy's for none) the tree walk (c)
// and the reference (want) decided p by, rules having ids FirstRuleID+i.
func decidedIDs(tb *Tables, c Classified, want Decision, p *RefPacket) (got, wantID uint32) {
	got = c.Root.RuleID
	if c.Entry >= 0 {
		got = tb.Entries[c.Entry].RuleID
	}
	wantID = PolicyID(uint8(p.Chain), p.Src.Is6())
	if want.Rule >= 0 {
		wantID = uint32(FirstRuleID + want.Rule)
	}
	return got, wantID
}

func setTracked(m map[ConnID]bool, id ConnID, closed bool) map[ConnID]bool {
	if m == nil {
		m = map[ConnID]bool{}
	}
	m[id] = closed
	return m
}

// TestHashLimitTableSettings: rules that name one table share its
// buckets and must agree on its settings (iptables would key and fill
// them by one rule's); --hashlimit-upto and --hashlimit-above may differ,
// and so may rules of the two families.
func TestHashLimitTableSettings(t *testing.T) {
	for _, tc := range []struct {
		src, err string
	}{
		{"-A INPUT -p tcp -m hashlimit --hashlimit-upto 3/min --hashlimit-name a -j ACCEPT\n" +
			"-A INPUT -p udp -m hashlimit --hashlimit-above 3/min --hashlimit-name a -j DROP\n", ""},
		{"-A INPUT -s 10.0.0.0/8 -m hashlimit --hashlimit-upto 3/min --hashlimit-name a -j ACCEPT\n" +
			"-A INPUT -s fd00::/8 -m hashlimit --hashlimit-upto 5/min --hashlimit-name a -j ACCEPT\n", ""},
		{"-A INPUT -p tcp -m hashlimit --hashlimit-upto 3/min --hashlimit-name a -j ACCEPT\n" +
			"-A INPUT -p udp -m hashlimit --hashlimit-upto 3/min --hashlimit-mode srcip --hashlimit-name a -j ACCEPT\n",
			`t:2:1: -m hashlimit table "a" is named with other settings by the rule at t:1:1`},
		{"-A OUTPUT -m hashlimit --hashlimit-upto 3/min --hashlimit-name a -j ACCEPT\n", "-m hashlimit is not supported in OUTPUT"},
		{"-N c\n-A c -m hashlimit --hashlimit-upto 3/min --hashlimit-name a -j ACCEPT\n-A OUTPUT -p tcp -j c\n",
			"-m hashlimit is not supported in a chain OUTPUT reaches (OUTPUT -> c)"},
		{"-N c\n-A c -m recent --rcheck --name a -j DROP\n-A OUTPUT -p tcp -j c\n",
			"-m recent is not supported in a chain OUTPUT reaches"},
		// -m connlimit: a limit it can count to, not in OUTPUT, not on a rule that logs
		{"-A INPUT -p tcp --syn -m connlimit --connlimit-above 15 -j DROP\n-A FORWARD -m connlimit --connlimit-upto 0 --connlimit-daddr -j ACCEPT\n", ""},
		{"-A INPUT -p tcp --syn -m connlimit --connlimit-above 16 -j DROP\n",
			"t:1:1: -m connlimit with a limit of 16: xdpfw counts at most 16 connections per address and rule, so the limit is at most 15"},
		{"-A OUTPUT -m connlimit --connlimit-above 3 -j DROP\n", "-m connlimit is not supported in OUTPUT"},
		{"-N c\n-A c -m connlimit --connlimit-above 3 -j DROP\n-A OUTPUT -p tcp -j c\n",
			"-m connlimit is not supported in a chain OUTPUT reaches (OUTPUT -> c)"},
		{"-A INPUT -m connlimit --connlimit-above 3 -j LOG\n", "-m connlimit on a rule that logs is not supported"},
	} {
		rs, err := rules.Parse("t", []byte(tc.src), rules.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = Compile(Input{RuleSet: rs, IDs: ids(len(rs.Rules)), Ifaces: testIfaces})
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.src, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.src, err, tc.err)
		}
	}
}
