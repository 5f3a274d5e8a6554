package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image/png"
	"math/bits"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/internal/rules"
	"github.com/xdpfw/xdpfw/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.RunWithFDCheck(m)) }

// leftovers lists what a macro run of this process may leave behind: its
// namespaces, the NAPI thread of its veth (gone only when the veth is),
// and private bpffs mounts.
func leftovers(t *testing.T) []string {
	t.Helper()
	var out []string
	pid := os.Getpid()
	for _, role := range []string{"gen", "dut", "sink"} {
		name := fmt.Sprintf("%s%s-%d", NetNSPrefix, role, pid)
		if _, err := os.Lstat(filepath.Join(netnsDir, name)); err == nil {
			out = append(out, "namespace "+name)
		}
	}
	topo := &Topology{DUTIf: Iface{Name: fmt.Sprintf("xbd%d", pid)}}
	if pid, err := topo.NAPIThread(); err == nil {
		out = append(out, fmt.Sprintf("NAPI thread %d of the DUT veth", pid))
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(mi), "\n") {
		for _, prefix := range []string{bpffsPrefix, sysfsPrefix} {
			if strings.Contains(l, fmt.Sprintf("%s%d-", prefix, pid)) {
				out = append(out, "mount "+l)
			}
		}
	}
	return out
}

// TestSweepStale: the namespaces and mounts of a run that was killed (its
// pid is gone) are removed by the next run; those of live runs are not.
func TestSweepStale(t *testing.T) {
	testutil.RequireRoot(t)
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	deadPID := cmd.Process.Pid
	stale := fmt.Sprintf("%sgen-%d", NetNSPrefix, deadPID)
	live := fmt.Sprintf("%sgen-%d", NetNSPrefix, 1) // pid 1 never goes away
	topo := &Topology{}
	defer topo.Close()
	for _, name := range []string{stale, live} {
		if _, err := topo.newNamespace(name); err != nil {
			t.Fatal(err)
		}
	}
	mnt, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", bpffsPrefix, deadPID))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("bpf", mnt, "bpf", 0, ""); err != nil {
		t.Fatal(err)
	}
	defer func() { unix.Unmount(mnt, unix.MNT_DETACH); os.Remove(mnt) }()

	gone := SweepStale()
	want := []string{"namespace " + stale, "mount " + mnt}
	if !slices.Equal(gone, want) {
		t.Errorf("swept %q, want %q", gone, want)
	}
	if _, err := os.Stat(filepath.Join(netnsDir, live)); err != nil {
		t.Errorf("the live run's namespace was removed: %v", err)
	}
	if _, err := os.Stat(mnt); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale mount point %s still there: %v", mnt, err)
	}
}

// testDUTs are the XDP DUTs and the netfilter ones installed here that the
// tests run.
func testDUTs() []string {
	duts := []string{DUTDrop, DUTXdpfw}
	for _, d := range []string{DUTIptablesNFT, DUTNftLinear, DUTNftSet} {
		if slices.Contains(AvailableDUTs(), d) {
			duts = append(duts, d)
		}
	}
	return duts
}

