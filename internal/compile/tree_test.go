package compile

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
)

var testIfaces = map[string]uint32{"lo": 1, "eth0": 2, "eth1": 3, "veth0": 4}

// testAddrs is a local routing table over the addresses randomRefPacket
// draws (10.0.0.0-3, 2000::0-3): -m addrtype's answers.
var testAddrs = AddrTable{
	{Prefix: netip.MustParsePrefix("10.0.0.0/31"), Type: 9, Ifindex: 3, Dev: "eth1"}, // THROW
	{Prefix: netip.MustParsePrefix("10.0.0.1/32"), Type: 2, Ifindex: 2, Dev: "eth0"}, // LOCAL
	{Prefix: netip.MustParsePrefix("10.0.0.2/32"), Type: 2, Ifindex: 4, Dev: "veth0"},
	{Prefix: netip.MustParsePrefix("10.0.0.3/32"), Type: 3, Ifindex: 2, Dev: "eth0"}, // BROADCAST
	{Prefix: netip.MustParsePrefix("2000::1/128"), Type: 2, Ifindex: 2, Dev: "eth0"},
	{Prefix: netip.MustParsePrefix("2000::2/128"), Type: 4, Ifindex: 3, Dev: "eth1"}, // ANYCAST
	{Prefix: netip.MustParsePrefix("2000::3/128"), Type: 2, Ifindex: 1, Dev: "lo"},
}

// TestTreeAgreesWithReference: for random rule sets and packets, the
// compiled tables walked in Go (tree, leaf, entry checks — what the data
// plane does) decide exactly as the reference matcher. Kernel-free, so a
// builder bug shows here with a Go stack trace.
func TestTreeAgreesWithReference(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 42))
	names := []string{"lo", "eth0", "eth1", "veth0"}
	checked, logged := 0, 0
	for set := 0; set < 300; set++ {
		n := 1 + r.IntN(60)
		if set%60 == 59 {
			n = 2000
		}
		rs := rules.RandomRuleSet(r, n)
		tb := compileTest(t, rs)
		if tb.Stats.MaxDepth >= MaxDepth || tb.Stats.MaxLeaf > MaxLeaf {
			t.Fatalf("set %d: stats %+v beyond the data plane's limits", set, tb.Stats)
		}
		for k := 0; k < 2000; k++ {
			p := randomRefPacket(r, rs, names)
			want := Decide(rs, p)
			c := tb.Classify(&p, testDev(&p))
			var gotID, wantID uint32
			gotAct, gotRej, gotLog := c.Root.Action, Reject(0), false
			if c.Entry >= 0 {
				e := tb.Entries[c.Entry]
				gotID, gotAct, gotRej, gotLog = e.RuleID, e.Action, e.Reject, e.Log
			} else {
				gotID = c.Root.RuleID
			}
			var wantLogs []uint32
			for _, i := range want.Logs {
				wantLogs = append(wantLogs, uint32(FirstRuleID+i))
			}
			if !slices.Equal(c.Logs, wantLogs) || c.LogOverflow != want.LogOverflow || gotLog != want.Log {
				t.Fatalf("set %d packet %d: tree logs %v (overflow %v, deciding rule logs %v), reference %v (%v, %v)\npacket %+v\n%s",
					set, k, c.Logs, c.LogOverflow, gotLog, wantLogs, want.LogOverflow, want.Log, p, rs)
			}
			logged += len(c.Logs)
			if want.Rule >= 0 {
				wantID = uint32(FirstRuleID + want.Rule)
			} else {
				wantID = PolicyID(uint8(p.Chain), p.Src.Is6())
			}
			wantAct := map[rules.Verdict]Action{rules.VerdictAccept: ActAccept, rules.VerdictDrop: ActDrop, rules.VerdictReject: ActReject}[want.Verdict]
			if gotID != wantID || gotAct != wantAct || gotRej != want.Reject {
				t.Fatalf("set %d packet %d: tree says id %d %s (%s), reference id %d %s (%s)\npacket %+v\n%s",
					set, k, gotID, gotAct, gotRej, wantID, want.Verdict, want.Reject, p, rs)
			}
			checked++
		}
	}
	if logged == 0 {
		t.Fatal("no packet was logged by a LOG rule: the test checks nothing of LOG")
	}
	t.Logf("%d packets agree (%d LOG events among them)", checked, logged)
}

