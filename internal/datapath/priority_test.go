package datapath_test

import (
	"math/rand/v2"
	"runtime"
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
// over and the verdicts stay the same.
func TestPriorityCPUMap(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs: one receives, one takes the bulk class")
	}
	f := newFixture(t)
	f.installText(tableRules + "-t xdpfw-priority -A PRIORITY -p tcp --dport 22 -j HIGH\n" +
		"-t xdpfw-priority -A PRIORITY -p icmp -j HIGH\n")
	peer, fw, far := f.peerPair()
	if err := f.ns.Do(func() error { _, err := f.dp.Attach(fw.Name, datapath.ModeNative); return err }); err != nil {
		t.Fatal(err)
	}
	ids := append([]uint32{compile.PolicyID(0, false), compile.PolicyID(0, true)}, f.ids...)
	frames := verdictPackets()
	high := func(p *packet.Packet) bool {
		return !p.MoreFragments && (p.Proto == 6 && p.DPort == 22 || p.Proto == 1)
	}
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
			want := f.mustRun(frame, fw.Name)
			st0, err := f.dp.PriorityCounters()
			if err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, f.dp, ids)
			sendRawOnCPU(t, peer, far.Index, frame, 0)
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
			st0, err := f.dp.PriorityCounters()
			if err != nil {
				t.Fatal(err)
			}
			frame := p.Bytes()
			if err := f.ns.Do(func() error {
				_, err := f.dp.Program().Run(&ebpf.RunOptions{Data: frame,
					Context: xdpCtx{DataEnd: uint32(len(frame)), IngressIfindex: f.ifaces[iface]}})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			st1, err := f.dp.PriorityCounters()
			if err != nil {
				t.Fatal(err)
			}
			dHigh, dBulk := sum(diff(st0.High, st1.High)), sum(diff(st0.Bulk, st1.Bulk))+sum(diff(st0.Fallback, st1.Fallback))
			ref := compile.RefPacketOf(p, iface)
			want, twin := compile.PriorityOf(rs, ref), f.tables.Priority(&ref, compile.Dev{In: f.ifaces[iface]})
			got := rules.VerdictHigh
			switch {
			case dHigh == 1 && dBulk == 0:
			case dHigh == 0 && dBulk == 1:
				got = rules.VerdictBulk
			case dHigh+dBulk == 0 && (ref.Src.IsLoopback() || ref.Proto == 0):
				continue // judged before the class (not IP, malformed, this host's answer)
			default:
				t.Fatalf("set %d: %s: high %d, bulk %d: want one class\n%s", set, p, dHigh, dBulk, rs)
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