// TestMacroRuns runs a tiny macro benchmark and checks what it claims:
// packets were generated, delivered, and dropped by each DUT's intended
// rule, every count adds up, and nothing is left behind. Timing values
// are not judged.
func TestMacroRuns(t *testing.T) {
	testutil.RequireRoot(t)
	duts := testDUTs()
	var progress bytes.Buffer
	res, err := Macro(context.Background(), MacroOptions{Rules: []int{100}, Sizes: []int{64}, DUTs: duts,
		Duration: 300 * time.Millisecond, Rounds: 2, Progress: &progress})
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	if l := leftovers(t); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
	if !slices.Equal(res.DUTs, duts) || len(res.Points) != len(duts) {
		t.Fatalf("DUTs %v, %d points; want %v", res.DUTs, len(res.Points), duts)
	}
	for _, p := range res.Points {
		if len(p.Runs) != 2 {
			t.Errorf("%s: %d runs, want 2", p.DUT, len(p.Runs))
		}
		for i, r := range p.Runs {
			switch {
			case r.Offered == 0 || r.Delivered == 0:
				t.Errorf("%s run %d: nothing generated or delivered: %+v", p.DUT, i, r)
			case r.Delivered+r.RingDropped != r.Offered:
				t.Errorf("%s run %d: offered %d != delivered %d + dropped at the veth %d", p.DUT, i, r.Offered, r.Delivered, r.RingDropped)
			case r.Dropped != r.Delivered:
				t.Errorf("%s run %d: the intended rule dropped %d of %d delivered", p.DUT, i, r.Dropped, r.Delivered)
			case r.NAPINS == 0 || r.WindowS < r.GenS || r.GenS <= 0:
				t.Errorf("%s run %d: CPU time or window missing: %+v", p.DUT, i, r)
			}
		}
		if p.DroppedMpps <= 0 || p.NSPerPacket <= 0 || p.RateVsFloor <= 0 || p.CostVsFloor <= 0 {
			t.Errorf("%s: medians or ratios missing: %+v", p.DUT, p)
		}
	}
	if len(res.Summary) != 1 || res.Summary[0].FloorRate <= 0 {
		t.Fatalf("summary %+v", res.Summary)
	}
	for _, d := range duts[2:] {
		if v := res.Summary[0].Vs(d); v.Rate <= 0 || v.Cost <= 0 {
			t.Errorf("no ratio to %s: %+v", d, res.Summary[0])
		}
	}
	for _, want := range []string{"check xdpfw", "check xdp-drop", "[  1/", "ETA"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}

	// The outputs: a table line per point, and a report with its plots.
	var table strings.Builder
	WriteMacroTable(&table, res)
	for _, d := range duts {
		if !strings.Contains(table.String(), " "+d+" ") {
			t.Errorf("table lacks %s:\n%s", d, table.String())
		}
	}
	dir := t.TempDir()
	if err := WriteMacroReport(dir, res); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"index.html", "results.json", "rate-64.png", "cost-64.png", "floor-64.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("report file %s: %v", f, err)
		}
	}
}

// TestMacroInterrupted: ending the context (what Ctrl-C does) stops a run
// in its first measurement, and everything is removed.
func TestMacroInterrupted(t *testing.T) {
	testutil.RequireRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &watchWriter{want: "measuring:", seen: cancel}
	_, err := Macro(ctx, MacroOptions{Rules: []int{10}, Sizes: []int{64}, DUTs: []string{DUTDrop, DUTXdpfw},
		Duration: time.Minute, Rounds: 1, Progress: w})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want an interrupted run", err)
	}
	if l := leftovers(t); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
}

// watchWriter calls seen once something containing want is written.
type watchWriter struct {
	mu   sync.Mutex
	want string
	seen func()
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen != nil && bytes.Contains(p, []byte(w.want)) {
		w.seen()
		w.seen = nil
	}
	return len(p), nil
}

