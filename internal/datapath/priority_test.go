package datapath_test

import (
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
	"github.com/xdpfw/xdpfw/testutil"
)

// TestPriorityCPUMap sends real frames over a veth pair into the attached
// program (native mode), from CPU 0, with a priority table that makes TCP
// port 22 and ICMP HIGH: every frame must be decided by the rule
// BPF_PROG_TEST_RUN reports for it (the judgment inline, without
// priority), HIGH frames judged where they arrived, BULK ones (the rest,
// and a first fragment) handed over and judged by xdpfw_cpumap on CPU 1.
// With no bulk CPUs (SetPriority(nil): the fallback) nothing is handed
// over and the verdicts stay the same. The same in generic mode, where the
// cpumap queues the skb and xdpfw_cpumap runs on it (cpu_map_generic_redirect).
func TestPriorityCPUMap(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs: one receives, one takes the bulk class")
	}
	f := newFixture(t)
	f.installText(tableRules + "-t xdpfw-priority -A PRIORITY -p tcp --dport 22 -j HIGH\n" +
		"-t xdpfw-priority -A PRIORITY -p icmp -j HIGH\n")
	peer, fw, far := f.peerPair()
	ids := append([]uint32{compile.PolicyID(0, false), compile.PolicyID(0, true)}, f.ids...)
	frames := verdictPackets()
	high := func(p *packet.Packet) bool {
		return !p.MoreFragments && (p.Proto == 6 && p.DPort == 22 || p.Proto == 1)
	}
	for _, mode := range []datapath.Mode{datapath.ModeNative, datapath.ModeGeneric} {
		if err := f.ns.Do(func() error { _, err := f.dp.Attach(fw.Name, mode); return err }); err != nil {
			t.Fatal(err)
		}
		t.Run(string(mode), func(t *testing.T) { checkPriorityCPUMap(t, f, fw.Name, peer, far.Index, ids, frames, high) })
		if err := f.ns.Do(func() error { return f.dp.Detach(fw.Name) }); err != nil {
			t.Fatal(err)
		}
	}
}

// checkPriorityCPUMap is TestPriorityCPUMap in the mode attached to fw:
// frames sent from peer's device farIndex on CPU 0, with CPU 1 as the
// bulk CPU and with none.
func checkPriorityCPUMap(t *testing.T, f *fixture, fw string, peer *testutil.NetNS, farIndex int, ids []uint32, frames []*packet.Packet,
	high func(*packet.Packet) bool) {
	for _, cpus := range [][]int{{1}, nil} {
		if err := f.dp.SetPriority(cpus); err != nil {
			t.Fatal(err)
		}
		if got, err := f.dp.PriorityInForce(); err != nil || len(got) != len(cpus) {
			t.Fatalf("bulk CPUs in force %v (%v), want %v", got, err, cpus)
		}
		nHigh, nBulk := 0, 0
		for _, p := range frames {
			frame := p.Bytes()
			want := f.mustRun(frame, fw)
			st0, err := f.dp.PriorityCounters()
			if err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, f.dp, ids)
			sendRawOnCPU(t, peer, farIndex, frame, 0)
			if id := waitCounted(t, f.dp, ids, before); id != want.RuleID {
				t.Errorf("bulk CPUs %v: %s: counted on rule id %d, judged inline %d", cpus, p, id, want.RuleID)
			}
			st1, err := f.dp.PriorityCounters()
			if err != nil {
				t.Fatal(err)
			}
			dHigh, dBulk, dFall, dCPU := diff(st0.High, st1.High), diff(st0.Bulk, st1.Bulk), diff(st0.Fallback, st1.Fallback), diff(st0.Cpumap, st1.Cpumap)
			switch {
			case cpus == nil:
				if sum(dHigh)+sum(dBulk)+sum(dFall)+sum(dCPU) != 0 {
					t.Errorf("no bulk CPUs: %s went through the priority stage (high %v bulk %v fallback %v cpumap %v)", p, dHigh, dBulk, dFall, dCPU)
				}
			case high(p):
				nHigh++
				if sum(dHigh) != 1 || sum(dBulk)+sum(dFall)+sum(dCPU) != 0 {
					t.Errorf("%s: want HIGH, judged where it arrived; high %v bulk %v fallback %v cpumap %v", p, dHigh, dBulk, dFall, dCPU)
				}
			default:
				nBulk++
				if sum(dBulk) != 1 || sum(dHigh)+sum(dFall) != 0 || dCPU[1] != 1 || sum(dCPU) != 1 {
					t.Errorf("%s: want BULK, judged on CPU 1; high %v bulk %v fallback %v cpumap %v", p, dHigh, dBulk, dFall, dCPU)
				}
				if dBulk[1] != 0 {
					t.Errorf("%s: handed over on CPU 1, the bulk CPU (received there?): bulk %v", p, dBulk)
				}
			}
		}
		if cpus != nil && (nHigh < 2 || nBulk < 3) {
			t.Fatalf("%d HIGH and %d BULK frames: the test checks too little", nHigh, nBulk)
		}
	}
}

