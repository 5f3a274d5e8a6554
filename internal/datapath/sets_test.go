package datapath_test

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sort"
	"testing"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
	"github.com/xdpfw/xdpfw/testutil"
)

// installWithSets compiles rs against named sets (ids 1..) holding the given
// prefixes, writes the sets, and installs the tables.
func (f *fixture) installWithSets(rs *rules.RuleSet, sets map[string][]netip.Prefix) map[string]compile.SetInfo {
	f.t.Helper()
	info := map[string]compile.SetInfo{}
	names := make([]string, 0, len(sets))
	for name := range sets {
		names = append(names, name)
	}
	sort.Strings(names) // ids in a fixed order
	id := uint32(1)
	for _, name := range names {
		ps := sets[name]
		fam := rules.FamilyIPv4
		if len(ps) > 0 && ps[0].Addr().Is6() {
			fam = rules.FamilyIPv6
		}
		info[name] = compile.SetInfo{ID: id, Family: fam}
		if _, err := f.dp.Sets().Flush(id); err != nil {
			f.t.Fatal(err)
		}
		if err := f.dp.Sets().Insert(datapath.NewElems(id, ps)); err != nil {
			f.t.Fatal(err)
		}
		id++
	}
	ids := make([]uint32, len(rs.Rules))
	for i := range ids {
		ids[i] = uint32(compile.FirstRuleID + i)
	}
	lim := f.dp.Limits()
	tables, _, err := compile.Compile(compile.Input{RuleSet: rs, IDs: ids, Ifaces: f.ifaces, Sets: info,
		MaxEntries: lim.Entries, MaxNodes: lim.Nodes, MaxLeafSlots: lim.LeafSlots})
	if err != nil {
		f.t.Fatalf("compile: %v", err)
	}
	if err := f.dp.Install(tables); err != nil {
		f.t.Fatal(err)
	}
	f.rs, f.ids, f.tables = rs, ids, tables
	return info
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func TestSets(t *testing.T) {
	f := newFixture(t)
	rs, err := rules.Parse("sets", []byte(`-P INPUT ACCEPT
-A INPUT -m set --match-set block4 src -j DROP
-A INPUT -m set --match-set block6 src -j DROP
-A INPUT -p tcp -m set ! --match-set servers dst --dport 22 -j DROP
`), rules.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	info := f.installWithSets(rs, map[string][]netip.Prefix{
		"block4":  prefixes("203.0.113.0/24", "198.51.100.7/32", "10.0.0.0/8"),
		"block6":  prefixes("2001:db8:bad::/48"),
		"servers": prefixes("192.0.2.10/32", "192.0.2.11/32"),
	})
	cases := []struct {
		src, dst string
		dport    uint16
		rule     int // 1-based, 0 policy
	}{
		{"203.0.113.9", "192.0.2.10", 80, 1},
		{"198.51.100.7", "192.0.2.10", 80, 1},
		{"198.51.100.8", "192.0.2.10", 80, 0},
		{"10.255.1.1", "192.0.2.10", 80, 1},
		{"2001:db8:bad:1::1", "2001:db8::1", 80, 2},
		{"2001:db8:bae::1", "2001:db8::1", 80, 0},
		{"192.0.2.99", "192.0.2.10", 22, 0},   // ssh to a server: allowed
		{"192.0.2.99", "192.0.2.12", 22, 3},   // ssh elsewhere: dropped
		{"2001:db8::5", "2001:db8::1", 22, 0}, // servers is IPv4: the rule never matches IPv6
	}
	for _, c := range cases {
		p := v4pkt(6, "0.0.0.0", "0.0.0.0", 1, c.dport)
		p.Src, p.Dst = netip.MustParseAddr(c.src), netip.MustParseAddr(c.dst)
		r := f.mustRun(p.Bytes(), "")
		want := compile.PolicyID(0, p.Src.Is6())
		if c.rule > 0 {
			want = f.ids[c.rule-1]
		}
		if r.RuleID != want {
			t.Errorf("%s: rule id %d, want %d", p, r.RuleID, want)
		}
	}
	// Elements change without touching the rules.
	block4 := info["block4"].ID
	if err := f.dp.Sets().Remove(datapath.NewElems(block4, prefixes("10.0.0.0/8"))); err != nil {
		t.Fatal(err)
	}
	p := v4pkt(6, "10.255.1.1", "192.0.2.10", 1, 80)
	if r := f.mustRun(p.Bytes(), ""); r.RuleID != compile.PolicyID(0, false) {
		t.Errorf("after del: rule id %d", r.RuleID)
	}
	got, err := f.dp.Sets().List(block4, false)
	if err != nil || !slices.Equal(got, prefixes("198.51.100.7/32", "203.0.113.0/24")) {
		t.Errorf("list: %v %v", got, err)
	}
}

// TestSetsDifferential: random sets and random rules using them, through
// the data plane and the reference matcher.
func TestSetsDifferential(t *testing.T) {
	f := newFixture(t)
	f.unlimitedRejects()
	r := rand.New(rand.NewPCG(*diffSeed, 5))
	names := []string{"a4", "b4", "a6", "b6"}
	total := 0
	for round := 0; round < 40; round++ {
		sets := map[string][]netip.Prefix{}
		for _, n := range names {
			v6 := n[1] == '6'
			for k := r.IntN(40); k >= 0; k-- {
				var b []byte
				if v6 {
					b = []byte{0x20, 0x01, 0x0d, 0xb8, byte(r.IntN(4)), 15: 0}
					b = b[:16]
				} else {
					b = []byte{10, byte(r.IntN(4)), byte(r.IntN(256)), byte(r.IntN(256))}
				}
				a, _ := netip.AddrFromSlice(b)
				bits := 8 + r.IntN(len(b)*8-7)
				sets[n] = append(sets[n], netip.PrefixFrom(a, bits).Masked())
			}
		}
		rs := rules.RandomRuleSet(r, 1+r.IntN(30))
		// Give some rules a set match of their family.
		for i := range rs.Rules {
			m := &rs.Rules[i].Match
			if r.IntN(3) > 0 || m.Family == rules.FamilyAny {
				continue
			}
			n := names[r.IntN(2)]
			if m.Family == rules.FamilyIPv6 {
				n = names[2+r.IntN(2)]
			}
			sm := &rules.SetMatch{Name: n, Invert: r.IntN(4) == 0}
			if r.IntN(2) == 0 {
				m.SrcSet = sm
			} else {
				m.DstSet = sm
			}
		}
		f.installWithSets(rs, sets)
		refSets := map[string]compile.RefSet{}
		for n, ps := range sets {
			fam := rules.FamilyIPv4
			if n[1] == '6' {
				fam = rules.FamilyIPv6
			}
			refSets[n] = compile.RefSet{Family: fam, Contains: func(a netip.Addr) bool {
				for _, p := range ps {
					if p.Contains(a) {
						return true
					}
				}
				return false
			}}
		}
		// Fragments: each datagram its own identification; a later
		// fragment comes after its first or alone (as in TestDifferential).
		if err := f.dp.FlushFrags(); err != nil {
			t.Fatal(err)
		}
		frags := compile.Fragments{}
		var pending *packet.Packet // a later fragment, after its first fragment
		var pendingIface string
		for k := 0; k < 2000; k++ {
			p, iface := genPacket(r, rs, []string{"lo", "eth0", "eth1", "veth0"})
			if r.IntN(2) == 0 { // aim at the sets
				for _, ps := range sets {
					if pr := ps[r.IntN(len(ps))]; pr.Addr().Is4() == p.Src.Is4() {
						if r.IntN(2) == 0 {
							p.Src = rules.RandomAddrIn(r, pr)
						} else {
							p.Dst = rules.RandomAddrIn(r, pr)
						}
					}
				}
			}
			if pending != nil {
				p, iface, pending = pending, pendingIface, nil
			} else if p.IsFragment() {
				p.FragID = uint32(k + 1)
				if p.FragOffset != 0 && r.IntN(2) == 0 {
					later := *p
					pending, pendingIface = &later, iface
					p.FragOffset, p.MoreFragments = 0, true
				}
			}
			ref := compile.RefPacketOf(p, iface)
			ref.Sets = refSets
			ref.CTState = uint8(r.IntN(int(compile.NumCTStates)))
			d := refDecide(rs, ref, p, frags, nil)
			want := refRuleID(d, ref, f.ids)
			got, err := f.runAssuming(p.Bytes(), iface, int(ref.CTState))
			if err != nil {
				t.Fatal(err)
			}
			if wantAct := wantXDP(d); got.RuleID != want || got.XDPAction != wantAct {
				t.Fatalf("round %d: %s in %s: data plane rule id %d action %d, reference %d %s (action %d)\nsets %v\n%s",
					round, p, iface, got.RuleID, got.XDPAction, want, d.Verdict, wantAct, sets, head(rs.String(), 40))
			}
			total++
		}
	}
	t.Logf("%d packets with named sets agree", total)
}

// TestSetOps: membership is exact (an element, not a prefix covering it),
// by lookups and by reading the trie alike; Insert, Remove, List and Flush
// touch one set only; elements are sorted and deduplicated.
func TestSetOps(t *testing.T) {
	testutil.RequireRoot(t)
	dir := testutil.BPFFS(t) + "/xdpfw"
	if _, err := datapath.OpenSets(dir, false); !errors.Is(err, datapath.ErrNoSets) {
		t.Fatalf("open without create: %v", err)
	}
	s, err := datapath.OpenSets(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Capacity() != datapath.MaxSetElems {
		t.Errorf("capacity %d", s.Capacity())
	}
	const a, b, six = 1, 2, 3
	mustInsert := func(id uint32, ps ...string) {
		t.Helper()
		if err := s.Insert(datapath.NewElems(id, prefixes(ps...))); err != nil {
			t.Fatal(err)
		}
	}
	mustInsert(a, "10.0.0.0/8", "192.0.2.1/32", "10.0.0.0/8")
	mustInsert(b, "10.1.0.0/16", "192.0.2.1/32")
	mustInsert(six, "2001:db8::/32", "2001:db8::1/128")

	e := datapath.NewElems(a, prefixes("10.1.0.0/16", "10.0.0.0/8", "192.0.2.1/32", "192.0.2.2/32", "10.0.0.0/8", "11.0.0.0/8"))
	if e.Len() != 5 {
		t.Errorf("%d distinct elements, want 5", e.Len())
	}
	for _, trieLen := range []int{0, 1000} { // read the trie; look each up
		in, out, err := s.Split(e, trieLen)
		if err != nil {
			t.Fatal(err)
		}
		// 10.1.0.0/16 is covered by 10.0.0.0/8 (and in set b), but not an element of a
		if got, want := in.Prefixes(false), prefixes("10.0.0.0/8", "192.0.2.1/32"); !slices.Equal(got, want) {
			t.Errorf("trie %d: in %v, want %v", trieLen, got, want)
		}
		if got, want := out.Prefixes(false), prefixes("10.1.0.0/16", "11.0.0.0/8", "192.0.2.2/32"); !slices.Equal(got, want) {
			t.Errorf("trie %d: out %v, want %v", trieLen, got, want)
		}
	}
	list := func(id uint32, v6 bool, want ...string) {
		t.Helper()
		got, err := s.List(id, v6)
		if err != nil || !slices.Equal(got, prefixes(want...)) {
			t.Errorf("set %d: %v %v, want %v", id, got, err, want)
		}
	}
	list(a, false, "10.0.0.0/8", "192.0.2.1/32")
	list(b, false, "10.1.0.0/16", "192.0.2.1/32")
	list(six, true, "2001:db8::/32", "2001:db8::1/128")

	if err := s.Remove(datapath.NewElems(a, prefixes("192.0.2.1/32"))); err != nil {
		t.Fatal(err)
	}
	list(a, false, "10.0.0.0/8")
	list(b, false, "10.1.0.0/16", "192.0.2.1/32")
	if n, err := s.Flush(b); n != 2 || err != nil {
		t.Errorf("flush: %d %v", n, err)
	}
	list(b, false)
	list(a, false, "10.0.0.0/8")

	// The data plane loaded afterwards uses the pinned map.
	dp, err := datapath.Load(dir, datapath.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	got, err := dp.Sets().List(six, true)
	if err != nil || len(got) != 2 {
		t.Errorf("after load: %v %v", got, err)
	}
	if err := datapath.Unpin(dir); err != nil {
		t.Error(err)
	}
}

// TestSetsFull: an insert the map cannot hold fails with ErrSetsFull and
// leaves the map as it was.
func TestSetsFull(t *testing.T) {
	testutil.RequireRoot(t)
	dir := testutil.BPFFS(t) + "/xdpfw"
	s, err := datapath.OpenSets(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		s.Close()
		if err := datapath.Unpin(dir); err != nil {
			t.Error(err)
		}
	}()
	n := s.Capacity() + 10
	ps := make([]netip.Prefix, n)
	for i := range ps {
		ps[i] = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
	}
	if err := s.Insert(datapath.NewElems(1, ps[:10])); err != nil {
		t.Fatal(err)
	}
	err = s.Insert(datapath.NewElems(2, ps))
	if !errors.Is(err, datapath.ErrSetsFull) {
		t.Fatalf("inserting %d elements: %v", n, err)
	}
	for id, want := range map[uint32]int{1: 10, 2: 0} {
		if got, err := s.List(id, false); len(got) != want || err != nil {
			t.Errorf("set %d: %d elements (%v), want %d", id, len(got), err, want)
		}
	}
}
