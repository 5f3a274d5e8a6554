package compile

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
)

var testIfaces = map[string]uint32{"lo": 1, "eth0": 2, "eth1": 3, "veth0": 4}

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
		tb, _, err := Compile(Input{RuleSet: rs, IDs: ids(len(rs.Rules)), Ifaces: testIfaces})
		if err != nil {
			t.Fatalf("set %d: %v\n%s", set, err, rs)
		}
		if tb.Stats.MaxDepth >= MaxDepth || tb.Stats.MaxLeaf > MaxLeaf {
			t.Fatalf("set %d: stats %+v beyond the data plane's limits", set, tb.Stats)
		}
		for k := 0; k < 2000; k++ {
			p := randomRefPacket(r, rs, names)
			want := Decide(rs, p)
			c := tb.Classify(&p, testIfaces[p.InIface])
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
		tb, _, err := Compile(Input{RuleSet: rs, IDs: ids(len(rs.Rules)), Ifaces: testIfaces})
		if err != nil {
			t.Fatalf("set %d: %v\n%s", set, err, rs)
		}
		if len(tb.Ranges) != len(tb.Entries) {
			t.Fatalf("set %d: %d ranges for %d entries", set, len(tb.Ranges), len(tb.Entries))
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
				ifindex := testIfaces[p.InIface]
				key := KeyOf(&p, ifindex)
				want := e.Matches(&p, ifindex, tb.SetNames)
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
	macs := [][6]byte{{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}, {0, 0x11, 0x22, 0x33, 0x44, 0x55}}
	p.SrcMAC, p.DstMAC = macs[r.IntN(3)], macs[r.IntN(3)]
	if m.MACSrc != nil && r.IntN(2) == 0 {
		p.SrcMAC = m.MACSrc.Addr
	}
	if m.VLAN != nil && r.IntN(2) == 0 {
		p.Tagged, p.VLAN = true, m.VLAN.ID
	} else if r.IntN(5) == 0 {
		p.Tagged, p.VLAN = true, uint16(r.IntN(11))
	}
	p.Fragment = r.IntN(10) == 0 || (m.Fragment != nil && r.IntN(2) == 0)
	p.CTState = uint8(r.IntN(int(NumCTStates)))
	p.L4 = !p.Fragment && (p.Proto == 6 || p.Proto == 17 || p.Proto == 1 || p.Proto == 58)
	if !p.L4 {
		p.SPort, p.DPort, p.TCPFlags, p.ICMPType, p.ICMPCode = 0, 0, 0, 0, 0
	}
	return p
}