// TestAuditBulkCPU: with a priority table in force and an audit running,
// the packets the bulk CPU judges (xdpfw_cpumap) are audited too, by the
// audit's cpumap stage (xdpfw_cpumap_audit), which returns to
// xdpfw_cpumap_finish: every frame, HIGH or BULK, is seen once by the
// audit, a verdict the candidate (which drops everything) would change is
// counted, and the enforced verdict is the one judged inline.
func TestAuditBulkCPU(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs: one receives, one takes the bulk class")
	}
	f := newFixture(t)
	f.installText(tableRules + "-t xdpfw-priority -A PRIORITY -p tcp --dport 22 -j HIGH\n")
	peer, fw, far := f.peerPair()
	if err := f.ns.Do(func() error { _, err := f.dp.Attach(fw.Name, datapath.ModeNative); return err }); err != nil {
		t.Fatal(err)
	}
	if err := f.dp.SetPriority([]int{1}); err != nil {
		t.Fatal(err)
	}
	tables, _ := f.compileFor(mustParse(t, "-P INPUT DROP\n"))
	a, err := f.dp.StartAudit(tables, compile.DefaultLogSnap, time.Millisecond, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ids := append([]uint32{compile.PolicyID(0, false), compile.PolicyID(0, true)}, f.ids...)
	nBulk, nAccepted := 0, 0
	for _, p := range verdictPackets() {
		frame := p.Bytes()
		want := f.mustRun(frame, fw.Name)
		st0, err := f.dp.PriorityCounters()
		if err != nil {
			t.Fatal(err)
		}
		ac0, err := a.Counters()
		if err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, f.dp, ids)
		sendRawOnCPU(t, peer, far.Index, frame, 0)
		// the audit stage runs before the finish stage counts the rule
		if id := waitCounted(t, f.dp, ids, before); id != want.RuleID {
			t.Errorf("%s: counted on rule id %d, judged inline %d", p, id, want.RuleID)
		}
		st1, err := f.dp.PriorityCounters()
		if err != nil {
			t.Fatal(err)
		}
		ac1, err := a.Counters()
		if err != nil {
			t.Fatal(err)
		}
		bulk := sum(diff(st0.Cpumap, st1.Cpumap)) == 1
		if bulk {
			nBulk++
		}
		wouldDrop := uint64(0)
		if want.Action == compile.ActAccept {
			wouldDrop = 1
			nAccepted++
		}
		if seen := ac1.Seen.Packets - ac0.Seen.Packets; seen != 1 {
			t.Errorf("%s (judged on the bulk CPU: %v): the audit saw it %d times, want once", p, bulk, seen)
		}
		if d := ac1.WouldDrop.Packets - ac0.WouldDrop.Packets; d != wouldDrop {
			t.Errorf("%s (judged on the bulk CPU: %v): would drop counted %d, want %d (enforced %v)", p, bulk, d, wouldDrop, want.Action)
		}
	}
	if nBulk < 3 || nAccepted < 2 {
		t.Fatalf("%d frames judged on the bulk CPU, %d accepted: the test checks too little", nBulk, nAccepted)
	}
	if err := f.dp.StopAudit(); err != nil {
		t.Fatal(err)
	}
}

// sendRawOnCPU is sendRaw from a thread pinned to cpu: the veth's receive
// (its NAPI poll) runs on the CPU that sent.
func sendRawOnCPU(t *testing.T, ns *testutil.NetNS, ifindex int, frame []byte, cpu int) {
	t.Helper()
	err := ns.Do(func() error {
		var old, set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &old); err != nil {
			return err
		}
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return err
		}
		defer unix.SchedSetaffinity(0, &old)
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Sendto(fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: ifindex})
	})
	if err != nil {
		t.Fatalf("sending on ifindex %d: %v", ifindex, err)
	}
}

func diff(a, b []uint64) []uint64 {
	out := make([]uint64, max(len(a), len(b), 2))
	for i := range b {
		out[i] = b[i]
		if i < len(a) {
			out[i] -= a[i]
		}
	}
	return out
}

func sum(v []uint64) (s uint64) {
	for _, x := range v {
		s += x
	}
	return s
}