// TestRangesAgreeWithMatches: where an entry has key ranges (the form the
// data plane's leaves test), they match exactly the packets of its tree
// (its chain and family) that the full entry test matches.
func TestRangesAgreeWithMatches(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	names := []string{"lo", "eth0", "eth1", "veth0"}
	exact, checked, matched := 0, 0, 0
	for set := 0; set < 200; set++ {
		rs := rules.RandomRuleSet(r, 1+r.IntN(40))
		tb := compileTest(t, rs)
		if len(tb.Ranges) != len(tb.Entries)+len(tb.Prio) { // the priority table's entries follow the rules'
			t.Fatalf("set %d: %d ranges for %d entries", set, len(tb.Ranges), len(tb.Entries)+len(tb.Prio))
		}
		for i := range tb.Entries {
			e, rg := &tb.Entries[i], &tb.Ranges[i]
			if rg.Exact != EntryRanges(e).Exact {
				t.Fatalf("set %d entry %d: built ranges %+v, EntryRanges %+v", set, i, rg, EntryRanges(e))
			}
			if !rg.Exact {
				continue
			}
			exact++
			for k := 0; k < 200; k++ {
				p := randomRefPacket(r, rs, names)
				if p.Chain != e.Chain || (e.Family == rules.FamilyIPv4 && p.Src.Is6()) || (e.Family == rules.FamilyIPv6 && !p.Src.Is6()) {
					continue
				}
				key := KeyOf(&p, testDev(&p))
				want := e.Matches(&p, testDev(&p), tb.SetNames)
				if got := rg.Match(&key); got != want {
					t.Fatalf("set %d entry %d %+v: ranges %+v say %v, the entry test %v\npacket %+v\n%s", set, i, *e, *rg, got, want, p, rs)
				}
				checked++
				if want {
					matched++
				}
			}
		}
	}
	if exact == 0 || matched == 0 {
		t.Fatalf("%d entries with ranges, %d matching packets: the test checks nothing", exact, matched)
	}
	t.Logf("%d entries with ranges, %d packets checked, %d matching", exact, checked, matched)
}

// compileTest compiles rs with the test interfaces, failing t on error.
func compileTest(t *testing.T, rs *rules.RuleSet) *Tables {
	t.Helper()
	tb, _, err := Compile(Input{RuleSet: rs, IDs: ids(len(rs.Rules)), Ifaces: testIfaces})
	if err != nil {
		t.Fatalf("%v\n%s", err, rs)
	}
	return tb
}

// randomRefPacket draws a packet near a random rule of rs.
func randomRefPacket(r *rand.Rand, rs *rules.RuleSet, ifaces []string) RefPacket {
	var m *rules.Match
	if len(rs.Rules) > 0 && r.IntN(4) > 0 {
		m = &rs.Rules[r.IntN(len(rs.Rules))].Match
	} else {
		m = &rules.Match{}
	}
	v6 := r.IntN(2) == 1
	if m.Family != rules.FamilyAny {
		v6 = m.Family == rules.FamilyIPv6
	}
	addr := func(am *rules.AddrMatch) netip.Addr {
		if am != nil && r.IntN(4) > 0 {
			b := am.Prefix.Addr().AsSlice()
			for i := am.Prefix.Bits(); i < len(b)*8; i++ {
				if r.IntN(2) == 0 {
					b[i/8] |= 0x80 >> (i % 8)
				}
			}
			a, _ := netip.AddrFromSlice(b)
			return a
		}
		if v6 {
			var b [16]byte
			b[0], b[15] = 0x20, byte(r.IntN(4))
			return netip.AddrFrom16(b)
		}
		return netip.AddrFrom4([4]byte{10, 0, 0, byte(r.IntN(4))})
	}
	p := RefPacket{Chain: rules.Chain(r.IntN(2)), InIface: ifaces[r.IntN(len(ifaces))], Src: addr(m.Src), Dst: addr(m.Dst)}
	if m.Proto != nil && !m.Proto.Invert {
		p.Proto = m.Proto.Proto
	} else {
		p.Proto = []uint8{6, 17, 1, 58, 47}[r.IntN(5)]
	}
	port := func(pm *rules.PortMatch) uint16 {
		if pm != nil && r.IntN(4) > 0 {
			pr := pm.Ranges[r.IntN(len(pm.Ranges))]
			return []uint16{pr.Lo, pr.Hi, pr.Lo - 1, pr.Hi + 1}[r.IntN(4)]
		}
		return []uint16{0, 22, 53, 80, 443, 65535}[r.IntN(6)]
	}
	p.SPort, p.DPort = port(m.SPort), port(m.DPort)
	if m.Ports != nil && r.IntN(2) == 0 {
		p.DPort = port(m.Ports)
	}
	p.TCPFlags = uint8(r.UintN(256))
	if m.TCPFlags != nil && r.IntN(2) == 0 {
		p.TCPFlags = m.TCPFlags.Comp | p.TCPFlags&^m.TCPFlags.Mask
	}
	p.ICMPType, p.ICMPCode = uint8(r.IntN(140)), uint8(r.IntN(4))
	if m.ICMP != nil && !m.ICMP.Any && r.IntN(2) == 0 {
		p.ICMPType = m.ICMP.Type
		if m.ICMP.Code >= 0 {
			p.ICMPCode = uint8(m.ICMP.Code)
		}
	}
	macs := [][6]byte{{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}, {0, 0x11, 0x22, 0x33, 0x44, 0x55},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, {0x01, 0x00, 0x5e, 0, 0, 1}, {0x33, 0x33, 0, 0, 0, 1}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}}
	p.SrcMAC, p.DstMAC = macs[r.IntN(3)], macs[r.IntN(len(macs))]
	if m.MACSrc != nil && r.IntN(2) == 0 {
		p.SrcMAC = m.MACSrc.Addr
	}
	if m.VLAN != nil && r.IntN(2) == 0 {
		p.Tagged, p.VLAN = true, m.VLAN.ID
	} else if r.IntN(5) == 0 || m.VLANPrio != nil && r.IntN(2) == 0 {
		p.Tagged, p.VLAN = true, uint16(r.IntN(11))
	}
	if p.Tagged {
		p.VLANPrio = uint8(r.IntN(8))
		if m.VLANPrio != nil && r.IntN(2) == 0 {
			p.VLANPrio = m.VLANPrio.Prio
		}
	}
	p.Fragment = r.IntN(10) == 0 || (m.Fragment != nil && r.IntN(2) == 0)
	p.CTState = uint8(r.IntN(int(NumCTStates)))
	p.L4 = !p.Fragment && l4Proto(p.Proto) // as the data plane's parser
	if !p.L4 {
		p.SPort, p.DPort, p.TCPFlags, p.ICMPType, p.ICMPCode = 0, 0, 0, 0, 0
	}
	p.Addrs = testAddrs
	if p.Chain == rules.ChainForward {
		// "" (no device: the FIB named none) a fifth of the time
		if i := r.IntN(len(ifaces) + 1); i < len(ifaces) {
			p.OutIface = ifaces[i]
		}
	}
	refHeader(r, m, &p)
	return p
}