// TestTrafficgenNewFlows runs the generator program (plain BPF_PROG_RUN,
// frame out) and checks that every packet is a new flow with valid
// headers: source port from the sequence, then the next source address.
func TestTrafficgenNewFlows(t *testing.T) {
	testutil.RequireRoot(t)
	topo := &Topology{GenIf: Iface{Index: 1, MAC: []byte{2, 0, 0, 0, 0, 1}}, DUTIf: Iface{MAC: []byte{2, 0, 0, 0, 0, 2}}}
	g, err := NewGenerator(topo, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	frame, err := g.Frame(64)
	if err != nil {
		t.Fatal(err)
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	base := TrafficSrc.Addr()
	hosts := uint64(1) << (32 - TrafficSrc.Bits())
	for _, c := range []struct {
		seq   uint64
		src   netip.Addr
		sport uint16
	}{
		{0, base, 0},
		{1, base, 1},
		{65535, base, 65535},
		{65536, base.Next(), 0},
		{3*65536 + 7, base.Next().Next().Next(), 7},
		{hosts * 65536, base, 0}, // wraps to the first address
	} {
		if err := setSeq(g, c.seq); err != nil {
			t.Fatal(err)
		}
		out := make([]byte, len(frame))
		ret, err := g.objs.Trafficgen.Run(&ebpf.RunOptions{Data: frame, DataOut: out})
		if err != nil {
			t.Fatal(err)
		}
		if ret != 4 { // XDP_REDIRECT
			t.Fatalf("seq %d: XDP action %d, want XDP_REDIRECT", c.seq, ret)
		}
		p, err := packet.Decode(out)
		if err != nil {
			t.Fatalf("seq %d: %v", c.seq, err)
		}
		if p.Src != c.src || p.SPort != c.sport || p.Dst != dutAddr.Addr() || p.DPort != TrafficDPort || len(out) != 64 {
			t.Errorf("seq %d: %s, want from %v port %d", c.seq, p, c.src, c.sport)
		}
		if sum := packet.Checksum(out[14:34]); sum != 0 {
			t.Errorf("seq %d: IPv4 header checksum does not verify (%#x)", c.seq, sum)
		}
		// Every CPU's counter was set to seq; the one that ran counted one more.
		if sent, _ := g.Sent(); sent != c.seq*uint64(ncpu)+1 {
			t.Errorf("seq %d: counters sum to %d after the run", c.seq, sent)
		}
	}
}

// setSeq sets the generator's sequence (its packet counter) on every CPU.
func setSeq(g *Generator, seq uint64) error {
	n, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	per := make([]trafficgenBenchCounter, n)
	for i := range per {
		per[i].Packets = seq
	}
	return g.objs.GenStats.Put(uint32(0), per)
}

func TestMacroRuleSet(t *testing.T) {
	for _, n := range []int{1, 2, 1000, MaxMacroRules} {
		rs, err := rules.Parse("bench", []byte(MacroRuleSet(n)), rules.ParseOptions{Family: rules.FamilyIPv4})
		if err != nil {
			t.Fatalf("%d rules: %v", n, err)
		}
		if len(rs.Rules) != n {
			t.Fatalf("%d rules parsed, want %d", len(rs.Rules), n)
		}
		srcs := map[string]bool{}
		for _, r := range rs.Rules {
			srcs[r.String()] = true
		}
		if len(srcs) != n {
			t.Errorf("%d rules: %d distinct", n, len(srcs))
		}
	}
	save := "# Generated by iptables-nft-save v1.8.9\n*filter\n:INPUT ACCEPT [0:0]\n" +
		"[3:156] -A INPUT -s 10.201.0.0/32 -p udp -m udp --dport 1000 -j DROP\n" +
		"[123456:7901184] " + lastRule + "\nCOMMIT\n"
	if n, err := lastRuleCounter([]byte(save), false); err != nil || n != 123456 {
		t.Errorf("lastRuleCounter: %d, %v", n, err)
	}
	if _, err := lastRuleCounter([]byte("*filter\nCOMMIT\n"), false); err == nil {
		t.Error("lastRuleCounter found a rule in an empty table")
	}
}

// TestNftRuleSets checks the nftables rule sets: as many rules (linear) or
// set elements (set) as MacroRuleSet has rules, in the same order and with
// the same pairs, one counter on the intended rule; and nftCounter.
func TestNftRuleSets(t *testing.T) {
	ipt := strings.Split(strings.TrimSpace(MacroRuleSet(300)), "\n")
	ipt = ipt[4 : len(ipt)-1] // the -A lines
	pair := regexp.MustCompile(`-s (\S+?)(/32)? -p udp -m udp --dport (\d+)`)
	var want []string
	for _, l := range ipt {
		m := pair.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("unexpected rule %q", l)
		}
		want = append(want, m[1]+" "+m[3])
	}
	linear := regexp.MustCompile(`(?m)^\s+ip saddr (\S+) udp dport (\d+) (counter )?drop$`)
	set := regexp.MustCompile(`(?m)^\s+(\S+) \. (\d+),?$`)
	for name, c := range map[string]struct {
		text string
		re   *regexp.Regexp
	}{"linear": {NftLinearRuleSet(300), linear}, "set": {NftSetRuleSet(300), set}} {
		var got []string
		for _, m := range c.re.FindAllStringSubmatch(c.text, -1) {
			got = append(got, m[1]+" "+m[2])
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %d pairs, want the %d of MacroRuleSet in order:\n%s", name, len(got), len(want), c.text)
		}
		if n := strings.Count(c.text, "counter"); n != 1 {
			t.Errorf("%s: %d counters, want 1", name, n)
		}
	}
	list := "table ip xdpfw_bench {\n\tchain input {\n\t\tip saddr . udp dport @blocked counter packets 4242 bytes 2 drop\n\t}\n}\n"
	if n, err := nftCounter([]byte(list), false); err != nil || n != 4242 {
		t.Errorf("nftCounter: %d, %v", n, err)
	}
	if _, err := nftCounter([]byte("table ip xdpfw_bench {\n}\n"), false); err == nil {
		t.Error("nftCounter found a counter in an empty table")
	}
}

func TestChartPNG(t *testing.T) {
	c := &Chart{Title: "t", XLabel: "rules", YLabel: "Mpps", LogX: true, LogY: true, HLines: []float64{0.5},
		Series: []Series{{Name: "a", Color: seriesColors[DUTXdpfw], X: []float64{1, 100, 10000}, Y: []float64{3, 2.5, 0}}}}
	b, err := c.PNG()
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds().Dx() != chartW || img.Bounds().Dy() != chartH {
		t.Fatalf("size %v", img.Bounds())
	}
	found := false
	for y := 0; y < chartH && !found; y++ {
		for x := padL; x < chartW-padR && !found; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			col := seriesColors[DUTXdpfw]
			found = r>>8 == uint32(col.R) && g>>8 == uint32(col.G) && bl>>8 == uint32(col.B)
		}
	}
	if !found {
		t.Error("the series is not drawn")
	}
	if got := ticks(0, 4, true); len(got) != 5 || got[4] != 10000 {
		t.Errorf("log ticks %v", got)
	}
	if got := ticks(0, 1.1, false); len(got) < 3 || got[0] != 0 {
		t.Errorf("linear ticks %v", got)
	}
}