// TestPriorityDifferential: on random rule sets with random priority
// tables, the class the live program gives each random packet (counted
// per CPU in fw_prio_stats: high, or bulk / fallback) is the Go twin's
// (compile.Tables.Priority) and the reference's (compile.PriorityOf).
func TestPriorityDifferential(t *testing.T) {
	f := newFixture(t)
	if err := f.dp.SetPriority([]int{0}); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(*diffSeed, 0x9a))
	names := []string{"lo", "eth0", "eth1", "veth0"}
	checked, high := 0, 0
	for set := range max(*diffSets/10, 10) {
		rs := rules.RandomRuleSet(r, 1+r.IntN(20))
		rs.Priority, rs.PriorityPolicy = nil, 0
		for range 1 + r.IntN(10) {
			rs.Priority = append(rs.Priority, rules.RandomPriorityRule(r))
		}
		if chance(r, 30) {
			rs.PriorityPolicy = rules.VerdictHigh
		}
		f.install(rs)
		near := &rules.RuleSet{Rules: rs.Priority}
		for range 100 {
			p, iface := genPacket(r, near, names)
			got, classed := f.liveClass(p, iface)
			ref := compile.RefPacketOf(p, iface)
			want, twin := compile.PriorityOf(rs, ref), f.tables.Priority(&ref, compile.Dev{In: f.ifaces[iface]})
			if !classed && (ref.Src.IsLoopback() || ref.Proto == 0) {
				continue // judged before the class (not IP, malformed, this host's answer)
			}
			if got != want || twin != want {
				t.Fatalf("set %d: %s on %s: data plane %v, twin %v, reference %v\n%s", set, p, iface, got, twin, want, rs)
			}
			checked++
			if got == rules.VerdictHigh {
				high++
			}
		}
	}
	if high < checked/10 || checked-high < checked/10 {
		t.Fatalf("%d packets, %d HIGH: the test checks too little of one class", checked, high)
	}
	t.Logf("%d packets, %d HIGH", checked, high)
}

// liveClass runs p, arriving on iface, through the live program (not a
// trace: the priority stage classes it) and reads the class it took from
// the per-CPU class counters: HIGH, or BULK (handed over, or judged where
// it arrived when that failed); classed false when it took none (judged
// before the class).
func (f *fixture) liveClass(p *packet.Packet, iface string) (class rules.Verdict, classed bool) {
	f.t.Helper()
	st0, err := f.dp.PriorityCounters()
	if err != nil {
		f.t.Fatal(err)
	}
	frame := p.Bytes()
	if err := f.ns.Do(func() error {
		_, err := f.dp.Program().Run(&ebpf.RunOptions{Data: frame,
			Context: xdpCtx{DataEnd: uint32(len(frame)), IngressIfindex: f.ifaces[iface]}})
		return err
	}); err != nil {
		f.t.Fatal(err)
	}
	st1, err := f.dp.PriorityCounters()
	if err != nil {
		f.t.Fatal(err)
	}
	dHigh, dBulk := sum(diff(st0.High, st1.High)), sum(diff(st0.Bulk, st1.Bulk))+sum(diff(st0.Fallback, st1.Fallback))
	switch {
	case dHigh == 1 && dBulk == 0:
		return rules.VerdictHigh, true
	case dHigh == 0 && dBulk == 1:
		return rules.VerdictBulk, true
	case dHigh+dBulk == 0:
		return 0, false
	}
	f.t.Fatalf("%s: high %d, bulk %d: want one class", p, dHigh, dBulk)
	return 0, false
}

// TestPriorityVLANPrio: the class of frames tagged with each PCP, untagged
// and double-tagged (the outermost tag's PCP counts), in the live program,
// is what the table says, the reference's and the Go twin's.
func TestPriorityVLANPrio(t *testing.T) {
	f := newFixture(t)
	if err := f.dp.SetPriority([]int{0}); err != nil {
		t.Fatal(err)
	}
	f.installText("-A INPUT -j ACCEPT\n" +
		"-t xdpfw-priority -A PRIORITY -m vlan --vlan-prio 5 -j HIGH\n" +
		"-t xdpfw-priority -A PRIORITY -p udp --dport 9 -m vlan --vlan-id 100 ! --vlan-prio 7 -j HIGH\n" +
		"-t xdpfw-priority -A PRIORITY -6 -m vlan ! --vlan-prio 1 -j HIGH\n")
	type tag struct {
		vid uint16
		pcp uint8
	}
	check := func(p *packet.Packet, want rules.Verdict) {
		t.Helper()
		got, classed := f.liveClass(p, "eth0")
		ref := compile.RefPacketOf(p, "eth0")
		ref.Chain = rules.ChainInput
		if !classed || got != want || compile.PriorityOf(f.rs, ref) != want || f.tables.Priority(&ref, compile.Dev{In: f.ifaces["eth0"]}) != want {
			t.Errorf("%s (PCPs %v): data plane %v (classed %v), reference %v, twin %v; want %v", p, p.PCPs, got, classed,
				compile.PriorityOf(f.rs, ref), f.tables.Priority(&ref, compile.Dev{In: f.ifaces["eth0"]}), want)
		}
	}
	frame := func(v6 bool, dport uint16, tags ...tag) *packet.Packet {
		p := v4pkt(17, "10.1.2.3", "10.9.9.9", 1, dport)
		if v6 {
			p = v4pkt(17, "fd00::1", "fd00::2", 1, dport)
		}
		for _, g := range tags {
			p.VLANs, p.PCPs = append(p.VLANs, g.vid), append(p.PCPs, g.pcp)
		}
		return p
	}
	check(frame(false, 9), rules.VerdictBulk) // untagged: no PCP
	check(frame(true, 9), rules.VerdictHigh)  // untagged: ! --vlan-prio 1 matches it
	for pcp := range uint8(8) {
		want := map[bool]rules.Verdict{true: rules.VerdictHigh, false: rules.VerdictBulk}
		check(frame(false, 9, tag{10, pcp}), want[pcp == 5])
		check(frame(false, 9, tag{100, pcp}), want[pcp != 7])
		check(frame(false, 10, tag{100, pcp}), want[pcp == 5])
		check(frame(true, 9, tag{10, pcp}), want[pcp != 1])
		// QinQ: the outer tag's PCP, not the inner's
		check(frame(false, 9, tag{10, pcp}, tag{20, 5}), want[pcp == 5])
		check(frame(false, 9, tag{20, 5 ^ pcp&1}, tag{100, pcp}), want[5^pcp&1 == 5])
	}
}

