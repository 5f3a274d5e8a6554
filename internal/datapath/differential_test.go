package datapath_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
	"github.com/xdpfw/xdpfw/internal/telemetry"
)

var (
	diffSeed    = flag.Uint64("diff.seed", 1, "seed of the differential test (reproducible)")
	diffSets    = flag.Int("diff.sets", 250, "random rule sets in the INPUT phase")
	diffPackets = flag.Int("diff.packets", 3600, "random packets per rule set")
)

// TestDifferential runs random rule sets and packets through the loaded
// program (BPF_PROG_TEST_RUN) and through the reference matcher, and
// requires the same verdict (XDP action), the same deciding rule id, the
// same chain, the same counter reason, for REJECT the same answer kind,
// and the same log events (LOG rules and --log, in order) for every
// packet. Phase 1 has forwarding off (every packet is
// INPUT); phase 2 turns forwarding on so the FIB decides INPUT vs FORWARD.
func TestDifferential(t *testing.T) {
	f := newFixture(t)
	f.unlimitedRejects()
	f.setUnlimitedLogs()
	f.setAddrs(diffAddrs(f))
	r := rand.New(rand.NewPCG(*diffSeed, 0x78647066))
	total := 0
	for set := 0; set < *diffSets; set++ {
		n := 1 + r.IntN(48)
		if set%50 == 49 {
			n = 600 + r.IntN(300) // a few large sets
		}
		rs := rules.RandomRuleSet(r, n)
		total += diffRun(t, f, r, rs, *diffPackets, nil, fmt.Sprintf("seed %d set %d", *diffSeed, set))
		if t.Failed() {
			return
		}
	}

	// LOG-heavy sets: many LOG rules match one packet, across the trees,
	// more than log it.
	for set := 0; set < *diffSets/5; set++ {
		rs := rules.RandomRuleSet(r, 1+r.IntN(40))
		for i := range rs.Rules {
			if chance(r, 45) {
				rs.Rules[i].Target = rules.Target{Verdict: rules.VerdictLog}
				if chance(r, 25) { // a broad one: many packets meet several
					rs.Rules[i].Match = rules.Match{Family: rs.Rules[i].Match.Family}
				}
			}
		}
		total += diffRun(t, f, r, rs, *diffPackets/3, nil, fmt.Sprintf("seed %d LOG-heavy set %d", *diffSeed, set))
		if t.Failed() {
			return
		}
	}
	if diffLogOverflows == 0 {
		t.Fatal("no packet matched more LOG rules than log one: the test did not check the bound")
	}

	// -m limit: a few rules decide only while their bucket has a token;
	// the reference takes the same tokens.
	limited := 0
	for set := 0; set < *diffSets/10; set++ {
		rs := rules.RandomRuleSet(r, 1+r.IntN(40))
		rules.RandomLimits(r, rs, 25)
		total += diffRun(t, f, r, rs, *diffPackets/4, nil, fmt.Sprintf("seed %d limit set %d", *diffSeed, set))
		if t.Failed() {
			return
		}
		for _, id := range f.ids {
			if tat, err := f.dp.LimitTat(id); err == nil && tat != 0 {
				limited++
			}
		}
	}
	if limited == 0 {
		t.Fatal("no -m limit bucket was ever used: the test checked nothing of -m limit")
	}

	// -m recent: lists shared by rules, applied in rule order; the
	// reference keeps its own lists (the test runs far inside --seconds).
	listed := 0
	for set := 0; set < *diffSets/10; set++ {
		rs := rules.RandomRuleSet(r, 1+r.IntN(30))
		rules.RandomRecent(r, rs, 20)
		if _, _, err := compile.Compile(compile.Input{RuleSet: rs, IDs: make([]uint32, len(rs.Rules)), Ifaces: f.ifaces}); err != nil {
			continue // more -m recent rules than one packet may meet
		}
		total += diffRun(t, f, r, rs, *diffPackets/4, nil, fmt.Sprintf("seed %d recent set %d", *diffSeed, set))
		if t.Failed() {
			return
		}
		listed += f.dp.RecentAddresses()
	}
	if listed == 0 {
		t.Fatal("no address was ever listed: the test checked nothing of -m recent")
	}

	// -m hashlimit: buckets by key in tables shared by rules, settled in
	// rule order as -m recent; the reference keeps its own buckets (rates
	// of a few an hour or a day: no token comes back, no bucket expires).
	buckets := 0
	for set := 0; set < *diffSets/10; set++ {
		rs := rules.RandomRuleSet(r, 1+r.IntN(30))
		rules.RandomHashLimit(r, rs, 20)
		if _, _, err := compile.Compile(compile.Input{RuleSet: rs, IDs: make([]uint32, len(rs.Rules)), Ifaces: f.ifaces}); err != nil {
			continue // more state rules than one packet may meet
		}
		total += diffRun(t, f, r, rs, *diffPackets/4, nil, fmt.Sprintf("seed %d hashlimit set %d", *diffSeed, set))
		if t.Failed() {
			return
		}
		buckets += f.dp.HashLimitBuckets()
	}
	if buckets == 0 {
		t.Fatal("no -m hashlimit bucket was ever made: the test checked nothing of -m hashlimit")
	}

	// Phase 2: a router. Local addresses on eth0, default routes out of it.
	local := []netip.Addr{netip.MustParseAddr("10.200.9.1"), netip.MustParseAddr("fd00:9::1")}
	for _, c := range [][]string{
		{"sysctl", "-qw", "net.ipv4.conf.all.forwarding=1", "net.ipv6.conf.all.forwarding=1"},
		{"ip", "addr", "add", "10.200.9.1/24", "dev", "eth0"},
		{"ip", "addr", "add", "fd00:9::1/64", "dev", "eth0", "nodad"},
		{"ip", "link", "set", "peer0", "up"},
		{"ip", "route", "add", "default", "dev", "eth0"},
		{"ip", "-6", "route", "add", "default", "dev", "eth0"},
	} {
		if out, err := f.ns.Exec(t.Context(), c[0], c[1:]...); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	for set := 0; set < *diffSets/3; set++ {
		rs := rules.RandomRuleSet(r, 1+r.IntN(48))
		total += diffRun(t, f, r, rs, *diffPackets/2, local, fmt.Sprintf("seed %d forward set %d", *diffSeed, set))
		if t.Failed() {
			return
		}
	}
	if diffLogEvents == 0 {
		t.Fatal("no log event came out: the test checked nothing of logging")
	}
	t.Logf("%d packets checked against the reference matcher, zero mismatches; %d log events agree, %d packets more LOG rules matched than log one",
		total, diffLogEvents, diffLogOverflows)
}

// TestDifferentialChains is TestDifferential's INPUT phase with user
// chains (rules.RandomChains: jumps, gotos, RETURNs, rules without -j):
// the program runs the flattened tables, the reference matcher walks the
// chains as iptables does. Rule sets refused for a negation without a
// single-entry form (compile.ErrNoForm) are skipped and counted.
func TestDifferentialChains(t *testing.T) {
	f := newFixture(t)
	f.unlimitedRejects()
	f.setUnlimitedLogs()
	r := rand.New(rand.NewPCG(*diffSeed, 0xc4a1))
	total, refused := 0, 0
	for set := 0; set < *diffSets/2; set++ {
		rs := rules.RandomRuleSet(r, 1+r.IntN(40))
		rules.RandomChains(r, rs)
		ids := make([]uint32, len(rs.Rules))
		for i := range ids {
			ids[i] = uint32(compile.FirstRuleID + i)
		}
		lim := f.dp.Limits()
		// what diffRun installs: unlimitedLogs' rules, the fixture's log rate
		_, _, err := compile.Compile(compile.Input{RuleSet: unlimitedLogs(rs), IDs: ids, Ifaces: f.ifaces,
			LogRate: f.logRate, LogBurst: f.logBurst,
			MaxEntries: lim.Entries, MaxNodes: lim.Nodes, MaxLeafSlots: lim.LeafSlots})
		if errors.Is(err, compile.ErrNoForm) || errors.Is(err, compile.ErrTooBig) ||
			err != nil && (strings.Contains(err.Error(), "leaf slots") || strings.Contains(err.Error(), "the classifier trees need more than") ||
				strings.Contains(err.Error(), "a leaf holds at most")) {
			// refused with the reason, never installed in part: no
			// single-entry form, RETURNs leaving too many alternatives,
			// or the counting entries of broad jumps and RETURNs in
			// every leaf (or two negated protocols' 254 entries per
			// rule) need more leaf slots, tree nodes or candidates per
			// leaf than the test's tables hold
			refused++
			continue
		}
		if err != nil {
			t.Fatalf("seed %d chain set %d: %v\n%s", *diffSeed, set, err, rs)
		}
		total += diffRun(t, f, r, rs, *diffPackets/3, nil, fmt.Sprintf("seed %d chain set %d", *diffSeed, set))
		if t.Failed() {
			return
		}
	}
	if refused > *diffSets/4 {
		t.Errorf("%d of %d rule sets with chains refused", refused, *diffSets/2)
	}
	t.Logf("%d packets of rule sets with chains agree with the reference matcher; %d sets refused (no single-entry form, or too many leaf slots)", total, refused)

	// -m limit and -m recent on the jumps, gotos, RETURNs and rules
	// without -j (rules.RandomStateOnChains): probes settled in rule order
	// and the entries behind them guarded by their bits; the buckets
	// (bursts of 1 to 3, no token back while the test runs) and lists
	// empty out or fill as the reference's do.
	sets, probed, stateRefused := 0, 0, 0
	for set := 0; set < *diffSets/4; set++ {
		rs := rules.RandomRuleSet(r, 1+r.IntN(30))
		rules.RandomChains(r, rs)
		rules.RandomStateOnChains(r, rs, 50)
		lim := f.dp.Limits()
		ids := make([]uint32, len(rs.Rules))
		for i := range ids {
			ids[i] = uint32(compile.FirstRuleID + i)
		}
		tb, _, err := compile.Compile(compile.Input{RuleSet: unlimitedLogs(rs), IDs: ids, Ifaces: f.ifaces,
			LogRate: f.logRate, LogBurst: f.logBurst,
			MaxEntries: lim.Entries, MaxNodes: lim.Nodes, MaxLeafSlots: lim.LeafSlots})
		if err != nil { // a bound (notes, probes, leaf slots) or no single-entry form: refused whole
			stateRefused++
			continue
		}
		sets++
		if tb.HasProbes() {
			probed++
		}
		total += diffRun(t, f, r, rs, *diffPackets/4, nil, fmt.Sprintf("seed %d chain state set %d", *diffSeed, set))
		if t.Failed() {
			return
		}
	}
	if probed == 0 || probed < *diffSets/16 {
		t.Errorf("%d rule sets with probes installed (%d refused): the test checked too little of -m limit / -m recent on rules that decide nothing",
			probed, stateRefused)
	}
	t.Logf("%d rule sets with -m limit / -m recent on jumps, RETURNs and rules without -j (%d with probes, %d refused) agree",
		sets, probed, stateRefused)
}

// diffRun installs rs and checks n packets. With local non-nil, packets go
// to a local address (INPUT) or a routed one (FORWARD). It checks the log
// events too: every event the ring buffer holds after a chunk of packets
// against the reference's LOG rules and --log, in order; rate limits are
// lifted (unlimitedLogs) so that every event is emitted.
func diffRun(t *testing.T, f *fixture, r *rand.Rand, rs *rules.RuleSet, n int, local []netip.Addr, what string) int {
	rs = unlimitedLogs(rs)
	f.install(rs)
	return diffCheck(t, f, r, rs, f.ids, n, local, what)
}

// diffCheck checks n packets against rs (rule i has counter id ids[i]) as
// the data plane has it in force.
func diffCheck(t *testing.T, f *fixture, r *rand.Rand, rs *rules.RuleSet, ids []uint32, n int, local []netip.Addr, what string) int {
	t.Helper()
	overflowBefore := f.logStats().Overflow
	limits, err := f.dp.StateOf(ids) // -m limit buckets, at the clock now
	if err != nil {
		t.Fatal(err)
	}
	if err := f.dp.ClearRecent(); err != nil { // -m recent lists: from empty, as the reference's
		t.Fatal(err)
	}
	if err := f.dp.ClearHashLimit(); err != nil { // -m hashlimit buckets: likewise
		t.Fatal(err)
	}
	names := []string{"lo", "eth0", "eth1", "veth0"}
	// Fragments: each datagram its own identification (the table is
	// emptied first: nothing of an earlier check is in flight), and half
	// the later fragments come right after their first fragment; the
	// others are of no datagram seen.
	if err := f.dp.FlushFrags(); err != nil {
		t.Fatal(err)
	}
	// A PPPoE session on eth1 whose ppp device veth0 stands for: some
	// packets come in its session frames (arriving on eth1, judged as
	// arriving by veth0).
	if err := f.dp.SetPPPoE([]datapath.PPPoESession{{PPP: int(f.ifaces["veth0"]), PPPName: "veth0", Dev: int(f.ifaces["eth1"]),
		DevName: "eth1", SID: pppoeSID, Peer: macA[:], MAC: macB[:], MTU: 1500}}); err != nil {
		t.Fatal(err)
	}
	var pkts []*packet.Packet
	var ifs []string    // the device each packet arrives by, as the kernel sees it (-i)
	var arrive []string // the device XDP sees it on
	var states []int    // the connection each packet is traced in (datapath.AssumeConn)
	conn := func() int {
		info := uint8(r.UintN(64)) // the status bits (the NAT ones: --ctstate SNAT, DNAT)
		if chance(r, 40) {
			info |= compile.CTIReply
		}
		proto := uint8(0) // the packet's
		if chance(r, 20) {
			proto = pick(r, []uint8{1, 6, 17, 58})
		}
		return datapath.AssumeConn(uint8(r.IntN(int(compile.NumCTStates))), info, proto)
	}
	for id := uint32(1); len(pkts) < n; id++ {
		p, iface := genPacket(r, rs, names)
		if local != nil {
			routedDst(r, p, local)
		}
		if p.IsFragment() {
			p.FragID = id
		}
		on := iface
		if p.IsIP() && chance(r, 10) {
			p.PPPoE, p.PPPoESID, p.SrcMAC, p.VLANs = true, pppoeSID, macA, nil
			iface, on = "veth0", "eth1"
		}
		if p.FragOffset != 0 && chance(r, 50) {
			first := *p
			first.FragOffset, first.MoreFragments = 0, true
			pkts, ifs, arrive, states = append(pkts, &first), append(ifs, iface), append(arrive, on), append(states, conn())
		}
		pkts, ifs, arrive, states = append(pkts, p), append(ifs, iface), append(arrive, on), append(states, conn())
	}
	n = len(pkts)
	results := make([]datapath.TraceResult, n)
	events := make([][]telemetry.Event, n) // by packet
	const chunk = 500                      // packets between ring drains: their events fit in the ring
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		err := f.ns.Do(func() error {
			for i := lo; i < hi; i++ {
				var err error
				if results[i], err = f.dp.Record(pkts[i].Bytes(), f.ifaces[arrive[i]], states[i]); err != nil {
					return fmt.Errorf("%s: %w", pkts[i], err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// Events come in packet order; a packet's events share its bytes.
		evs, i := f.events(), lo
		for _, e := range evs {
			for i < hi && !(bytes.Equal(e.Data, logSnap(pkts[i].Bytes())) && e.Ifindex == f.ifaces[ifs[i]] && int(e.CTState) == states[i]&0xff) {
				i++
			}
			if i == hi {
				t.Fatalf("%s: an event matches no packet of its chunk (or comes out of order): %+v", what, e)
			}
			events[i] = append(events[i], e)
		}
	}
	wantOverflow := uint64(0)
	frags := compile.Fragments{}
	for i, p := range pkts {
		ref := compile.RefPacketOf(p, ifs[i])
		ref.CTState = uint8(states[i])
		ref.Addrs = f.addrs
		ref.CTInfo = uint8(states[i] >> 8)
		if proto := uint8(states[i] >> 16); proto != 0 {
			ref.CTProto = proto
		}
		if local != nil {
			ref.Chain = rules.ChainForward
			ref.OutIface = "eth0" // the default routes' device (the FIB's egress device: -o)
			for _, a := range local {
				if p.Dst == a {
					ref.Chain, ref.OutIface = rules.ChainInput, ""
				}
			}
		}
		d := refDecide(rs, ref, p, frags, limits)
		wantID := refRuleID(d, ref, ids)
		wantAct := wantXDP(d)
		got := results[i]
		if got.RuleID != wantID || got.XDPAction != wantAct || got.Chain != uint8(ref.Chain) ||
			got.Reason != d.Reason || got.Reject != d.Reject {
			rule := "policy"
			if d.Rule >= 0 {
				rule = rs.Rules[d.Rule].String()
			}
			t.Fatalf("%s: MISMATCH on packet %d\n  packet: %s (in %s, state %s)\n  frame: %x\n  reference: chain %s, rule id %d (%s), verdict %s, reason %s, reject %s\n"+
				"  data plane: chain %s, rule id %d, action %d, reason %s, reject %s\nrule set (ids %v):\n%s",
				what, i, p, ifs[i], compile.CTStateName(ref.CTState), p.Bytes(), ref.Chain, wantID, rule, d.Verdict, d.Reason, d.Reject,
				rules.Chain(got.Chain), got.RuleID, got.XDPAction, got.Reason, got.Reject, head(fmt.Sprint(ids), 1), head(rs.String(), 200))
		}
		if msg := checkLogs(f, ids, d, wantID, got, events[i], p.Bytes(), ifs[i], ref); msg != "" {
			t.Fatalf("%s: LOG MISMATCH on packet %d: %s\n  packet: %s (in %s, state %s)\n  frame: %x\nrule set (ids %v):\n%s",
				what, i, msg, p, ifs[i], compile.CTStateName(ref.CTState), p.Bytes(), head(fmt.Sprint(ids), 1), head(rs.String(), 200))
		}
		if d.LogOverflow {
			wantOverflow++
		}
		diffLogEvents += len(events[i])
	}
	st := f.logStats()
	diffLogOverflows += wantOverflow
	if got := st.Overflow - overflowBefore; got != wantOverflow || st.Total.Lost != 0 || st.Total.Suppressed != 0 || st.Unbudgeted != 0 {
		t.Fatalf("%s: %d packets counted for more LOG rules than log one, the reference says %d; lost %d, suppressed %d, unbudgeted %d",
			what, got, wantOverflow, st.Total.Lost, st.Total.Suppressed, st.Unbudgeted)
	}
	return n
}

// What the differential tests saw of logging, so they can tell that they
// tested it.
var diffLogEvents, diffLogOverflows = 0, uint64(0)

// unlimitedLogs returns rs with every logged rule at the fixture's default
// budget, which differential tests lift (setUnlimitedLogs).
func unlimitedLogs(rs *rules.RuleSet) *rules.RuleSet {
	out := &rules.RuleSet{Policies: rs.Policies, Chains: rs.Chains, Rules: slices.Clone(rs.Rules)}
	for i := range out.Rules {
		out.Rules[i].Target.LogRate, out.Rules[i].Target.LogBurst = rules.LogRate{}, 0
		out.Rules[i].Text = out.Rules[i].Spec()
	}
	return out
}

// setUnlimitedLogs lifts the log rate limit of rules without their own.
func (f *fixture) setUnlimitedLogs() {
	f.logRate, f.logBurst = rules.LogRate{N: rules.MaxLogRate}, rules.MaxLogBurst
}

// logSnap is the part of a frame an event carries at the default snap.
func logSnap(frame []byte) []byte { return frame[:min(len(frame), compile.DefaultLogSnap)] }

// checkLogs compares a packet's trace and events with the reference's
// decision d (deciding rule id wantID): which rules log it, in order, and
// what each event says. It returns "" when they agree.
func checkLogs(f *fixture, ids []uint32, d compile.Decision, wantID uint32, got datapath.TraceResult, evs []telemetry.Event,
	frame []byte, iface string, ref compile.RefPacket) string {
	var want []uint32
	for _, i := range d.Logs {
		want = append(want, ids[i])
	}
	if d.Log {
		want = append(want, wantID)
	}
	var have []uint32
	for _, e := range evs {
		have = append(have, e.RuleID)
	}
	if got.LogRules != len(d.Logs) || got.LogSelf != d.Log || !slices.Equal(have, want) {
		return fmt.Sprintf("reference: LOG rule ids %v then --log %v (events %v); data plane: trace %d LOG rules, --log %v, events %v",
			want[:len(d.Logs)], d.Log, want, got.LogRules, got.LogSelf, have)
	}
	// the event's reason is the decision's before a REJECT answers
	reason := d.Reason
	if d.Verdict == rules.VerdictReject {
		reason = compile.ReasonRuleReject
	}
	for k, e := range evs {
		if e.VerdictID != wantID || e.Action != compile.Action(map[rules.Verdict]compile.Action{rules.VerdictAccept: compile.ActAccept,
			rules.VerdictDrop: compile.ActDrop, rules.VerdictReject: compile.ActReject}[d.Verdict]) || e.Reason != reason ||
			e.Chain != ref.Chain || e.Hook != telemetry.HookIngress || e.Ifindex != f.ifaces[iface] || e.PktLen != len(frame) ||
			e.CTState != ref.CTState || e.ByLOG != (k < len(d.Logs)) || !e.Trace {
			return fmt.Sprintf("event %d says %+v; want decided by %d (%s, %s), chain %s, ifindex %d, %d bytes, state %d, by LOG %v",
				k, e, wantID, d.Verdict, reason, ref.Chain, f.ifaces[iface], len(frame), ref.CTState, k < len(d.Logs))
		}
	}
	return ""
}

// refDecide is the reference's decision for p (ref: what it knows of
// it): a later fragment's from frags, else compile.Decide's, which frags
// records for a first fragment.
func refDecide(rs *rules.RuleSet, ref compile.RefPacket, p *packet.Packet, frags compile.Fragments, st *compile.State) compile.Decision {
	if p.FragOffset != 0 {
		return frags.Later(fragKey(p, ref.Chain), int(p.FragOffset)*8)
	}
	if ref.FwdExpired() { // the kernel's before FORWARD (bpf/lib/fwdexpired.h)
		return compile.FwdExpiredDecision(&ref)
	}
	d := compile.DecideAt(rs, ref, st)
	if p.MoreFragments {
		frags.First(fragKey(p, ref.Chain), d, fragCarried(p))
	}
	return d
}

// refRuleID is the counter id the data plane reports for d (rule i has
// id ids[i]).
func refRuleID(d compile.Decision, ref compile.RefPacket, ids []uint32) uint32 {
	switch {
	case d.Rule >= 0:
		return ids[d.Rule]
	case d.Rule == compile.NoRule:
		return 0
	}
	return compile.PolicyID(uint8(ref.Chain), ref.Src.Is6())
}

// fragKey is the datagram fragment p belongs to, decided in chain.
func fragKey(p *packet.Packet, chain rules.Chain) compile.FragKey {
	k := compile.FragKey{Src: p.Src, Dst: p.Dst, ID: p.FragID, Chain: chain}
	if p.Src.Is4() {
		k.Proto = p.Proto
	}
	return k
}

// fragCarried is how many bytes of its datagram's fragmentable part the
// first fragment p carries: what follows its IP header (the builder puts
// IPv6 extension headers before the fragment header).
func fragCarried(p *packet.Packet) int {
	q := packet.Packet{Src: p.Src, Dst: p.Dst, Proto: p.Proto, SPort: p.SPort, DPort: p.DPort, TCPFlags: p.TCPFlags,
		ICMPType: p.ICMPType, ICMPCode: p.ICMPCode, Payload: p.Payload, TCPOptions: p.TCPOptions}
	ip := 20
	if p.Src.Is6() {
		ip = 40
	}
	return len(q.Bytes()) - 14 - ip
}

// diffAddrs is a local routing table over the address pools (-m addrtype),
// with every kind of route the pools' addresses can meet.
func diffAddrs(f *fixture) compile.AddrTable {
	r := func(p string, typ uint8, dev string) compile.AddrRoute {
		return compile.AddrRoute{Prefix: netip.MustParsePrefix(p), Type: typ, Ifindex: f.ifaces[dev], Dev: dev}
	}
	return compile.AddrTable{
		r("10.0.0.1/32", 2, "eth0"), r("10.0.0.2/32", 2, "eth1"), r("10.1.2.3/32", 3, "eth0"),
		r("192.168.0.0/16", 6, "veth0"), r("172.16.5.4/32", 4, "eth0"), r("10.200.0.1/32", 7, "eth1"),
		r("2001:db8::1/128", 2, "eth0"), r("2001:db8::2/128", 4, "eth1"), r("fd00::/16", 2, "veth0"), r("::1/128", 2, "lo"),
	}
}

var (
	poolV4   = []string{"10.0.0.1", "10.0.0.2", "10.1.2.3", "10.200.0.1", "192.168.1.10", "172.16.5.4", "8.8.8.8", "0.0.0.0", "255.255.255.255"}
	poolV6   = []string{"2001:db8::1", "2001:db8::2", "2001:db8:1::10", "fd00::1", "fd00:1::2", "fe80::1", "::1", "::"}
	poolMAC  = [][6]byte{{0x00, 0x11, 0x22, 0x33, 0x44, 0x55}, {2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	poolVLAN = []uint16{0, 1, 10, 100, 4095}
)

const (
	protoSCTP    = 132
	protoUDPLite = 136
)

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }
func chance(r *rand.Rand, pct int) bool { return r.IntN(100) < pct }

// genPacket makes a packet aimed at a random rule of rs most of the time
// (inside its prefixes, at the edges of its port ranges, with its flags),
// so that matches and near misses are both common.
func genPacket(r *rand.Rand, rs *rules.RuleSet, ifaces []string) (*packet.Packet, string) {
	var m *rules.Match
	if len(rs.Rules) > 0 && chance(r, 75) {
		m = &rs.Rules[r.IntN(len(rs.Rules))].Match
	}
	if m == nil {
		m = &rules.Match{}
	}
	v6 := chance(r, 50)
	if m.Family != rules.FamilyAny {
		v6 = m.Family == rules.FamilyIPv6
	}
	p := &packet.Packet{Payload: make([]byte, 8+r.IntN(24))}
	for i := range p.Payload {
		p.Payload[i] = byte(r.UintN(256))
	}
	p.Src = genAddr(r, m.Src, v6)
	p.Dst = genAddr(r, m.Dst, v6)

	switch {
	case m.Proto != nil && !m.Proto.Invert && chance(r, 90):
		p.Proto = m.Proto.Proto
	case v6:
		p.Proto = pick(r, []uint8{6, 17, 58, 58, 47, 50, 0x3b})
	default:
		p.Proto = pick(r, []uint8{6, 17, 1, 1, 47, 50})
	}
	// ICMP of the other family would be parsed as ICMP by neither side's
	// packet model consistently; keep ICMP per family.
	if p.Proto == 1 && v6 {
		p.Proto = 58
	}
	if p.Proto == 58 && !v6 {
		p.Proto = 1
	}
	// In IPv6 these numbers are extension headers, parsed as such; the
	// malformed corpus covers them. Here they would be random bytes.
	if v6 && (p.Proto == 0 || p.Proto == 43 || p.Proto == 44 || p.Proto == 51 || p.Proto == 60) {
		p.Proto = 47
	}
	p.SPort = rules.RandomPortFor(r, m.SPort, m.Ports)
	p.DPort = rules.RandomPortFor(r, m.DPort, m.Ports)
	if p.Proto == protoSCTP || p.Proto == protoUDPLite {
		// the builder emits these as payload: write a header with the ports
		hdr := []byte{byte(p.SPort >> 8), byte(p.SPort), byte(p.DPort >> 8), byte(p.DPort), 0, 0, 0, 0, 0, 0, 0, 0}
		p.Payload = append(hdr, p.Payload...)
	}
	p.TCPFlags = uint8(r.UintN(256))
	if m.TCPFlags != nil && chance(r, 70) {
		p.TCPFlags = m.TCPFlags.Comp | (p.TCPFlags &^ m.TCPFlags.Mask)
	}
	p.ICMPType, p.ICMPCode = uint8(r.UintN(256)), uint8(r.UintN(4))
	if m.ICMP != nil && !m.ICMP.Any && chance(r, 80) {
		p.ICMPType = m.ICMP.Type
		if m.ICMP.Code >= 0 && chance(r, 80) {
			p.ICMPCode = uint8(m.ICMP.Code)
		}
	}
	p.SrcMAC, p.DstMAC = genMAC(r, m.MACSrc), genMAC(r, m.MACDst)
	switch {
	case m.VLAN != nil && chance(r, 70):
		p.VLANs = []uint16{m.VLAN.ID}
		if chance(r, 20) {
			p.VLANs = append(p.VLANs, pick(r, poolVLAN))
		}
	case chance(r, 15) || m.VLANPrio != nil && chance(r, 60):
		for k := 1 + r.IntN(2); k > 0; k-- {
			p.VLANs = append(p.VLANs, pick(r, poolVLAN))
		}
		p.TPID8100 = chance(r, 50)
	}
	for range p.VLANs { // each tag's PCP: the rule's (outermost) or any
		pcp := uint8(r.IntN(8))
		if m.VLANPrio != nil && len(p.PCPs) == 0 && chance(r, 60) {
			pcp = m.VLANPrio.Prio
		}
		p.PCPs = append(p.PCPs, pcp)
	}
	switch {
	case (m.Fragment != nil && chance(r, 50)) || chance(r, 6):
		p.FragOffset = uint16(1 + r.IntN(8191))
	case chance(r, 5):
		p.MoreFragments = true
	}
	if !v6 && chance(r, 5) {
		p.IPv4Options = make([]byte, 4*(1+r.IntN(10)))
		for i := range p.IPv4Options {
			p.IPv4Options[i] = 1 // NOP
		}
	}
	if v6 && chance(r, 6) {
		for k := 1 + r.IntN(3); k > 0; k-- {
			p.IPv6Ext = append(p.IPv6Ext, packet.ExtHdr{Type: pick(r, []uint8{0, 43, 60}), Len: 8 * (1 + r.IntN(3))})
		}
	}
	genHeader(r, m, p)
	iface := pick(r, ifaces)
	if m.InIface != nil && !m.InIface.Invert && chance(r, 70) {
		for _, n := range ifaces {
			if n == m.InIface.Name || (m.InIface.Prefix && len(n) >= len(m.InIface.Name) && n[:len(m.InIface.Name)] == m.InIface.Name) {
				iface = n
			}
		}
	}
	return p, iface
}

// genHeader draws p's header fields (TTL, TOS, length, and addresses for
// -m iprange) at or near m's bounds most of the time.
func genHeader(r *rand.Rand, m *rules.Match, p *packet.Packet) {
	near := func(lo, hi int) int { return pick(r, []int{lo, hi, lo - 1, hi + 1, lo + r.IntN(3)}) }
	for _, x := range []struct {
		m *rules.IPRangeMatch
		a *netip.Addr
	}{{m.SrcRange, &p.Src}, {m.DstRange, &p.Dst}} {
		if x.m != nil && chance(r, 60) {
			if a := pick(r, []netip.Addr{x.m.From, x.m.To, x.m.From.Prev(), x.m.To.Next()}); a.IsValid() {
				*x.a = a
			}
		}
	}
	p.TTL = pick(r, []uint8{1, 2, 63, 64, 65, 128, 254, 255, uint8(r.UintN(256))})
	if t := m.TTL; t != nil && chance(r, 70) {
		p.TTL = uint8(near(int(t.Value), int(t.Value)))
	}
	if p.TTL == 0 {
		p.TTL = 1 // 0 is the builder's default (64)
	}
	p.TOS = uint8(r.UintN(256))
	switch {
	case m.DSCP != nil && chance(r, 70):
		p.TOS = m.DSCP.Value<<2 | p.TOS&3
	case m.TOS != nil && chance(r, 70):
		p.TOS = m.TOS.Value | p.TOS&^m.TOS.Mask
	}
	if e := m.ECN; e != nil && chance(r, 70) {
		if e.IPECT >= 0 {
			p.TOS = p.TOS&^3 | uint8(e.IPECT)
		}
		p.TCPFlags = p.TCPFlags&^e.TCPMask | e.TCPComp
	}
	if rt := m.RT; rt != nil && p.Src.Is6() && chance(r, 70) {
		typ, segs, n := uint8(pick(r, []int{0, 2, 4, 253})), uint8(r.IntN(4)), 8*(1+r.IntN(3))
		if rt.Type != nil && chance(r, 70) {
			typ = uint8(near(int(rt.Type.V), int(rt.Type.V)))
		}
		if rt.Segs != nil && chance(r, 70) {
			segs = uint8(near(int(min(rt.Segs.Lo, 255)), int(min(rt.Segs.Hi, 255))))
		}
		if rt.Len != nil && rt.Len.V%8 == 0 && rt.Len.V >= 8 && rt.Len.V <= 64 && chance(r, 70) {
			n = int(rt.Len.V)
		}
		h := packet.ExtHdr{Type: 43, Len: n, Routing: []byte{typ, segs}}
		if chance(r, 30) { // behind another extension header
			p.IPv6Ext = append([]packet.ExtHdr{{Type: 0, Len: 8}}, h)
		} else {
			p.IPv6Ext = append([]packet.ExtHdr{h}, p.IPv6Ext...)
		}
	}
	if p.Proto == packet.ProtoTCP && chance(r, 60) {
		mss := pick(r, []uint16{536, 1460, uint16(r.UintN(65536))})
		if s := m.MSS; s != nil && chance(r, 70) {
			mss = uint16(near(int(s.Min), int(s.Max)))
		}
		opt := []byte{2, 4, byte(mss >> 8), byte(mss)}
		switch r.IntN(5) {
		case 0: // after NOPs and a timestamp
			opt = append([]byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0}, opt...)
		case 1: // no MSS option: SACK permitted, window scale
			opt = []byte{4, 2, 1, 3, 3, 7}
		case 2: // a malformed length: the walk steps over it
			opt = []byte{2, 3, byte(mss >> 8), byte(mss)}
		}
		p.TCPOptions = opt
	}
	if l := m.Length; l != nil && chance(r, 70) {
		// a payload that makes the IP packet the length wanted, where it can
		keep := 0
		if p.Proto == protoSCTP || p.Proto == protoUDPLite {
			keep = 12 // the header genPacket wrote
		}
		if n := len(p.Payload) + near(int(l.Min), int(l.Max)) - compile.IPLenOf(p); n >= keep && n <= 1400 {
			k := min(n, len(p.Payload))
			p.Payload = append(p.Payload[:k:k], make([]byte, n-k)...)
		}
	}
}

func genAddr(r *rand.Rand, am *rules.AddrMatch, v6 bool) netip.Addr {
	if am != nil && chance(r, 75) {
		return rules.RandomAddrIn(r, am.Prefix)
	}
	if chance(r, 70) {
		if v6 {
			return netip.MustParseAddr(pick(r, poolV6))
		}
		return netip.MustParseAddr(pick(r, poolV4))
	}
	return rules.RandomAddr(r, v6)
}

func genMAC(r *rand.Rand, mm *rules.MACMatch) [6]byte {
	if mm != nil && chance(r, 70) {
		return mm.Addr
	}
	if chance(r, 60) {
		return pick(r, poolMAC)
	}
	var m [6]byte
	for i := range m {
		m[i] = byte(r.UintN(256))
	}
	return m
}

// routedDst points p at a local address, or at a routable unicast one (not
// loopback, multicast, link-local, broadcast or unspecified, whose FIB
// answers are not "forwarded").
func routedDst(r *rand.Rand, p *packet.Packet, local []netip.Addr) {
	if chance(r, 35) {
		for _, a := range local {
			if a.Is4() == p.Src.Is4() {
				p.Dst = a
			}
		}
		return
	}
	bad := func(a netip.Addr) bool {
		return a.IsLoopback() || a.IsMulticast() || a.IsLinkLocalUnicast() || a.IsUnspecified() ||
			a.IsLinkLocalMulticast() || (a.Is4() && (a.As4()[0] == 0 || a.As4()[0] >= 224 || a.As4()[0] == 127)) ||
			netip.MustParsePrefix("10.200.9.0/24").Contains(a) || netip.MustParsePrefix("fd00:9::/64").Contains(a)
	}
	// Sources too: the kernel never forwards from a link-local or loopback
	// source, and its FIB says so; the oracle models plain routing only.
	for bad(p.Src) {
		if p.Src.Is4() {
			p.Src = netip.AddrFrom4([4]byte{byte(1 + r.IntN(222)), byte(r.UintN(256)), byte(r.UintN(256)), byte(1 + r.IntN(254))})
		} else {
			p.Src = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 1, 15: byte(r.UintN(256))})
		}
	}
	for bad(p.Dst) {
		if p.Src.Is4() {
			p.Dst = netip.AddrFrom4([4]byte{byte(1 + r.IntN(222)), byte(r.UintN(256)), byte(r.UintN(256)), byte(1 + r.IntN(254))})
		} else {
			p.Dst = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(r.UintN(256))})
		}
	}
}

// TestDifferentialLarge runs rule sets of 10,000+ rules through the data
// plane and the reference matcher: a random one (negations, wildcards,
// every field) and a structured one (distinct prefixes and ports, v4 and
// v6, as firewalls of that size look).
func TestDifferentialLarge(t *testing.T) {
	f := newFixtureLimits(t, datapath.LimitsFor(1<<15))
	f.unlimitedRejects()
	f.setUnlimitedLogs()
	r := rand.New(rand.NewPCG(*diffSeed, 0x1a46e))
	random := rules.RandomRuleSet(r, 10000)
	structured := &rules.RuleSet{}
	for i := 0; i < 12000; i++ {
		var text string
		switch i % 3 {
		case 0:
			text = fmt.Sprintf("-A INPUT -s 10.%d.%d.0/24 -p udp --dport %d -j ACCEPT", (i/250)%250, i%250, 1000+i%5000)
		case 1:
			text = fmt.Sprintf("-A INPUT -s 2001:db8:%x:%x::/64 -p tcp --dport %d -j DROP", i/65536, i%65536, 1+i%60000)
		default:
			text = fmt.Sprintf("-A INPUT -d 192.168.%d.%d -p tcp -m multiport --dports %d,%d -j ACCEPT", (i/250)%250, i%250, 1+i%1000, 2000+i%1000)
		}
		rs, err := rules.Parse("structured", []byte(text), rules.ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		structured.Rules = append(structured.Rules, rs.Rules...)
	}
	structured.Policies = []rules.Policy{{Chain: rules.ChainInput, Verdict: rules.VerdictDrop}}
	total := 0
	for name, rs := range map[string]*rules.RuleSet{"random 10k": random, "structured 12k": structured} {
		total += diffRun(t, f, r, rs, 25000, nil, fmt.Sprintf("seed %d %s", *diffSeed, name))
		if t.Failed() {
			return
		}
	}
	// Single edits on the structured set, through the delta stage.
	sim := f.newSim(structured, -1)
	if err := f.dp.InstallStamped(sim.Tables, 1); err != nil {
		t.Fatal(err)
	}
	stamp := uint64(1)
	for k := 0; k < 10; k++ {
		what, folded, err := sim.Edit(r)
		if err != nil {
			t.Fatalf("edit %d (%s): %v", k, what, err)
		}
		if folded {
			stamp++
			err = f.dp.InstallStamped(sim.Tables, stamp)
		} else {
			_, err = f.dp.InstallDelta(sim.Delta, stamp)
		}
		if err != nil {
			t.Fatal(err)
		}
		total += diffCheck(t, f, r, sim.RuleSet, sim.IDs, 2500, nil, fmt.Sprintf("seed %d structured 12k, edit %d (%s)", *diffSeed, k, what))
		if t.Failed() {
			return
		}
	}
	t.Logf("%d packets on 10k+ rule sets (and single edits) agree with the reference matcher", total)
}

// TestDifferentialEdits: random rule sets get random single-rule edits
// (insert, append, delete, replace) put in force through the delta stage
// (InstallDelta), and the data plane must decide every packet as the
// reference matcher decides on the edited rule set; then the edits are
// folded into a new main generation (the rebuild) and checked again. When
// the delta stage is full, the edit is folded at once, as the control
// plane does.
//
// Rule sets that log (-j LOG, --log) never use the delta stage: an edit
// with a rule that logs before or after it is compiled in full (as the
// control plane does), and the log events must be the reference's too.
// Every other set is LOG-heavy, and its edits add LOG rules often.
func TestDifferentialEdits(t *testing.T) {
	f := newFixture(t)
	f.unlimitedRejects()
	f.setUnlimitedLogs()
	r := rand.New(rand.NewPCG(*diffSeed, 0xde17a))
	total, edits, deltas, logEdits := 0, 0, 0, 0
	eventsBefore := diffLogEvents
	stamp := uint64(0)
	install := func(tb *compile.Tables) {
		t.Helper()
		stamp++
		if err := f.dp.InstallStamped(tb, stamp); err != nil {
			t.Fatalf("install: %v", err)
		}
	}
	for set := 0; set < *diffSets/6; set++ {
		n := 1 + r.IntN(48)
		if set%20 == 19 {
			n = 600 + r.IntN(300)
		}
		rs := rules.RandomRuleSet(r, n)
		if set%3 == 0 {
			// a stateful head, so that the edits move fast rules
			head, err := rules.Parse("head", []byte("-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT\n"+
				"-A FORWARD -m conntrack --ctstate INVALID,UNTRACKED -j DROP\n"), rules.ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rs.Rules = append(head.Rules, rs.Rules...)
		}
		logPct := -1    // no rule logs: the edits go through the delta stage
		if set%2 == 1 { // LOG-heavy
			logPct = 30
		}
		for i := range rs.Rules {
			rs.Rules[i].Target = logTarget(r, rs.Rules[i].Target, logPct)
		}
		sim := f.newSim(rs, logPct)
		install(sim.Tables)
		for k := 0; k < 8; k++ {
			logged := compile.Logging(sim.RuleSet)
			what, folded, err := sim.Edit(r)
			if logged || compile.Logging(sim.RuleSet) {
				logEdits++
				if !folded {
					t.Fatalf("set %d edit %d (%s): a rule set that logs went into the delta stage", set, k, what)
				}
			}
			if err != nil {
				t.Fatalf("set %d edit %d (%s): %v", set, k, what, err)
			}
			if folded {
				install(sim.Tables)
			} else {
				if _, err := f.dp.InstallDelta(sim.Delta, stamp); err != nil {
					t.Fatalf("set %d edit %d (%s): %v", set, k, what, err)
				}
				if in, _ := f.dp.DeltaInForce(); in != !sim.Delta.Empty() {
					t.Fatalf("set %d edit %d: delta in force %v, want %v", set, k, in, !sim.Delta.Empty())
				}
				deltas++
			}
			edits++
			stage := "folded"
			if !folded {
				stage = fmt.Sprintf("delta %d entries at %v, dead %v", len(sim.Delta.Entries), sim.Delta.Pos, sim.Delta.Dead)
			}
			total += diffCheck(t, f, r, sim.RuleSet, sim.IDs, *diffPackets/8, nil,
				fmt.Sprintf("seed %d edit set %d, edit %d (%s; %s)", *diffSeed, set, k, what, stage))
			if t.Failed() {
				return
			}
		}
		if err := sim.Fold(); err != nil {
			t.Fatalf("set %d: %v", set, err)
		}
		install(sim.Tables) // the rebuild: the delta stage is cleared with the same write
		if in, _ := f.dp.DeltaInForce(); in {
			t.Fatalf("set %d: a delta is in force after the rebuild", set)
		}
		total += diffCheck(t, f, r, sim.RuleSet, sim.IDs, *diffPackets/8, nil, fmt.Sprintf("seed %d edit set %d, rebuilt", *diffSeed, set))
		if t.Failed() {
			return
		}
	}
	if deltas == 0 || logEdits == 0 || diffLogEvents == eventsBefore {
		t.Fatalf("%d edits through the delta stage, %d on rule sets that log, %d log events: the test missed a path",
			deltas, logEdits, diffLogEvents-eventsBefore)
	}
	t.Logf("%d edits (%d through the delta stage, %d compiled in full as a rule logs), %d packets and %d log events checked against the reference matcher, zero mismatches",
		edits, deltas, logEdits, total, diffLogEvents-eventsBefore)
}

// logTarget is t made -j LOG in logPct percent of the calls, or with
// logPct < 0 made one that does not log (a LOG rule becomes DROP, --log
// goes).
func logTarget(r *rand.Rand, t rules.Target, logPct int) rules.Target {
	switch {
	case logPct < 0 && t.Verdict == rules.VerdictLog:
		return rules.Target{Verdict: rules.VerdictDrop}
	case logPct < 0:
		return rules.Target{Verdict: t.Verdict, RejectWith: t.RejectWith}
	case chance(r, logPct):
		return rules.Target{Verdict: rules.VerdictLog}
	}
	return t
}

// newSim is compile.NewEditSim of rs (log options cleared, unlimitedLogs)
// with the fixture's log budget; the rules its edits add are random, with
// no log options, made -j LOG or not logging as logTarget says.
func (f *fixture) newSim(rs *rules.RuleSet, logPct int) *compile.EditSim {
	f.t.Helper()
	sim, err := compile.NewEditSim(compile.Input{RuleSet: unlimitedLogs(rs), Ifaces: f.ifaces, LogRate: f.logRate, LogBurst: f.logBurst})
	if err != nil {
		f.t.Fatal(err)
	}
	sim.NewRule = func(r *rand.Rand) rules.Rule {
		x := rules.RandomRule(r)
		x.Target = logTarget(r, x.Target, logPct)
		x.Target.LogRate, x.Target.LogBurst = rules.LogRate{}, 0
		x.Text = x.Spec()
		return x
	}
	return sim
}