// TestMacroAimsWalkEveryRule: the spread traffic's pairs hit every rule of
// MacroRuleSet once (the reference matcher decides each by its rule), in
// a random order.
func TestMacroAimsWalkEveryRule(t *testing.T) {
	for _, n := range []int{1, 2, 300} {
		rs, err := rules.Parse("bench", []byte(MacroRuleSet(n)), rules.ParseOptions{Family: rules.FamilyIPv4})
		if err != nil {
			t.Fatal(err)
		}
		aims := macroAims(n)
		hit := make([]bool, n)
		var order []int
		for _, a := range aims {
			var src [4]byte
			binary.NativeEndian.PutUint32(src[:], a.Saddr)
			p := compile.RefPacket{Chain: rules.ChainInput, Src: netip.AddrFrom4(src), Dst: dutAddr.Addr(), Proto: packet.ProtoUDP,
				L4: true, SPort: 1234, DPort: bits.ReverseBytes16(a.Dport)}
			i, v := compile.Evaluate(rs, p)
			if i < 0 || hit[i] || v != rules.VerdictDrop {
				t.Fatalf("%d rules: %v port %d decided by rule %d (%v), hit before: %v", n, p.Src, p.DPort, i, v, i >= 0 && hit[i])
			}
			hit[i] = true
			order = append(order, i)
		}
		if len(aims) != n || !slices.Equal(hit, slices.Repeat([]bool{true}, n)) {
			t.Errorf("%d rules: %d aims", n, len(aims))
		}
		if n > 2 && slices.IsSorted(order) {
			t.Errorf("%d rules: aims in rule order", n)
		}
	}
}

