package compile

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/rules"
)

func parse(t *testing.T, text string) *rules.RuleSet {
	t.Helper()
	rs, err := rules.Parse("t.rules", []byte(text), rules.ParseOptions{})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return rs
}

func ids(n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(FirstRuleID + i)
	}
	return out
}

func TestComplement(t *testing.T) {
	pr := func(lo, hi uint16) rules.PortRange { return rules.PortRange{Lo: lo, Hi: hi} }
	cases := []struct {
		in, want []rules.PortRange
	}{
		{nil, []rules.PortRange{pr(0, 65535)}},
		{[]rules.PortRange{pr(0, 65535)}, nil},
		{[]rules.PortRange{pr(22, 22)}, []rules.PortRange{pr(0, 21), pr(23, 65535)}},
		{[]rules.PortRange{pr(0, 1023), pr(5353, 5353)}, []rules.PortRange{pr(1024, 5352), pr(5354, 65535)}},
		{[]rules.PortRange{pr(80, 90), pr(85, 100), pr(65535, 65535)}, []rules.PortRange{pr(0, 79), pr(101, 65534)}},
		{[]rules.PortRange{pr(10, 20), pr(0, 5)}, []rules.PortRange{pr(6, 9), pr(21, 65535)}},
	}
	for _, c := range cases {
		if got := rules.ComplementPorts(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("complement(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestComplementIsExact: for random sets, a port is in the complement iff
// it is in no range of the set.
func TestComplementIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for n := 0; n < 200; n++ {
		var set []rules.PortRange
		for k := r.IntN(5); k >= 0; k-- {
			lo := uint16(r.IntN(65536))
			set = append(set, rules.PortRange{Lo: lo, Hi: lo + uint16(r.IntN(int(65535-lo)+1))})
		}
		comp := rules.ComplementPorts(set)
		for _, port := range []uint16{0, 1, 65534, 65535, uint16(r.IntN(65536)), set[0].Lo, set[0].Hi, set[0].Lo - 1, set[0].Hi + 1} {
			if inPorts(set, port) == inPorts(comp, port) {
				t.Fatalf("port %d: in set %v = %v, in complement %v = %v", port, set, inPorts(set, port), comp, inPorts(comp, port))
			}
		}
	}
}

func TestExpansion(t *testing.T) {
	ifaces := map[string]uint32{"eth0": 2, "eth1": 3, "wlan0": 4}
	hostIfaces := map[string]uint32{"lo": 1, "eth0": 2, "eth1": 3, "wlan0": 4, "docker0": 5}
	cases := []struct {
		rule    string
		entries int
		warn    string
	}{
		{"-A INPUT -p tcp --dport 22 -j ACCEPT", 1, ""},
		{"-A INPUT -p tcp -m multiport --dports 22,80,443 -j ACCEPT", 3, ""},
		{"-A INPUT -p tcp -m multiport --sports 1,2 -m multiport --dports 22,80,443 -j ACCEPT", 6, ""},
		{"-A INPUT -p tcp ! --dport 22 -j ACCEPT", 2, ""},               // 0:21, 23:65535
		{"-A INPUT -p tcp -m multiport --ports 22,80 -j ACCEPT", 4, ""}, // sport or dport
		{"-A INPUT -p tcp -m multiport ! --ports 22 -j ACCEPT", 4, ""},  // both in 2 ranges
		{"-A INPUT -i eth+ -j ACCEPT", 2, ""},
		{"-A INPUT ! -i eth+ -j ACCEPT", 1, ""},
		{"-A INPUT -i ppp0 -j ACCEPT", 0, "matches no attached interface"},
		{"-A INPUT -p icmp ! --icmp-type any -j ACCEPT", 0, "matches no packet"},
		{"-A INPUT -p tcp --dport 22 -m multiport --dports 22,80 -j ACCEPT", 1, ""}, // both tests: 22
		{"-A INPUT -p tcp --dport 22 -m multiport --dports 80,443 -j ACCEPT", 0, "leave no port; the rule never matches"},
		{"-A INPUT -p tcp ! --sport 0:65535 -j ACCEPT", 0, "leave no port"},
		{"-A INPUT -j LOG", 1, ""},
		{"-A INPUT -p tcp -m multiport --dports 22,80 -j LOG --log-prefix x", 2, ""},
		{"-A INPUT -p tcp -j REJECT", 1, ""},               // REJECT answers: nothing to warn about
		{"-A INPUT -f -j DROP", 1, "-f matches no packet"}, // fragments take their datagram's verdict
		{"-A INPUT ! -f -j DROP", 1, ""},                   // every packet
		{"-A INPUT -p tcp -j REJECT", 1, ""},               // REJECT answers: nothing to warn about
		// -o: FORWARD against every interface of the host, OUTPUT against the attached ones
		{"-A FORWARD -o docker0 -j ACCEPT", 1, ""},
		{"-A OUTPUT -o docker0 -j ACCEPT", 0, "-o docker0 matches no attached interface; the rule never matches"},
		{"-A FORWARD -o ppp0 -j ACCEPT", 0, "-o ppp0 matches no interface of this host; the rule never matches"},
		{"-A FORWARD -o eth+ -j ACCEPT", 1, ""},    // ifindexes 2-3: one range
		{"-A FORWARD ! -o eth+ -j ACCEPT", 2, ""},  // 0-1 (no device, lo), 4-...
		{"-A FORWARD ! -o wlan0 -j ACCEPT", 2, ""}, // 0-3, 5-...
		{"-A FORWARD -i eth+ -o wlan0 -j ACCEPT", 2, ""},
		{"-A OUTPUT ! -o eth0 -p udp -m multiport --dports 53,123 -j ACCEPT", 4, ""},
		{"-A INPUT -m pkttype --pkt-type broadcast -j DROP", 1, ""},
		{"-A INPUT -m pkttype --pkt-type otherhost -j DROP", 0, "--pkt-type otherhost matches no packet"},
		{"-A INPUT -m pkttype ! --pkt-type otherhost -j DROP", 1, ""},
		// loopback alone: kept, no entries, one note
		{"-A OUTPUT -o lo -j ACCEPT", 0, LoopbackNote},
		{"-A INPUT -i lo -j ACCEPT", 0, LoopbackNote},
		{"-A INPUT ! -i lo -j ACCEPT", 3, ""}, // the attached interfaces
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			rs := parse(t, c.rule)
			tb, warns, err := Compile(Input{RuleSet: rs, IDs: ids(1), Ifaces: ifaces, HostIfaces: hostIfaces})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, e := range tb.Entries {
				if e.RuleID == FirstRuleID {
					n++
				}
			}
			if n != c.entries {
				t.Errorf("%d entries, want %d: %v", n, c.entries, tb.Entries)
			}
			got := ""
			for _, w := range warns {
				got += w.Msg
			}
			if (c.warn == "") != (got == "") || !strings.Contains(got, c.warn) {
				t.Errorf("warnings %q, want %q", got, c.warn)
			}
		})
	}
}

// TestLayout: entries chain by chain in rule order; each root carries its
// chain's policy for its family.
func TestLayout(t *testing.T) {
	rs := parse(t, "-P INPUT DROP\n-P FORWARD DROP -6\n-A FORWARD -j ACCEPT\n-A INPUT -p tcp --dport 22 -j ACCEPT\n-A INPUT -j DROP\n")
	tb, _, err := Compile(Input{RuleSet: rs, IDs: ids(3)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range tb.Entries {
		got = append(got, fmt.Sprintf("%s/%d/%s", e.Chain, e.RuleID, e.Action))
	}
	want := []string{"INPUT/17/ACCEPT", "INPUT/18/DROP", "FORWARD/16/ACCEPT"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entries\n got %v\nwant %v", got, want)
	}
	got = nil
	for _, r := range tb.Roots {
		got = append(got, fmt.Sprintf("%d/%s", r.RuleID, r.Action))
	}
	want = []string{"1/DROP", "2/DROP", "3/ACCEPT", "4/DROP", "5/ACCEPT", "6/ACCEPT"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("roots\n got %v\nwant %v", got, want)
	}
}

// TestLimits: a rule set beyond the loaded table sizes is refused with a
// message naming the limit and the way out, never installed in part.
func TestLimits(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 600; i++ {
		fmt.Fprintf(&b, "-A INPUT -s 10.%d.%d.0/24 -p tcp -m multiport --dports 1,2,3,4,5,6,7 -j ACCEPT\n", i/200, i%200)
	}
	rs := parse(t, b.String())
	if _, _, err := Compile(Input{RuleSet: rs, IDs: ids(600), MaxEntries: 1000}); err == nil ||
		!strings.Contains(err.Error(), "4200 classifier entries") || !strings.Contains(err.Error(), "--max-rules") {
		t.Errorf("entries: %v", err)
	}
	if _, _, err := Compile(Input{RuleSet: rs, IDs: ids(600), MaxNodes: 100}); err == nil ||
		!strings.Contains(err.Error(), "more than 100 nodes") {
		t.Errorf("nodes: %v", err)
	}
	if _, _, err := Compile(Input{RuleSet: parse(t, twoCandidateLeaves(100)), IDs: ids(200), MaxLeafSlots: 100}); err == nil ||
		!strings.Contains(err.Error(), "leaf slots") {
		t.Errorf("leaves: %v", err)
	}
}

// TestDuplicatesCollapse: identical rules are dominated by the first one:
// a leaf holds it alone, whatever the count.
func TestDuplicatesCollapse(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 1000; i++ {
		b.WriteString("-A INPUT -p tcp -m multiport --dports 22,80 -j ACCEPT\n")
	}
	rs := parse(t, b.String())
	tb, _, err := Compile(Input{RuleSet: rs, IDs: ids(1000)})
	if err != nil {
		t.Fatal(err)
	}
	if tb.Stats.MaxLeaf != 1 || tb.Stats.Nodes > 20 {
		t.Errorf("1000 duplicates: %+v", tb.Stats)
	}
}

func TestPrefixBytes(t *testing.T) {
	rs := parse(t, "-A INPUT -s 10.1.0.0/17 -j ACCEPT\n-A INPUT -s 10.1.2.3 -j ACCEPT\n-A INPUT -d 2001:db8::/33 -j ACCEPT\n")
	tb, _, err := Compile(Input{RuleSet: rs, IDs: ids(3)})
	if err != nil {
		t.Fatal(err)
	}
	e := tb.Entries[0]
	if e.Src != [16]byte{10, 1} || e.SrcMask != [16]byte{255, 255, 128} {
		t.Errorf("v4 /17: %v / %v", e.Src, e.SrcMask)
	}
	wantMask := [16]byte{255, 255, 255, 255, 128}
	if e6 := tb.Entries[2]; e6.Dst != [16]byte{0x20, 0x01, 0x0d, 0xb8} || e6.DstMask != wantMask {
		t.Errorf("v6 /33: %v / %v", e6.Dst, e6.DstMask)
	}
	if tb.Entries[1].SrcMask != [16]byte{255, 255, 255, 255} {
		t.Errorf("v4 host: mask %v", tb.Entries[1].SrcMask)
	}
}

// TestSetErrors: a rule naming a set that does not exist, or one of the
// other family, is refused at the set name's position, as a rule error.
func TestSetErrors(t *testing.T) {
	rs := parse(t, "-A INPUT -p tcp --dport 22 -j ACCEPT\n-A INPUT -m set --match-set blk src -j DROP\n")
	_, _, err := Compile(Input{RuleSet: rs, IDs: ids(2)})
	var re *rules.Error
	if !errors.As(err, &re) || !strings.HasPrefix(err.Error(), `t.rules:2:29: set "blk" does not exist`) ||
		!strings.Contains(err.Error(), "xdpfw set create blk hash:net") {
		t.Errorf("missing set: %v", err)
	}
	sets := map[string]SetInfo{"blk": {ID: 7, Family: rules.FamilyIPv6}}
	rs = parse(t, "-A INPUT -s 10.0.0.0/8 -m set --match-set blk dst -j DROP\n")
	if _, _, err = Compile(Input{RuleSet: rs, IDs: ids(1), Sets: sets}); !errors.As(err, &re) ||
		!strings.HasPrefix(err.Error(), `t.rules:1:43: set "blk" holds ipv6 addresses but the rule matches ipv4 packets`) {
		t.Errorf("family: %v", err)
	}
	rs = parse(t, "-A INPUT -m set ! --match-set blk dst -j DROP\n")
	tb, _, err := Compile(Input{RuleSet: rs, IDs: ids(1), Sets: sets})
	if err != nil {
		t.Fatal(err)
	}
	if e := tb.Entries[0]; e.DstSet != 7 || e.Family != rules.FamilyIPv6 || e.Match&MDstSet == 0 || e.Invert&MDstSet == 0 {
		t.Errorf("entry %+v", e)
	}
}

// TestRejectKinds: --reject-with travels in the compiled entry (and in the
// reference matcher's decision) as the kind the data plane answers with.
func TestRejectKinds(t *testing.T) {
	for _, c := range []struct {
		rule string
		want Reject
	}{
		{"-A INPUT -p udp -j REJECT", RejectPortUnreach},
		{"-A INPUT -4 -j REJECT --reject-with icmp-port-unreachable", RejectPortUnreach},
		{"-A INPUT -6 -j REJECT --reject-with icmp6-port-unreachable", RejectPortUnreach},
		{"-A INPUT -6 -j REJECT --reject-with port-unreach", RejectPortUnreach},
		{"-A INPUT -p tcp -j REJECT --reject-with tcp-reset", RejectTCPReset},
		{"-A INPUT -4 -j REJECT --reject-with icmp-net-unreachable", RejectNetUnreach},
		{"-A INPUT -4 -j REJECT --reject-with icmp-host-unreachable", RejectHostUnreach},
		{"-A INPUT -4 -j REJECT --reject-with icmp-proto-unreachable", RejectProtoUnreach},
		{"-A INPUT -4 -j REJECT --reject-with icmp-net-prohibited", RejectNetProhib},
		{"-A INPUT -4 -j REJECT --reject-with icmp-host-prohibited", RejectHostProhib},
		{"-A INPUT -4 -j REJECT --reject-with icmp-admin-prohibited", RejectAdminProhib},
		{"-A INPUT -6 -j REJECT --reject-with icmp6-no-route", Reject6NoRoute},
		{"-A INPUT -6 -j REJECT --reject-with no-route", Reject6NoRoute},
		{"-A INPUT -6 -j REJECT --reject-with icmp6-adm-prohibited", Reject6AdmProhib},
		{"-A INPUT -6 -j REJECT --reject-with icmp6-addr-unreachable", Reject6AddrUnreach},
	} {
		rs := parse(t, c.rule)
		tb, _, err := Compile(Input{RuleSet: rs, IDs: ids(1)})
		if err != nil {
			t.Fatalf("%s: %v", c.rule, err)
		}
		if len(tb.Entries) != 1 || tb.Entries[0].Action != ActReject || tb.Entries[0].Reject != c.want {
			t.Errorf("%s: entries %v, want one REJECT %s", c.rule, tb.Entries, c.want)
		}
		if k, err := RejectOf(rs.Rules[0].Target.RejectWith); err != nil || k != c.want {
			t.Errorf("%s: RejectOf = %s, %v", c.rule, k, err)
		}
	}
	if _, err := RejectOf("icmp-bogus"); err == nil {
		t.Error("RejectOf accepts an unknown type")
	}
}

// TestCTAddrs: -m conntrack's address tests become tests of the packet's
// own addresses in each direction; what the classifier cannot say is
// refused with the reason, what never matches is a warning.
func TestCTAddrs(t *testing.T) {
	compileOne := func(text string) ([]Entry, []Warning, error) {
		rs := parse(t, "-A INPUT "+text+" -j ACCEPT\n")
		tb, w, err := Compile(Input{RuleSet: rs, IDs: ids(1)})
		if err != nil {
			return nil, nil, err
		}
		return tb.Entries[:tb.ChainEnd[0]], w, nil
	}
	for _, tc := range []struct{ text, err string }{
		{"-m conntrack --ctorigsrc 10.0.0.1", "need --ctstate without RELATED"},
		{"-m conntrack --ctstate ESTABLISHED,RELATED --ctreplsrc 10.0.0.1", "need --ctstate without RELATED"},
		{"-s 10.0.0.0/8 -m conntrack --ctstate NEW --ctdir ORIGINAL ! --ctorigsrc 10.1.0.0/16", "is no prefix"},
		{"-m conntrack --ctstate NEW --ctdir ORIGINAL ! --ctorigsrc 10.1.0.0/16 ! --ctrepldst 10.2.0.0/16", "is no prefix"},
	} {
		if _, _, err := compileOne(tc.text); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want %q", tc.text, err, tc.err)
		}
	}
	ents, w, err := compileOne("-s 10.0.0.0/8 -m conntrack --ctstate NEW --ctdir ORIGINAL --ctorigsrc 11.0.0.0/8")
	if err != nil || len(ents) != 0 || len(w) != 1 || !strings.Contains(w[0].Msg, "never matches") {
		t.Errorf("disjoint -s and --ctorigsrc: entries %v, warnings %v, error %v; want none and a warning", ents, w, err)
	}
	// no --ctdir: one entry per direction, the address on the source in
	// the original one and on the destination in the reply one
	ents, _, err = compileOne("-m conntrack --ctstate NEW,ESTABLISHED --ctorigsrc 10.1.0.0/16")
	if err != nil || len(ents) != 2 {
		t.Fatalf("entries %v, error %v; want 2", ents, err)
	}
	for _, e := range ents {
		reply := e.Invert&MCTDir == 0
		if e.Match&MCTDir == 0 || reply != (e.Match&MDst != 0) || reply == (e.Match&MSrc != 0) {
			t.Errorf("entry %s: reply direction %v tests src %v dst %v", e, reply, e.Match&MSrc != 0, e.Match&MDst != 0)
		}
	}
}

// TestCompileRefusesNAT: a rule set with nat rules (rules.ParseOptions.NAT)
// is refused until the data plane translates: its translations would
// silently be left out.
func TestCompileRefusesNAT(t *testing.T) {
	rs, err := rules.Parse("f", []byte("-A INPUT -j ACCEPT\n-t nat -A POSTROUTING -j MASQUERADE\n"), rules.ParseOptions{NAT: true})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = Compile(Input{RuleSet: rs, IDs: []uint32{1}})
	if err == nil || !strings.Contains(err.Error(), "does not translate addresses yet") {
		t.Fatalf("want the nat rules refused, got %v", err)
	}
}

// TestCTStateNAT: --ctstate SNAT and DNAT as the kernel's xt_conntrack
// reads them: the packet's state bit, plus SNAT (DNAT) for a packet of a
// connection (NEW, ESTABLISHED, RELATED) whose source (destination) NAT
// changed (CTISrcNAT, CTIDstNAT); a packet without a connection has
// neither, whatever its CTInfo says. The reference and the compiled
// classifier (the Go twin: trees, leaves, entry checks) both give it, in a
// chain and behind a user chain (flattened), for every state and NAT bit.
func TestCTStateNAT(t *testing.T) {
	for _, tc := range []struct {
		test string
		want func(state uint8, snat, dnat bool) bool // the kernel's answer (xt_conntrack)
	}{
		{"--ctstate DNAT", func(_ uint8, _, d bool) bool { return d }},
		{"--ctstate SNAT", func(_ uint8, s, _ bool) bool { return s }},
		{"! --ctstate DNAT", func(_ uint8, _, d bool) bool { return !d }},
		{"--ctstate SNAT,DNAT", func(_ uint8, s, d bool) bool { return s || d }},
		{"--ctstate NEW,DNAT", func(st uint8, _, d bool) bool { return st == CTNew || d }},
		{"! --ctstate ESTABLISHED,SNAT", func(st uint8, s, _ bool) bool { return st != CTEstablished && !s }},
		{"! --ctstate INVALID,DNAT", func(st uint8, _, d bool) bool { return st != CTInvalid && !d }},
		{"--ctstate UNTRACKED,SNAT", func(st uint8, s, _ bool) bool { return st == CTUntracked || s }},
		{"--ctstate DNAT --ctdir REPLY", func(_ uint8, _, d bool) bool { return d }}, // the packets below go in the reply direction
		{"--ctstate NEW,DNAT --ctstatus SEEN_REPLY", func(st uint8, _, d bool) bool {
			return (st == CTNew || d) && st != CTInvalid && st != CTUntracked
		}},
	} {
		for _, wrap := range []bool{false, true} {
			text := "-A FORWARD -m conntrack " + tc.test + " -j DROP\n-A FORWARD -j ACCEPT\n"
			if wrap { // RETURN from a user chain: the flattening negates the rule's entries
				text = "-N c\n-A FORWARD -j c\n-A FORWARD -j ACCEPT\n-A c -m conntrack " + tc.test + " -j RETURN\n-A c -j DROP\n"
			}
			rs := parse(t, text)
			tb, _, err := Compile(Input{RuleSet: rs, IDs: ids(len(rs.Rules))})
			if err != nil {
				t.Fatalf("%s: %v", tc.test, err)
			}
			for st := uint8(0); st < NumCTStates; st++ {
				for nat := uint8(0); nat < 4; nat++ {
					p := RefPacket{Chain: rules.ChainForward, Src: netip.MustParseAddr("10.0.0.1"),
						Dst: netip.MustParseAddr("10.0.0.2"), Proto: 17, L4: true, CTState: st, CTProto: 17,
						CTInfo: CTIReply | CTISeenReply | nat<<4}
					tracked := st == CTNew || st == CTEstablished || st == CTRelated
					want := tc.want(st, tracked && nat&1 != 0, tracked && nat&2 != 0) != wrap
					ref := Decide(rs, p)
					c := tb.Classify(&p, testDev(&p))
					twin := c.Root.Action == ActDrop
					if c.Entry >= 0 {
						twin = tb.Entries[c.Entry].Action == ActDrop
					}
					if (ref.Verdict == rules.VerdictDrop) != want || twin != want {
						t.Errorf("%q (user chain %v), state %s, SNAT %v, DNAT %v: reference drops %v, classifier %v; the kernel %v",
							tc.test, wrap, CTStateName(st), nat&1 != 0, nat&2 != 0, ref.Verdict == rules.VerdictDrop, twin, want)
					}
				}
			}
		}
	}
}