// testDev is p's devices as the data plane knows them (testIfaces).
func testDev(p *RefPacket) Dev {
	return Dev{In: testIfaces[p.InIface], Out: testIfaces[p.OutIface]}
}

// refHeader draws p's header fields (-m iprange, length, ttl, dscp, tos,
// ecn) at or near m's bounds half the time.
func refHeader(r *rand.Rand, m *rules.Match, p *RefPacket) {
	near := func(lo, hi uint32) uint32 {
		return []uint32{lo, hi, lo - 1, hi + 1, lo + uint32(r.IntN(3))}[r.IntN(5)]
	}
	for _, x := range []struct {
		m *rules.IPRangeMatch
		a *netip.Addr
	}{{m.SrcRange, &p.Src}, {m.DstRange, &p.Dst}} {
		if x.m != nil && r.IntN(2) == 0 {
			a := []netip.Addr{x.m.From, x.m.To, x.m.From.Prev(), x.m.To.Next()}[r.IntN(4)]
			if a.IsValid() {
				*x.a = a
			}
		}
	}
	p.Len, p.TTL, p.TOS = uint32(20+r.IntN(100)), uint8(r.UintN(256)), uint8(r.UintN(256))
	p.CTInfo, p.CTProto = uint8(r.UintN(64))|[]uint8{0, CTIReply}[r.IntN(2)], p.Proto
	p.MSS = []uint32{NoMSS, 536, 1460, uint32(r.UintN(65536))}[r.IntN(4)]
	if p.Src.Is6() && r.IntN(3) == 0 {
		p.RT, p.RTType, p.RTSegsLeft, p.RTLen = true, uint8(r.IntN(5)), uint8(r.IntN(4)), uint16(8*(1+r.IntN(3)))
		if rt := m.RT; rt != nil && r.IntN(2) == 0 {
			if rt.Type != nil {
				p.RTType = uint8(rt.Type.V)
			}
			if rt.Segs != nil {
				p.RTSegsLeft = uint8(near(rt.Segs.Lo, rt.Segs.Hi))
			}
			if rt.Len != nil {
				p.RTLen = uint16(rt.Len.V)
			}
		}
	}
	if s := m.MSS; s != nil && r.IntN(2) == 0 {
		p.MSS = near(uint32(s.Min), uint32(s.Max)) & 0xffff
	}
	if m.CTProto != nil && r.IntN(2) == 0 {
		p.CTProto = m.CTProto.Proto
	}
	if l := m.Length; l != nil && r.IntN(2) == 0 {
		p.Len = near(uint32(l.Min), uint32(l.Max)) & 0xffff
	}
	if t := m.TTL; t != nil && r.IntN(2) == 0 {
		p.TTL = uint8(near(uint32(t.Value), uint32(t.Value)))
	}
	switch {
	case m.DSCP != nil && r.IntN(2) == 0:
		p.TOS = m.DSCP.Value<<2 | p.TOS&3
	case m.TOS != nil && r.IntN(2) == 0:
		p.TOS = m.TOS.Value | p.TOS&^m.TOS.Mask
	}
	if e := m.ECN; e != nil && r.IntN(2) == 0 {
		if e.IPECT >= 0 {
			p.TOS = p.TOS&^3 | uint8(e.IPECT)
		}
		if p.L4 {
			p.TCPFlags = p.TCPFlags&^e.TCPMask | e.TCPComp
		}
	}
}