// TestTrafficgenSpread: with aims, packet seq takes the source address and
// port of aim seq mod K, with a valid IPv4 header checksum; without, the
// old traffic.
func TestTrafficgenSpread(t *testing.T) {
	testutil.RequireRoot(t)
	topo := &Topology{GenIf: Iface{Index: 1, MAC: []byte{2, 0, 0, 0, 0, 1}}, DUTIf: Iface{MAC: []byte{2, 0, 0, 0, 0, 2}}}
	aims := macroAims(5)
	g, err := NewGenerator(topo, len(aims))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	frame, err := g.Frame(64)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Aim(aims); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{0, 1, 4, 5, 12} {
		if err := setSeq(g, seq); err != nil {
			t.Fatal(err)
		}
		out := make([]byte, len(frame))
		if _, err := g.objs.Trafficgen.Run(&ebpf.RunOptions{Data: frame, DataOut: out}); err != nil {
			t.Fatal(err)
		}
		a := aims[seq%5]
		if binary.NativeEndian.Uint32(out[14+12:]) != a.Saddr || binary.NativeEndian.Uint16(out[14+20+2:]) != a.Dport {
			t.Errorf("seq %d: % x, want aim %+v", seq, out[14+12:14+24], a)
		}
		if sum := packet.Checksum(out[14:34]); sum != 0 {
			t.Errorf("seq %d: IPv4 header checksum does not verify (%#x)", seq, sum)
		}
	}
	if err := g.Aim(nil); err != nil {
		t.Fatal(err)
	}
	if err := setSeq(g, 65536); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, len(frame))
	if _, err := g.objs.Trafficgen.Run(&ebpf.RunOptions{Data: frame, DataOut: out}); err != nil {
		t.Fatal(err)
	}
	if p, _ := packet.Decode(out); p.Src != TrafficSrc.Addr().Next() || p.DPort != TrafficDPort {
		t.Errorf("without aims: %s", p)
	}
}

// TestMacroSpreadRuns: a spread run adds up (every delivered packet
// dropped by some rule, each DUT's counts checked by Macro) for the XDP
// DUTs and the netfilter ones installed here.
func TestMacroSpreadRuns(t *testing.T) {
	testutil.RequireRoot(t)
	duts := testDUTs()
	var progress bytes.Buffer
	res, err := Macro(context.Background(), MacroOptions{Rules: []int{50}, Sizes: []int{64}, DUTs: duts,
		Duration: 200 * time.Millisecond, Rounds: 1, Progress: &progress, Spread: true})
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	if !res.Spread || len(res.Points) != len(duts) {
		t.Fatalf("%+v", res)
	}
	for _, p := range res.Points {
		if r := p.Runs[0]; r.Dropped == 0 || r.Dropped != r.Delivered {
			t.Errorf("%s: dropped %d of %d delivered", p.DUT, r.Dropped, r.Delivered)
		}
	}
	var table strings.Builder
	WriteMacroTable(&table, res)
	if !strings.Contains(table.String(), "--spread") {
		t.Errorf("table:\n%s", table.String())
	}
}

func TestCountersSummed(t *testing.T) {
	save := "*filter\n:INPUT ACCEPT [0:0]\n[3:120] -A INPUT -s 10.201.0.0/32 -p udp -m udp --dport 1000 -j DROP\n[4:160] " + lastRule + "\nCOMMIT\n"
	if n, err := lastRuleCounter([]byte(save), true); err != nil || n != 7 {
		t.Errorf("lastRuleCounter, all: %d, %v", n, err)
	}
	if n, err := lastRuleCounter([]byte(save), false); err != nil || n != 4 {
		t.Errorf("lastRuleCounter: %d, %v", n, err)
	}
	list := "table ip xdpfw_bench {\n\tchain input {\n\t\tip saddr 10.201.0.0 udp dport 1000 counter packets 5 bytes 1 drop\n" +
		"\t\tip saddr 10.200.128.0/17 udp dport 9 counter packets 6 bytes 1 drop\n\t}\n}\n"
	if n, err := nftCounter([]byte(list), true); err != nil || n != 11 {
		t.Errorf("nftCounter, all: %d, %v", n, err)
	}
	if _, err := nftCounter([]byte(list), false); err == nil {
		t.Error("nftCounter took two counters for one")
	}
	if !strings.Contains(nftLinearRuleSet(3, true), "dport 1000 counter drop") || strings.Contains(NftLinearRuleSet(3), "dport 1000 counter") {
		t.Error("nft-linear counters")
	}
}
