package bench

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/latency"
)

// The cache-cold measurement (`bench micro --cold N`, docs/realtime.md,
// Worst-case work per packet): before each packet, the benchmark reads a
// buffer twice the size of the last-level cache on the CPU that then runs
// the packet, so that the packet finds none of xdpfw's tables in any
// cache (nor their page-table entries in the TLB), then runs that one
// packet with BPF_PROG_TEST_RUN (repeat 1). Two clocks time it:
// BPF_PROG_TEST_RUN's duration (the kernel's, around the one run: it
// includes the test loop's own cost, which the same series with an empty
// program measures) and xdpfw's own latency histogram (sampling every
// packet: the in-program time of issue 17's first bar).

// emptyXDP is an XDP program that passes every packet at once.
func emptyXDP() (*ebpf.Program, error) {
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}}) // XDP_PASS
	if err != nil {
		return nil, fmt.Errorf("loading an empty XDP program: %w", err)
	}
	return p, nil
}

// ColdStats are exact percentiles of per-packet times in ns.
type ColdStats struct {
	Mean float64 `json:"mean_ns"`
	P50  float64 `json:"p50_ns"`
	P99  float64 `json:"p99_ns"`
	P999 float64 `json:"p99_9_ns"`
	Max  float64 `json:"max_ns"`
}

func coldStats(v []float64) ColdStats {
	if len(v) == 0 {
		return ColdStats{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	at := func(q float64) float64 { // the sample of rank ceil(q n)
		i := int(q*float64(len(s))+0.999999) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	var sum float64
	for _, x := range s {
		sum += x
	}
	return ColdStats{Mean: sum / float64(len(s)), P50: at(0.5), P99: at(0.99), P999: at(0.999), Max: s[len(s)-1]}
}

// ColdResult is one rule set's cache-cold packets.
type ColdResult struct {
	Packets    int   `json:"packets"`     // packets (the spread frames in turn), each after an eviction
	EvictBytes int64 `json:"evict_bytes"` // the buffer read before each packet
	CPU        int   `json:"cpu"`
	// Kernel: BPF_PROG_TEST_RUN's duration of each packet through xdpfw;
	// Empty: the same with an empty program (the test loop's own cost,
	// cold too), the same frames and evictions.
	Kernel ColdStats `json:"kernel"`
	Empty  ColdStats `json:"empty"`
	// Unsampled: Kernel with latency sampling off (the histogram's own
	// clock reads and update left out), the same frames and evictions.
	Unsampled ColdStats `json:"unsampled"`
	// InProgram: xdpfw's own time of each of the same packets (every
	// packet timed: the growth of its histograms' sum, exact ns); Clean:
	// of those, the packets no interrupt reached the CPU during
	// (Interrupted: the others; the CPU's counts in /proc/interrupts read
	// just before and after the run).
	InProgram   ColdStats `json:"in_program"`
	Clean       ColdStats `json:"in_program_uninterrupted"`
	Interrupted int       `json:"interrupted"`
	// Warm: the kernel's duration of the same frames without eviction
	// (each run once, in the same order: consecutive packets at
	// different rules, the tables as warm as the test loop leaves them).
	Warm ColdStats `json:"warm"`
	// The packets whose walk takes the most steps (compile.Work.Steps:
	// node steps and candidates) among all the frames aimed, and their
	// cold times (kernel duration), each measured WorstRuns times.
	WorstSteps int       `json:"worst_steps"`
	WorstN     int       `json:"worst_frames"`
	Worst      ColdStats `json:"worst"`
	// BoundSteps is the rule set's bound (Tables.Work: levels +
	// candidates): what no packet can exceed.
	BoundSteps int `json:"bound_steps"`
}

// worstRuns is how many times each worst-path frame is measured cold.
const worstRuns = 50

// llcBytes is the size of the largest cache of cpu (sysfs), 32 MiB when
// it cannot be read.
func llcBytes(cpu int) int64 {
	best := int64(0)
	for i := 0; i < 8; i++ {
		b, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/cpu/cpu%d/cache/index%d/size", cpu, i))
		if err != nil {
			break
		}
		s := strings.TrimSpace(string(b))
		mult := int64(1)
		switch {
		case strings.HasSuffix(s, "K"):
			mult, s = 1<<10, strings.TrimSuffix(s, "K")
		case strings.HasSuffix(s, "M"):
			mult, s = 1<<20, strings.TrimSuffix(s, "M")
		}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			best = max(best, n*mult)
		}
	}
	if best == 0 {
		best = 32 << 20
	}
	return best
}

// evictor reads a buffer larger than the caches.
type evictor struct {
	buf  []byte
	sink byte
}

func newEvictor(bytes int64) *evictor {
	e := &evictor{buf: make([]byte, bytes)}
	for i := range e.buf { // fault the pages in now
		e.buf[i] = byte(i)
	}
	return e
}

// evict reads a byte of every 64-byte line (the lines of all the caches'
// sets, and a page-table walk per page: the TLB too).
func (e *evictor) evict() {
	var x byte
	for i := 0; i < len(e.buf); i += 64 {
		x += e.buf[i]
	}
	e.sink += x
}

// pinned runs f on one CPU (the last one this thread may use), the thread
// locked to it, and restores the thread's CPUs after.
func pinned(f func(cpu int) error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return fmt.Errorf("sched_getaffinity: %w", err)
	}
	cpu := -1
	for c := 0; c < 1024; c++ {
		if old.IsSet(c) {
			cpu = c
		}
	}
	var one unix.CPUSet
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		return fmt.Errorf("sched_setaffinity: %w", err)
	}
	defer unix.SchedSetaffinity(0, &old) //nolint:errcheck // best effort: the thread is unlocked after
	return f(cpu)
}