// builtTree is one tree as buildTrees made it: the binary tree and the fat
// tree collapse made of it.
type builtTree struct {
	bin     []binNode
	binRoot uint32
	fatRoot uint32
}

// buildWithBinary compiles rs, then builds its trees again keeping every
// binary tree (a generation built twice is the same: the builder is
// deterministic).
func buildWithBinary(t *testing.T, rs *rules.RuleSet) (*Tables, []builtTree) {
	t.Helper()
	tb := compileTest(t, rs)
	again := &Tables{Entries: tb.Entries, Prio: tb.Prio}
	var trees []builtTree
	st, err := buildTrees(again, rs, treeOpts{maxNodes: DefaultMaxNodes, maxLeafSlots: MaxLeafSlots,
		onTree: func(bin []binNode, binRoot, fatRoot uint32) {
			trees = append(trees, builtTree{slices.Clone(bin), binRoot, fatRoot})
		}})
	if err != nil {
		t.Fatal(err)
	}
	same := st == tb.Stats && slices.Equal(again.Nodes, tb.Nodes) && slices.Equal(again.Leaves, tb.Leaves)
	for i := range tb.Roots {
		same = same && again.Roots[i].Groups == tb.Roots[i].Groups
	}
	if !same {
		t.Fatalf("building twice differs: %+v, then %+v", tb.Stats, st)
	}
	return tb, trees
}

// walkBinary is the binary tree's walk: key[dim] <= thresh goes left.
func walkBinary(bin []binNode, i uint32, k *Key) uint32 {
	for !bin[i].leaf {
		if k[bin[i].dim] <= bin[i].thresh {
			i = bin[i].left
		} else {
			i = bin[i].right
		}
	}
	return bin[i].left
}

// TestCollapseKeepsDecisions: on random rule sets, every key reaches the
// same leaf through the fat tree as through the binary tree it was
// collapsed from. Keys are random packets' keys with some dimensions set
// to a threshold of the tree, or next to one, where a wrong child index or
// an off-by-one would show.
func TestCollapseKeepsDecisions(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	names := []string{"lo", "eth0", "eth1", "veth0"}
	keys, multi, twoDims := 0, 0, 0
	for set := 0; set < 120; set++ {
		n := 1 + r.IntN(80)
		if set%30 == 29 {
			n = 1500
		}
		rs := rules.RandomRuleSet(r, n)
		tb, trees := buildWithBinary(t, rs)
		for _, n := range tb.Nodes {
			if n.N > 1 {
				multi++
			}
			if n.Mask != 0 {
				twoDims++
			}
		}
		for _, tr := range trees {
			var th [NumDims][]uint32
			for _, b := range tr.bin {
				if !b.leaf {
					th[b.dim] = append(th[b.dim], b.thresh)
				}
			}
			for k := 0; k < 400; k++ {
				p := randomRefPacket(r, rs, names)
				key := KeyOf(&p, testDev(&p))
				for d := range key {
					if len(th[d]) > 0 && r.IntN(3) == 0 {
						key[d] = th[d][r.IntN(len(th[d]))] + uint32(r.IntN(3)) - 1
					}
				}
				want := walkBinary(tr.bin, tr.binRoot, &key)
				got, _ := tb.walk(tr.fatRoot, &key)
				if got != want {
					t.Fatalf("set %d: key %v reaches leaf %#x through the fat tree, %#x through the binary tree\n%s",
						set, key, got, want, rs)
				}
				keys++
			}
		}
	}
	if multi == 0 {
		t.Fatal("no fat node absorbed more than one split: the test checks no collapse")
	}
	if twoDims == 0 {
		t.Fatal("no fat node tests two dimensions: the test checks no such node")
	}
	t.Logf("%d keys agree; %d fat nodes with more than one threshold, %d of two dimensions", keys, multi, twoDims)
}