// TestPriorityIfaceAndSet: -i and -m set in the priority table, in the
// live program: the class of packets by the interface they arrive on
// (a wildcard, a negation) and by the sets their addresses are in (and a
// set changed after the load, which the class follows without a
// recompile), as the reference and the Go twin say.
func TestPriorityIfaceAndSet(t *testing.T) {
	f := newFixture(t)
	if err := f.dp.SetPriority([]int{0}); err != nil {
		t.Fatal(err)
	}
	rs, err := rules.Parse("p", []byte("-A INPUT -j ACCEPT\n"+
		"-t xdpfw-priority -A PRIORITY -i eth1 -p udp --dport 7 -j HIGH\n"+
		"-t xdpfw-priority -A PRIORITY -i veth+ -m set --match-set plc src -j HIGH\n"+
		"-t xdpfw-priority -A PRIORITY ! -i eth0 -m set ! --match-set plc src -p tcp -j HIGH\n"), rules.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plc := prefixes("10.5.0.0/24")
	info := f.installWithSets(rs, map[string][]netip.Prefix{"plc": plc})
	check := func(p *packet.Packet, iface string, want rules.Verdict) {
		t.Helper()
		got, classed := f.liveClass(p, iface)
		ref := compile.RefPacketOf(p, iface)
		ref.Sets = map[string]compile.RefSet{"plc": {Family: rules.FamilyIPv4, Contains: func(a netip.Addr) bool {
			return slices.ContainsFunc(plc, func(q netip.Prefix) bool { return q.Contains(a) })
		}}}
		twin := f.tables.Priority(&ref, compile.Dev{In: f.ifaces[iface]})
		if ref := compile.PriorityOf(f.rs, ref); !classed || got != want || ref != want || twin != want {
			t.Errorf("%s on %s: data plane %v (classed %v), reference %v, twin %v; want %v", p, iface, got, classed, ref, twin, want)
		}
	}
	udp7 := v4pkt(17, "10.1.2.3", "10.9.9.9", 1, 7)
	plcTCP := v4pkt(6, "10.5.0.9", "10.9.9.9", 1, 502)
	other := v4pkt(6, "10.6.0.9", "10.9.9.9", 1, 502)
	for _, c := range []struct {
		p     *packet.Packet
		iface string
		want  rules.Verdict
	}{
		{udp7, "eth1", rules.VerdictHigh}, {udp7, "eth0", rules.VerdictBulk}, {udp7, "veth0", rules.VerdictBulk},
		{plcTCP, "veth0", rules.VerdictHigh}, {plcTCP, "eth0", rules.VerdictBulk}, {plcTCP, "eth1", rules.VerdictBulk},
		{other, "eth1", rules.VerdictHigh}, {other, "veth0", rules.VerdictHigh}, {other, "eth0", rules.VerdictBulk},
	} {
		check(c.p, c.iface, c.want)
	}
	// a set's contents change without a recompile: the class follows
	plc = append(plc, netip.MustParsePrefix("10.6.0.0/24"))
	if err := f.dp.Sets().Insert(datapath.NewElems(info["plc"].ID, plc[1:])); err != nil {
		t.Fatal(err)
	}
	check(other, "veth0", rules.VerdictHigh)
	check(other, "eth1", rules.VerdictBulk)
}