// measureCold measures n packets, aims' frames in their random order
// (again from the first when n is larger), cache-cold through dp's XDP
// program and through empty (an XDP program returning at once), and the
// aims whose walks take the most steps.
func measureCold(dp *datapath.Datapath, empty *ebpf.Program, aims []aim, n int, bound int) (*ColdResult, error) {
	res := &ColdResult{Packets: n, BoundSteps: bound}
	xdp := dp.Program()
	frame := func(i int) []byte { return aims[i%len(aims)].frame }
	err := pinned(func(cpu int) error {
		res.CPU = cpu
		res.EvictBytes = 2 * llcBytes(cpu)
		ev := newEvictor(res.EvictBytes)
		// series runs p on frames(i) for i < n, each one alone, after an
		// eviction when cold, and returns BPF_PROG_TEST_RUN's durations;
		// each(i, ns) sees each packet once its run is over.
		series := func(p *ebpf.Program, count int, frames func(int) []byte, cold bool, each func(int, float64) error) ([]float64, error) {
			var out []float64
			for i := 0; i < count; i++ {
				if cold {
					ev.evict()
				}
				_, d, err := p.Benchmark(frames(i), 1, nil)
				if err != nil {
					return nil, fmt.Errorf("BPF_PROG_TEST_RUN: %w", err)
				}
				out = append(out, float64(d.Nanoseconds()))
				if each != nil {
					if err := each(i, float64(d.Nanoseconds())); err != nil {
						return nil, err
					}
				}
			}
			return out, nil
		}
		warm, err := series(xdp, n, frame, false, nil) // consecutive frames, no eviction
		if err != nil {
			return err
		}
		if err := dp.ResetLatency(); err != nil {
			return err
		}
		if err := dp.SetLatencySample(1); err != nil {
			return err
		}
		defer dp.SetLatencySample(0) //nolint:errcheck // the datapath is the benchmark's own
		var prev latency.Hist
		var irqs uint64
		var prog, clean []float64
		// every packet timed: its in-program time is what the histograms'
		// sum grew by; the CPU's interrupts are read around its run
		// (cpuInterrupts before the run: in frames, after the eviction)
		kern, err := series(xdp, n, func(i int) []byte {
			irqs, _ = cpuInterrupts(cpu)
			return frame(i)
		}, true, func(i int, _ float64) error {
			after, err := cpuInterrupts(cpu)
			if err != nil {
				return err
			}
			h, err := latencyTotal(dp)
			if err != nil {
				return err
			}
			if h.Count != prev.Count+1 {
				return fmt.Errorf("cold packet %d: the latency histograms counted %d packets, want 1", i, h.Count-prev.Count)
			}
			ns := float64(h.Sum - prev.Sum)
			prev = h
			prog = append(prog, ns)
			if after != irqs {
				res.Interrupted++
			} else {
				clean = append(clean, ns)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := dp.SetLatencySample(0); err != nil {
			return err
		}
		res.InProgram, res.Clean = coldStats(prog), coldStats(clean)
		unsampled, err := series(xdp, n, frame, true, nil)
		if err != nil {
			return err
		}
		emp, err := series(empty, n, frame, true, nil)
		if err != nil {
			return err
		}
		res.Kernel, res.Empty, res.Warm, res.Unsampled = coldStats(kern), coldStats(emp), coldStats(warm), coldStats(unsampled)
		// the frames whose walk is the longest, at most 16 of them, each
		// run worstRuns times
		var worst []aim
		for _, a := range aims {
			res.WorstSteps = max(res.WorstSteps, a.walk.Steps())
		}
		for _, a := range aims {
			if a.walk.Steps() == res.WorstSteps && len(worst) < 16 {
				worst = append(worst, a)
			}
		}
		res.WorstN = len(worst)
		ws, err := series(xdp, len(worst)*worstRuns, func(i int) []byte { return worst[i/worstRuns].frame }, true, nil)
		if err != nil {
			return err
		}
		res.Worst = coldStats(ws)
		return nil
	})
	return res, err
}

// cpuInterrupts is the interrupts cpu has taken: its column of
// /proc/interrupts, summed.
func cpuInterrupts(cpu int) (uint64, error) {
	b, err := os.ReadFile("/proc/interrupts")
	if err != nil {
		return 0, err
	}
	lines := strings.Split(string(b), "\n")
	col := slices.Index(strings.Fields(lines[0]), fmt.Sprintf("CPU%d", cpu))
	if col < 0 {
		return 0, fmt.Errorf("/proc/interrupts has no column for CPU%d", cpu)
	}
	var sum uint64
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) > col+1 {
			if v, err := strconv.ParseUint(f[col+1], 10, 64); err == nil {
				sum += v
			}
		}
	}
	return sum, nil
}

// latencyTotal is the sum of every latency histogram of dp.
func latencyTotal(dp *datapath.Datapath) (latency.Hist, error) {
	hs, err := dp.Latency()
	if err != nil {
		return latency.Hist{}, err
	}
	var t latency.Hist
	for i := range hs {
		t.Merge(&hs[i].Hist)
	}
	return t, nil
}

// WriteColdTable prints the cache-cold measurement, when made.
func WriteColdTable(w io.Writer, res []*MicroResult) {
	if len(res) == 0 || res[0].Cold == nil {
		return
	}
	c0 := res[0].Cold
	fmt.Fprintf(w, "\ncache-cold: %d packets (the spread frames in turn, aimed at different rules), each run alone (repeat 1) after reading %d MiB on CPU %d;\n",
		c0.Packets, c0.EvictBytes>>20, c0.CPU)
	fmt.Fprintln(w, "xdpfw's own time per packet (prog: all packets; clean: those no interrupt reached), and BPF_PROG_TEST_RUN's (run):")
	fmt.Fprintf(w, "%-6s %-15s %8s %5s %5s | %7s %7s %7s %7s %7s | %5s %7s %7s %7s %7s %7s | %7s %7s %7s %7s | %7s %7s %7s %7s | %5s %7s %7s\n",
		"family", "ruleset", "rules", "bound", "worst",
		"prog50", "prog99", "p99.9", "progmax", "p999/50",
		"intr", "cln50", "cln99", "c99.9", "clnmax", "c999/50",
		"warm50", "w99.9", "run50", "r99.9",
		"nosmp50", "nosmp999", "empty50", "e99.9",
		"n_wst", "wst50", "wstmax")
	for _, r := range res {
		c := r.Cold
		if c == nil {
			continue
		}
		ratio := func(s ColdStats) float64 {
			if s.P50 == 0 {
				return 0
			}
			return s.P999 / s.P50
		}
		fmt.Fprintf(w, "%-6s %-15s %8d %5d %5d | %7.0f %7.0f %7.0f %7.0f %6.1fx | %5d %7.0f %7.0f %7.0f %7.0f %6.1fx | %7.0f %7.0f %7.0f %7.0f | %7.0f %7.0f %7.0f %7.0f | %5d %7.0f %7.0f\n",
			r.Family, r.RuleSet, r.Rules, c.BoundSteps, c.WorstSteps,
			c.InProgram.P50, c.InProgram.P99, c.InProgram.P999, c.InProgram.Max, ratio(c.InProgram),
			c.Interrupted, c.Clean.P50, c.Clean.P99, c.Clean.P999, c.Clean.Max, ratio(c.Clean),
			c.Warm.P50, c.Warm.P999, c.Kernel.P50, c.Kernel.P999,
			c.Unsampled.P50, c.Unsampled.P999, c.Empty.P50, c.Empty.P999,
			c.WorstN, c.Worst.P50, c.Worst.Max)
	}
	fmt.Fprintln(w, "ns per packet. bound: the rule set's most node steps + candidates one packet can take (compile.Work); worst:")
	fmt.Fprintln(w, "the most any aimed frame takes. prog: xdpfw's latency histograms (every packet timed), exact per packet;")
	fmt.Fprintln(w, "intr: packets the CPU took an interrupt during (/proc/interrupts before and after), left out of cln.")
	fmt.Fprintln(w, "warm: BPF_PROG_TEST_RUN's duration of the same frames in turn without eviction; run: with it (the test")
	fmt.Fprintln(w, "loop's own cost included: empty, an empty program run cold); nosmp: run with latency sampling off;")
	fmt.Fprintf(w, "wst: the frames whose walk takes `worst` steps (n_wst of them, up to 16), each run cold %d times\n", worstRuns)
}