// reachable tells whether a key can reach child c of n: its path down
// the node's tree steps right at no unused threshold.
func reachable(n *Node, c int) bool {
	p, s := 3, 4 // threshold p, over children p-s+1 .. p+s
	for s > 0 {
		if c > p {
			if n.Thresh[p] == NoThresh {
				return false
			}
			p += s / 2
		} else {
			p -= s / 2
		}
		s /= 2
	}
	return true
}

// TestFatNodeShape checks every node the builder makes: thresholds
// strictly ascending (which the walk's binary search needs) and below
// NoThresh, N+1 children that are leaves in bounds or later nodes (so no
// walk loops), the unused slots filled as the data plane expects; and
// that the stats' depth is the deepest walk.
func TestFatNodeShape(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	check := func(name string, tb *Tables) {
		t.Helper()
		for i, n := range tb.Nodes {
			if n.N < 1 || n.N > NodeThresh || n.Dim >= NumDims || n.Dim2 >= NumDims || (n.Mask == 0 && n.Dim2 != n.Dim) ||
				n.Mask >= 1<<NodeThresh || (n.Mask != 0 && n.Dim2 == n.Dim) {
				t.Fatalf("%s: node %d: %d thresholds, dimensions %d, %d, mask %#x", name, i, n.N, n.Dim, n.Dim2, n.Mask)
			}
			if n.Mask == 0 { // one dimension: ascending, the unused ones last
				for k := 0; k < NodeThresh; k++ {
					switch {
					case k >= int(n.N) && n.Thresh[k] != NoThresh:
						t.Fatalf("%s: node %d: unused threshold %d is %#x", name, i, k, n.Thresh[k])
					case k < int(n.N) && n.Thresh[k] == NoThresh:
						t.Fatalf("%s: node %d: threshold %d is NoThresh", name, i, k)
					case k > 0 && k < int(n.N) && n.Thresh[k] <= n.Thresh[k-1]:
						t.Fatalf("%s: node %d: thresholds %v not strictly ascending", name, i, n.Thresh[:n.N])
					}
				}
			}
			// The thresholds in use are N, and in a node of two dimensions
			// none is in use below an unused one (which no key passes to
			// the right: a node of one keeps them first); the children a
			// walk can reach (no step right at an unused threshold) are
			// leaves in bounds or later nodes (so no walk loops), the
			// others the empty leaf.
			used := 0
			for k := 0; k < NodeThresh; k++ {
				if n.Thresh[k] != NoThresh {
					used++
				}
			}
			if used != int(n.N) {
				t.Fatalf("%s: node %d: N %d, %d thresholds in use: %#x", name, i, n.N, used, n.Thresh)
			}
			for _, p := range [][3]int{{3, 1, 0}, {3, 1, 2}, {3, 5, 4}, {3, 5, 6}} { // parent, child pairs of the node's tree
				for j := 1; j < 3; j++ {
					if n.Mask != 0 && n.Thresh[p[j-1]] == NoThresh && n.Thresh[p[j]] != NoThresh {
						t.Fatalf("%s: node %d: threshold %d in use below unused %d: %#x", name, i, p[j], p[j-1], n.Thresh)
					}
				}
			}
			for k, c := range n.Child {
				if !reachable(&n, k) {
					if c != LeafRef(0, 0) {
						t.Fatalf("%s: node %d: unreachable child %d is %#x", name, i, k, c)
					}
					continue
				}
				if IsLeafRef(c) {
					first, count := LeafOf(c)
					if count == 1 && int(first) >= len(tb.Entries)+len(tb.Prio) {
						t.Fatalf("%s: node %d: child %d is the leaf of entry %d of %d", name, i, k, first, len(tb.Entries)+len(tb.Prio))
					}
					if count > MaxLeaf || (count > 1 && int(first+count) > len(tb.Leaves)) || c == NoTree {
						t.Fatalf("%s: node %d: child %d is leaf (%d, %d) of %d slots", name, i, k, first, count, len(tb.Leaves))
					}
				} else if c <= uint32(i) || int(c) >= len(tb.Nodes) {
					t.Fatalf("%s: node %d: child %d is node %d of %d", name, i, k, c, len(tb.Nodes))
				}
			}
			// The search agrees with counting the thresholds below v
			// (one dimension), and with the node's tree, step by step.
			for k := 0; k < 50; k++ {
				var key Key
				for d := range key {
					key[d] = r.Uint32()
				}
				p := r.IntN(NodeThresh)
				if n.Thresh[p] != NoThresh && k%5 != 0 {
					key[n.DimAt(p)] = n.Thresh[p] + uint32(r.IntN(3)) - 1
				}
				if n.Mask == 0 {
					below := 0
					for _, th := range n.Thresh[:n.N] {
						if key[n.Dim] > th {
							below++
						}
					}
					if c := n.ChildOf(&key); c != below {
						t.Fatalf("%s: node %d %v: ChildOf(%#x) = %d, %d thresholds below", name, i, n.Thresh, key[n.Dim], c, below)
					}
				}
				p, s := 3, 2 // the node's tree: threshold p, its children p-s and p+s
				for range 2 {
					if key[n.DimAt(p)] > n.Thresh[p] {
						p += s
					} else {
						p -= s
					}
					s /= 2
				}
				want := p // at the bottom: children p and p+1
				if key[n.DimAt(p)] > n.Thresh[p] {
					want++
				}
				if c := n.ChildOf(&key); c != want {
					t.Fatalf("%s: node %d %+v: key %v goes to child %d, the node's tree says %d", name, i, n, key, c, want)
				}
			}
		}
		// The deepest walk, from the roots.
		deepest := 0
		var depth func(ref uint32, d int)
		depth = func(ref uint32, d int) {
			if IsLeafRef(ref) {
				deepest = max(deepest, d)
				return
			}
			for k, c := range tb.Nodes[ref].Child {
				if reachable(&tb.Nodes[ref], k) {
					depth(c, d+1)
				}
			}
		}
		for _, root := range append(tb.Roots[:len(tb.Roots):len(tb.Roots)], tb.PrioRoots[:]...) { // the priority table's trees too
			if root.Flags&RootPrio == 0 && root.RuleID == 0 { // no priority table: a zero root, never walked
				continue
			}
			for _, g := range root.Groups {
				if g != NoTree {
					depth(g, 0)
				}
			}
		}
		if deepest != tb.Stats.MaxDepth || tb.Stats.Nodes != len(tb.Nodes) {
			t.Fatalf("%s: stats %+v; deepest walk %d, %d nodes", name, tb.Stats, deepest, len(tb.Nodes))
		}
	}
	for set := 0; set < 60; set++ {
		n := 1 + r.IntN(100)
		if set%20 == 19 {
			n = 2000
		}
		rs := rules.RandomRuleSet(r, n)
		tb := compileTest(t, rs)
		check(fmt.Sprintf("set %d", set), tb)
	}
	// 8 rules apart in one field: 7 splits of one dimension, one node (per
	// family).
	var b strings.Builder
	for i := 0; i < 8; i++ {
		fmt.Fprintf(&b, "-A INPUT -p udp --dport %d -j ACCEPT\n", 1000+10*i)
	}
	tb, _, err := Compile(Input{RuleSet: parse(t, b.String()), IDs: ids(8)})
	if err != nil {
		t.Fatal(err)
	}
	check("8 ports", tb)
	if tb.Stats.Nodes != 2 || tb.Stats.MaxDepth != 1 {
		t.Fatalf("8 ports: %+v, nodes %+v", tb.Stats, tb.Nodes)
	}
	for _, n := range tb.Nodes {
		if n.N != NodeThresh || n.Dim != DimDPort {
			t.Fatalf("8 ports: node %+v", n)
		}
	}
	// Every port goes to its own rule's leaf, in one step.
	for v6 := 0; v6 < 2; v6++ {
		var trees []uint32
		for _, g := range tb.Roots[int(rules.ChainInput)*2+v6].Groups {
			if g != NoTree {
				trees = append(trees, g)
			}
		}
		if len(trees) != 1 {
			t.Fatalf("8 ports, v6 %d: trees %#x", v6, trees)
		}
		for i := 0; i < 8; i++ {
			key := Key{DimDPort: uint32(1000 + 10*i)}
			ref, steps := tb.walk(trees[0], &key)
			if ents := tb.LeafEntries(ref); steps != 1 || !slices.Equal(ents, []uint32{uint32(i)}) {
				t.Errorf("v6 %d port %d: leaf %v after %d steps", v6, 1000+10*i, ents, steps)
			}
		}
	}
}

// twoCandidateLeaves is a rule set of 2n rules whose trees have n leaves
// of two candidates each (no field separates a negated address from the
// rule after it), so they take 2n leaf slots (a leaf of one takes none).
func twoCandidateLeaves(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "-A INPUT -s 10.0.%d.0/24 ! -d 10.9.9.9 -j ACCEPT\n-A INPUT -s 10.0.%d.0/24 -j DROP\n", i, i)
	}
	return b.String()
}

// TestLeafSlotLimit: a generation whose leaves need more slots than a
// reference can address is refused, not encoded wrongly.
func TestLeafSlotLimit(t *testing.T) {
	rs := parse(t, twoCandidateLeaves(100))
	tb, _, err := Compile(Input{RuleSet: rs, IDs: ids(200)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = buildTrees(&Tables{Entries: tb.Entries}, rs, treeOpts{maxNodes: DefaultMaxNodes, maxLeafSlots: 50})
	if !errors.As(err, new(errTooBig)) || !strings.Contains(err.Error(), "more than 50 leaf slots") {
		t.Fatalf("100 two-candidate leaves in 50 slots: %v", err)
	}
	if LeafRef(MaxLeafSlots-1, MaxLeaf) == NoTree {
		t.Fatal("the largest leaf reference is NoTree")
	}
	if f, c := LeafOf(LeafRef(MaxLeafSlots-1, MaxLeaf)); f != MaxLeafSlots-1 || c != MaxLeaf {
		t.Fatalf("LeafOf(LeafRef(%d, %d)) = %d, %d", MaxLeafSlots-1, MaxLeaf, f, c)
	}
}

// TestGroupBySelectiveField: a rule goes to the group of the field that
// fixes the most bits of its domain. A wildcard fixes none, even in a
// dimension whose domain is narrower than 32 bits (the protocol, the VLAN,
// the ICMP word): counting those as fixed put every rule in "other", one
// tree, and overlapping rule sets then multiplied its nodes.
func TestGroupBySelectiveField(t *testing.T) {
	for _, c := range []struct {
		rule string
		want int
	}{
		{"-s 10.1.2.0/24 -p udp --dport 53", groupSrc},
		{"-s 10.0.0.0/8 -d 10.1.2.3 -p tcp --dport 1024:65535", groupDst},
		{"-s 10.0.0.0/8 -p tcp --dport 22", groupDPort},
		{"-p udp --sport 53", groupSPort},
		{"-p tcp", groupOther},
		{"-i eth0", groupOther},
	} {
		rs := parse(t, "-A INPUT "+c.rule+" -j DROP\n")
		tb := compileTest(t, rs)
		bs, _ := entryBoxes(&tb.Entries[0])
		if g := group(&bs[0], false); g != c.want {
			t.Errorf("%q: group %d, want %d", c.rule, g, c.want)
		}
	}
}

// TestCornerOverlap: more rules than a leaf holds, all holding one corner
// of every region (nested port ranges from 0), so that no split of the
// edges shrinks the list: the builder cuts along the first rule's box,
// and the tables decide as the reference matcher does.
func TestCornerOverlap(t *testing.T) {
	var b strings.Builder
	n := MaxLeaf + 16
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "-A INPUT -p udp --sport 0:%d --dport 0:%d -j %s\n", 1000+7*i, 9000-5*i, []string{"ACCEPT", "DROP"}[i%2])
	}
	rs := parse(t, b.String())
	tb := compileTest(t, rs)
	if tb.Stats.MaxLeaf > MaxLeaf {
		t.Fatalf("stats %+v", tb.Stats)
	}
	r := rand.New(rand.NewPCG(7, 7))
	for k := 0; k < 20000; k++ {
		p := RefPacket{Chain: rules.ChainInput, InIface: "eth0", Src: netip.MustParseAddr("10.0.0.9"), Dst: netip.MustParseAddr("10.0.0.1"),
			Proto: 17, L4: true, SPort: uint16(r.IntN(1700)), DPort: uint16(r.IntN(9100)), Len: 60, TTL: 64}
		if got, want := decidingRule(tb, &p), Decide(rs, p).Rule; got != want {
			t.Fatalf("sport %d dport %d: tables say rule %d, reference %d", p.SPort, p.DPort, got, want)
		}
	}
}

// TestOneTreeOrGroups: rules that do not replicate get one tree (a packet
// walks one); rules narrow in different fields (sources against ports:
// each source's slab cuts every port's) would multiply one tree's nodes
// past its budget and get a tree per group. Both decide as the reference
// matcher.
func TestOneTreeOrGroups(t *testing.T) {
	var one, cross strings.Builder
	for i := 0; i < 250; i++ {
		// sources (group src) beside a /16 of destinations (group dst):
		// one tree separates them at the source, replicating nothing
		fmt.Fprintf(&one, "-A INPUT -s 10.1.%d.0/24 -p udp --dport %d -j ACCEPT\n", i, 1000+i)
		fmt.Fprintf(&one, "-A INPUT -s 10.2.0.0/16 -d 10.0.0.%d -p tcp -j DROP\n", i)
		fmt.Fprintf(&cross, "-A INPUT -s 10.1.%d.7 -j DROP\n-A INPUT -p tcp --dport %d -j ACCEPT\n", i, 1000+i)
	}
	r := rand.New(rand.NewPCG(3, 3))
	for _, c := range []struct {
		name  string
		text  string
		trees int
	}{{"separable", one.String(), 1}, {"cross", cross.String(), 3}} { // cross: 2 IPv4 trees, and IPv6's one (the port rules)
		rs := parse(t, c.text)
		tb := compileTest(t, rs)
		if tb.Stats.Trees != c.trees {
			t.Errorf("%s: %d trees (%+v), want %d", c.name, tb.Stats.Trees, tb.Stats, c.trees)
		}
		for k := 0; k < 20000; k++ {
			p := RefPacket{Chain: rules.ChainInput, InIface: "eth0", Src: netip.AddrFrom4([4]byte{10, byte(1 + r.IntN(2)), byte(r.IntN(256)), byte(r.IntN(9))}),
				Dst: netip.AddrFrom4([4]byte{10, 0, 0, byte(r.IntN(256))}), Proto: []uint8{6, 17}[r.IntN(2)], L4: true, SPort: 40000,
				DPort: uint16(990 + r.IntN(270)), Len: 60, TTL: 64}
			if got, want := decidingRule(tb, &p), Decide(rs, p).Rule; got != want {
				t.Fatalf("%s: %+v: tables say rule %d, reference %d", c.name, p, got, want)
			}
		}
	}
}

// decidingRule is the index of the rule whose entry the tables' walk
// decides p by, -1 for the policy.
func decidingRule(tb *Tables, p *RefPacket) int {
	if c := tb.Classify(p, testDev(p)); c.Entry >= 0 {
		return int(tb.Entries[c.Entry].RuleID - FirstRuleID)
	}
	return -1
}

// TestShadowedLeaves: a rule whose box lies inside an earlier exact,
// deciding rule's (here the same box with another verdict, as
// ClassBench-style sets repeat them) is in no leaf, even where no rule
// covers the whole leaf (a narrower rule beside them keeps the list
// uncut); a LOG rule shadows nothing, and what lies outside the earlier
// box stays. The tables decide as the reference matcher.
func TestShadowedLeaves(t *testing.T) {
	rs := parse(t, `-A INPUT -d 45.1.2.3 -j LOG
-A INPUT -d 45.1.2.3 -p icmp -j LOG
-A INPUT -d 45.0.0.0/8 -p icmp -j ACCEPT
-A INPUT -d 45.0.0.0/8 -p icmp -j DROP
-A INPUT -d 45.1.0.0/16 -p icmp -j DROP
-A INPUT -d 45.1.2.3 -j ACCEPT
-A INPUT -d 45.0.0.0/8 -j DROP
`)
	tb := compileTest(t, rs)
	p := RefPacket{Chain: rules.ChainInput, InIface: "eth0", Src: netip.MustParseAddr("10.0.0.9"), Dst: netip.MustParseAddr("45.1.2.3"),
		Proto: 1, Len: 60, TTL: 64}
	var got []int
	for _, e := range tb.Lookup(0, KeyOf(&p, testDev(&p))) {
		got = append(got, int(tb.Entries[e].RuleID-FirstRuleID))
	}
	if want := []int{0, 1, 2, 5, 6}; !slices.Equal(got, want) {
		t.Errorf("candidates of %v: rules %v, want %v", p.Dst, got, want)
	}
	// what the walk reads: the two LOG records passed, the third decides
	if c := tb.WalkCostOf(0, KeyOf(&p, testDev(&p))); c.Trees != 1 || c.Cands != 3 || c.Slots != 1 {
		t.Errorf("walk of %v: %+v, want 1 tree, 3 candidate records, 1 line of slots", p.Dst, c)
	}
	r := rand.New(rand.NewPCG(5, 5))
	for k := 0; k < 5000; k++ {
		q := p
		q.Dst = netip.AddrFrom4([4]byte{45, byte(r.IntN(3)), 2, byte(2 + r.IntN(3))})
		q.Proto = []uint8{1, 6, 17}[r.IntN(3)]
		q.L4 = q.Proto != 1
		if got, want := decidingRule(tb, &q), Decide(rs, q).Rule; got != want {
			t.Fatalf("%v proto %d: tables say rule %d, reference %d", q.Dst, q.Proto, got, want)
		}
	}
}
