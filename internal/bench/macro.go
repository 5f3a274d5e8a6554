package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// MacroOptions configure a macro benchmark.
type MacroOptions struct {
	Rules    []int         // rule counts
	Sizes    []int         // Ethernet frame sizes in bytes (no FCS)
	DUTs     []string      // DUTs to measure; nil: every one available here
	Duration time.Duration // traffic per measurement
	Rounds   int           // interleaved rounds (every point once per round)
	Progress io.Writer     // progress lines (nil: none)
	// Spread: the traffic walks the whole rule set (one source address
	// and port per rule, in random order) instead of one /17 that the
	// last rule covers; every rule's counter counts.
	Spread bool
}

// MacroResult is a whole run.
type MacroResult struct {
	Command  string            `json:"command,omitempty"` // how to run it again
	Started  time.Time         `json:"started"`
	Elapsed  float64           `json:"elapsed_s"`
	Kernel   string            `json:"kernel"`
	CPUs     int               `json:"cpus"`
	GenCPU   int               `json:"generator_cpu"`
	DUTCPU   int               `json:"dut_cpu"`
	Load     [2]string         `json:"loadavg_before_after"` // /proc/loadavg, 1/5/15 min
	Rules    []int             `json:"rules"`
	Sizes    []int             `json:"sizes"`
	Duration float64           `json:"duration_s"`
	Rounds   int               `json:"rounds"`
	Spread   bool              `json:"spread"`
	DUTs     []string          `json:"duts"`
	Skipped  map[string]string `json:"skipped,omitempty"` // DUT -> why it was not measured
	Xdpfw    []XdpfwSetup      `json:"xdpfw_setup"`
	Points   []*MacroPoint     `json:"points"`
	Summary  []*MacroSummary   `json:"summary"`
}

// MacroPoint is one DUT at one rule count and frame size.
type MacroPoint struct {
	DUT   string     `json:"dut"`
	Rules int        `json:"rules"`
	Size  int        `json:"size"`
	Runs  []MacroRun `json:"runs"` // one per round
	// Medians over the rounds.
	OfferedMpps float64 `json:"offered_mpps"`
	DroppedMpps float64 `json:"dropped_mpps"`
	NSPerPacket float64 `json:"ns_per_packet"`      // DUT NAPI thread CPU time per dropped packet
	StatNS      float64 `json:"stat_ns_per_packet"` // DUT CPU softirq+system+irq (/proc/stat) per dropped packet
	Busy        float64 `json:"dut_busy"`           // NAPI thread CPU time / window
	// Median per-round ratios to the floor (xdp-drop) at the same point:
	// drop rate / the floor's, and the floor's ns/packet / this one's (the
	// share of the floor's capacity this DUT has per CPU). 1 = the floor.
	RateVsFloor float64 `json:"rate_vs_floor,omitempty"`
	CostVsFloor float64 `json:"cost_vs_floor,omitempty"`
}

// MacroRun is one measurement.
type MacroRun struct {
	Offered     uint64  `json:"offered"`       // packets the generator sent
	Delivered   uint64  `json:"delivered"`     // packets the DUT's veth took in (rx_packets)
	RingDropped uint64  `json:"ring_dropped"`  // packets the veth dropped, its ring full (rx_dropped)
	Dropped     uint64  `json:"dropped"`       // packets the DUT's intended rule dropped
	GenS        float64 `json:"generator_s"`   // how long the generator ran
	WindowS     float64 `json:"window_s"`      // generator start to the DUT's last packet
	NAPINS      uint64  `json:"napi_ns"`       // DUT NAPI thread CPU time
	StatBusyNS  float64 `json:"stat_busy_ns"`  // DUT CPU softirq+system+irq, /proc/stat
	StatTotalNS float64 `json:"stat_total_ns"` // DUT CPU, every state, /proc/stat
}

// accounted checks that every generated packet reached the DUT's veth or
// was dropped there for a full ring, and nothing else arrived.
func (r MacroRun) accounted() error {
	if r.Delivered+r.RingDropped != r.Offered {
		return fmt.Errorf("the generator sent %d packets, the DUT's veth received %d and dropped %d (full ring): %d unaccounted for",
			r.Offered, r.Delivered, r.RingDropped, int64(r.Offered)-int64(r.Delivered+r.RingDropped))
	}
	return nil
}

// offeredPPS is per second the generator ran; droppedPPS per second of
// window (generator start to the DUT's last packet).
func (r MacroRun) offeredPPS() float64 { return float64(r.Offered) / r.GenS }
func (r MacroRun) droppedPPS() float64 { return float64(r.Dropped) / r.WindowS }
func (r MacroRun) nsPerPacket() float64 {
	if r.Dropped == 0 {
		return 0
	}
	return float64(r.NAPINS) / float64(r.Dropped)
}

// MacroSummary compares xdpfw with the others at one rule count and size:
// median per-round ratios, rate (xdpfw's drop rate over the other's) and
// cost (the other's ns/packet over xdpfw's).
type MacroSummary struct {
	Rules            int           `json:"rules"`
	Size             int           `json:"size"`
	XdpfwDroppedMpps float64       `json:"xdpfw_dropped_mpps"`
	FloorRate        float64       `json:"vs_floor_rate,omitempty"`
	FloorCost        float64       `json:"vs_floor_cost,omitempty"`
	Versus           []MacroVersus `json:"versus,omitempty"` // the netfilter DUTs measured, in AllDUTs order
}

// MacroVersus is xdpfw against one netfilter DUT.
type MacroVersus struct {
	DUT  string  `json:"dut"`
	Rate float64 `json:"rate"`
	Cost float64 `json:"cost"`
}

// Vs is xdpfw against dut (zero if not measured).
func (s *MacroSummary) Vs(dut string) MacroVersus {
	for _, v := range s.Versus {
		if v.DUT == dut {
			return v
		}
	}
	return MacroVersus{}
}

// per-measurement overhead beyond the traffic (settling, counters,
// switching programs), for the estimate printed up front.
const measureOverhead = 300 * time.Millisecond

// EstimateMacro is about how long a run with opt takes with n DUTs.
func EstimateMacro(opt MacroOptions, duts int) time.Duration {
	m := opt.Rounds * len(opt.Rules) * len(opt.Sizes) * duts
	setup := 5 * time.Second
	for _, n := range opt.Rules {
		setup += time.Duration(n) * 50 * time.Microsecond // compile, install, restore
	}
	return time.Duration(m)*(opt.Duration+measureOverhead) + setup
}

// bench is the state of one macro run.
type bench struct {
	opt    MacroOptions
	ctx    context.Context
	topo   *Topology
	gen    *Generator
	napi   int // pid of the DUT's NAPI thread
	duts   []dut
	frames map[int][]byte
	say    func(format string, a ...any)
	aimed  int // the rule count the generator walks (Spread), 0: none yet
}

// aim makes the generator walk the rule set of n rules, with Spread.
func (b *bench) aim(n int) error {
	if !b.opt.Spread || b.aimed == n {
		return nil
	}
	if err := b.gen.Aim(macroAims(n)); err != nil {
		return err
	}
	b.aimed = n
	return nil
}

// Macro runs the macro benchmark: it builds the topology, loads the
// generator and every DUT, checks that each DUT drops the generated
// traffic with its intended rule, measures in interleaved rounds, and
// removes everything again, also on error or when ctx ends (Ctrl-C).
func Macro(ctx context.Context, opt MacroOptions) (res *MacroResult, err error) {
	b := &bench{opt: opt, ctx: ctx, frames: map[int][]byte{}, say: func(string, ...any) {}}
	if opt.Progress != nil {
		b.say = func(format string, a ...any) { fmt.Fprintf(opt.Progress, format+"\n", a...) }
	}
	if opt.Rounds < 1 || len(opt.Rules) == 0 || len(opt.Sizes) == 0 || opt.Duration <= 0 {
		return nil, errors.New("macro: rounds, rule counts, sizes and duration must be given")
	}
	for _, n := range opt.Rules {
		if n < 1 || n > MaxMacroRules {
			return nil, fmt.Errorf("rule count %d: want 1..%d", n, MaxMacroRules)
		}
	}
	for _, s := range opt.Sizes {
		if s < MinFrameSize || s > MaxFrameSize {
			return nil, fmt.Errorf("frame size %d: want %d..%d bytes", s, MinFrameSize, MaxFrameSize)
		}
	}
	res = &MacroResult{Started: time.Now(), CPUs: runtime.NumCPU(), Rules: opt.Rules, Sizes: opt.Sizes,
		Duration: opt.Duration.Seconds(), Rounds: opt.Rounds, Spread: opt.Spread, Skipped: map[string]string{}}
	res.Load[0], res.Kernel = runStart(b.say)

	// Topology, then everything in it; undone in reverse order.
	var undo undoSteps
	defer undo.run(&err)
	b.topo, err = NewTopology()
	if err != nil {
		return nil, err
	}
	undo = append(undo, b.topo.Close)
	res.GenCPU, res.DUTCPU = b.topo.GenCPU, b.topo.DUTCPU
	b.say("topology: %s (%s) <-> %s (%s); generator on CPU %d, DUT on CPU %d",
		b.topo.Gen.Name, b.topo.GenIf.Name, b.topo.DUT.Name, b.topo.DUTIf.Name, b.topo.GenCPU, b.topo.DUTCPU)

	pinRoot, unmount, err := privateBPFFS()
	if err != nil {
		return nil, err
	}
	undo = append(undo, unmount)
	maxAims := 0
	if opt.Spread {
		maxAims = slices.Max(opt.Rules)
	}
	if b.gen, err = NewGenerator(b.topo, maxAims); err != nil {
		return nil, err
	}
	undo = append(undo, func() error { b.gen.Close(); return nil })
	for _, s := range opt.Sizes {
		if b.frames[s], err = b.gen.Frame(s); err != nil {
			return nil, err
		}
	}
	progs, err := loadDUTPrograms(b.topo, nil)
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() error { progs.objs.Close(); return nil })
	l, err := attachXDP(b.topo.DUT, b.topo.DUTIf, progs.objs.BenchPass)
	if err != nil {
		return nil, err
	}
	undo = append(undo, l.l.Close)
	// With an XDP program on it, the DUT's veth has a NAPI instance; give
	// it its own thread, pinned to the DUT's CPU.
	if err := b.topo.SetThreadedNAPI(true); err != nil {
		return nil, err
	}
	if b.napi, err = b.topo.NAPIThread(); err != nil {
		return nil, err
	}

	want := opt.DUTs
	explicit := want != nil
	if !explicit {
		want = AllDUTs
	}
	stack := &stackState{loaded: map[string]int{}}
	for _, name := range want {
		var d dut
		switch name {
		case DUTDrop:
			d = &dropDUT{link: l, progs: progs}
		case DUTXdpfw, DUTXdpfwAudit:
			b.say("%s: compiling and installing %v rules", name, opt.Rules)
			// a pin root of its own: both may be measured
			x, setups, err := newXdpfwDUT(b.topo, l, filepath.Join(pinRoot, name), opt.Rules, b.frames[opt.Sizes[0]], opt.Spread,
				name == DUTXdpfwAudit)
			if err != nil {
				return nil, err
			}
			for _, s := range setups {
				b.say("  %6d rules: compiled in %.1f ms, installed in %.1f ms", s.Rules, s.CompileMS, s.InstallMS)
			}
			if name == DUTXdpfw {
				res.Xdpfw = setups
			}
			d = x
		case DUTIptablesNFT, DUTIptablesLegacy, DUTNftLinear, DUTNftSet:
			x, err := newStackDUT(ctx, name, b.topo, l, progs, stack, macroShape, opt.Spread)
			if err != nil {
				if explicit {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				res.Skipped[name] = err.Error()
				b.say("%s: not measured: %v", name, err)
				continue
			}
			d = x
		default:
			return nil, fmt.Errorf("unknown DUT %q (want %s)", name, strings.Join(AllDUTs, ", "))
		}
		undo = append(undo, func() error { d.close(); return nil })
		b.duts = append(b.duts, d)
		res.DUTs = append(res.DUTs, d.name())
	}
	if len(b.duts) == 0 {
		return nil, errors.New("no DUT to measure")
	}

	if err := b.sanity(); err != nil {
		return nil, err
	}
	if err := b.measureAll(res); err != nil {
		return nil, err
	}
	summarize(res)
	res.Load[1] = loadavg()
	res.Elapsed = time.Since(res.Started).Seconds()
	return res, nil
}

// sanityPackets is the burst sent to each DUT and rule count before
// measuring.
const sanityPackets = 20000

// sanity checks, for every rule count and DUT, that the generator sends,
// the veth delivers, and the DUT's intended rule drops what was delivered.
func (b *bench) sanity() error {
	frame := b.frames[b.opt.Sizes[0]]
	for _, n := range b.opt.Rules {
		for _, d := range b.duts {
			if err := b.ctx.Err(); err != nil {
				return fmt.Errorf("interrupted: %w", err)
			}
			if err := d.use(n); err != nil {
				return err
			}
			if err := b.aim(n); err != nil {
				return err
			}
			r, err := b.measure(d, func() (time.Duration, error) { return b.gen.RunPackets(frame, sanityPackets) })
			if err != nil {
				return fmt.Errorf("checking %s with %d rules: %w", d.name(), n, err)
			}
			if r.Offered != sanityPackets {
				return fmt.Errorf("checking %s with %d rules: the generator sent %d packets, want %d "+
					"(does this kernel run XDP programs in live-frames mode? it needs 5.18 or later)", d.name(), n, r.Offered, sanityPackets)
			}
			if r.Delivered == 0 {
				return fmt.Errorf("checking %s with %d rules: the generator sent %d packets, the DUT's veth received none "+
					"(native XDP redirect to a veth needs an XDP program on its peer)", d.name(), n, r.Offered)
			}
			if err := r.accounted(); err != nil {
				return fmt.Errorf("checking %s with %d rules: %w", d.name(), n, err)
			}
			if err := d.check(r.Delivered, r.Dropped); err != nil {
				return fmt.Errorf("checking %s with %d rules: %w", d.name(), n, err)
			}
			b.say("check %-15s %6d rules: %d sent, %d delivered, %d dropped by the intended rule", d.name(), n,
				r.Offered, r.Delivered, r.Dropped)
		}
	}
	return nil
}

// measureAll runs the rounds. Within a round every rule count and size is
// one point, and at each point the DUTs run one after the other, their
// order rotating from point to point, so slow phases of a shared machine
// hit every DUT alike.
func (b *bench) measureAll(res *MacroResult) error {
	points := map[[3]any]*MacroPoint{}
	for _, n := range b.opt.Rules {
		for _, s := range b.opt.Sizes {
			for _, d := range b.duts {
				p := &MacroPoint{DUT: d.name(), Rules: n, Size: s}
				points[[3]any{d.name(), n, s}] = p
				res.Points = append(res.Points, p)
			}
		}
	}
	total := b.opt.Rounds * len(res.Points)
	est := EstimateMacro(b.opt, len(b.duts))
	b.say("measuring: %d rounds x %d rule counts x %d sizes x %d DUTs = %d runs of %v (about %v)",
		b.opt.Rounds, len(b.opt.Rules), len(b.opt.Sizes), len(b.duts), total, b.opt.Duration, est.Round(time.Second))
	start := time.Now()
	done, k := 0, 0
	type point struct{ n, s int }
	var pts []point
	for _, n := range b.opt.Rules {
		for _, s := range b.opt.Sizes {
			pts = append(pts, point{n, s})
		}
	}
	for round := range b.opt.Rounds {
		// Odd rounds walk the points backwards, so a slow phase of the
		// machine does not always fall on the same rule counts.
		walk := slices.Clone(pts)
		if round%2 == 1 {
			slices.Reverse(walk)
		}
		for _, pt := range walk {
			order := slices.Clone(b.duts)
			rot := k % len(order)
			order = append(order[rot:], order[:rot]...)
			k++
			for _, d := range order {
				r, err := b.run(d, pt.n, pt.s)
				if err != nil {
					return err
				}
				p := points[[3]any{d.name(), pt.n, pt.s}]
				p.Runs = append(p.Runs, r)
				done++
				eta := time.Duration(float64(time.Since(start)) / float64(done) * float64(total-done))
				b.say("[%3d/%d] round %d/%d %6d rules %5d B %-15s %8.3f Mpps dropped (offered %.2f) %8.0f ns/pkt busy %3.0f%%  ETA %v",
					done, total, round+1, b.opt.Rounds, pt.n, pt.s, d.name(), r.droppedPPS()/1e6, r.offeredPPS()/1e6,
					r.nsPerPacket(), 100*float64(r.NAPINS)/1e9/r.WindowS, eta.Round(time.Second))
			}
		}
	}
	return nil
}

// run measures DUT d with n rules and frames of size bytes, and checks
// that the counts add up as in the sanity checks (a miss here is a bug, or
// another program on the veth).
func (b *bench) run(d dut, n, size int) (MacroRun, error) {
	if err := b.ctx.Err(); err != nil {
		return MacroRun{}, fmt.Errorf("interrupted: %w", err)
	}
	if err := d.use(n); err != nil {
		return MacroRun{}, err
	}
	if err := b.aim(n); err != nil {
		return MacroRun{}, err
	}
	frame := b.frames[size]
	r, err := b.measure(d, func() (time.Duration, error) { return b.gen.Run(b.ctx, frame, b.opt.Duration) })
	if err != nil {
		return r, fmt.Errorf("%s, %d rules, %d B: %w", d.name(), n, size, err)
	}
	if err := b.ctx.Err(); err != nil {
		return r, fmt.Errorf("interrupted: %w", err)
	}
	if err := errors.Join(r.accounted(), d.check(r.Delivered, r.Dropped)); err != nil {
		return r, fmt.Errorf("%s, %d rules, %d B: %w", d.name(), n, size, err)
	}
	return r, nil
}

// snapshot is what a measurement reads before and after.
type snapshot struct {
	at         time.Time
	sent       uint64
	rx, rxDrop uint64
	dropped    uint64
	napi       uint64
	cpu        CPUTimes
}

// read takes a snapshot; the DUT's counter (for iptables a slow
// iptables-save) is read before the fast ones when it is the start of a
// measurement, after them at its end, so neither falls in the window.
func (b *bench) read(d dut, start bool) (snapshot, error) {
	var s snapshot
	var err error
	slow := func() error {
		s.dropped, err = d.dropped()
		return err
	}
	if start {
		if err := slow(); err != nil {
			return s, err
		}
	}
	st, err := b.topo.LinkStats()
	if err != nil {
		return s, err
	}
	s.rx, s.rxDrop = st.RxPackets, st.RxDropped
	if s.sent, err = b.gen.Sent(); err != nil {
		return s, err
	}
	if s.napi, err = ThreadRuntime(b.napi); err != nil {
		return s, fmt.Errorf("the DUT's NAPI thread (pid %d) is gone: %w", b.napi, err)
	}
	cpus, err := ReadCPUTimes()
	if err != nil {
		return s, err
	}
	s.cpu = cpus[b.topo.DUTCPU]
	s.at = time.Now()
	if !start {
		if err := slow(); err != nil {
			return s, err
		}
	}
	return s, nil
}

// measure runs traffic (send) against the DUT in force and waits until
// the DUT has handled everything, then returns the counts.
func (b *bench) measure(d dut, send func() (time.Duration, error)) (MacroRun, error) {
	pre, err := b.read(d, true)
	if err != nil {
		return MacroRun{}, err
	}
	t0 := time.Now()
	ran, err := send()
	if err != nil {
		return MacroRun{}, err
	}
	last, err := b.settle(t0.Add(ran))
	if err != nil {
		return MacroRun{}, err
	}
	post, err := b.read(d, false)
	if err != nil {
		return MacroRun{}, err
	}
	c := post.cpu.Sub(pre.cpu)
	return MacroRun{
		Offered:     post.sent - pre.sent,
		Delivered:   post.rx - pre.rx,
		RingDropped: post.rxDrop - pre.rxDrop,
		Dropped:     post.dropped - pre.dropped,
		GenS:        ran.Seconds(),
		WindowS:     max(last.Sub(t0), ran).Seconds(),
		NAPINS:      post.napi - pre.napi,
		StatBusyNS:  jiffiesNS(c.Busy()),
		StatTotalNS: jiffiesNS(c.Total()),
	}, nil
}

// Settling: the DUT is done when its veth's receive count has not moved
// for settleQuiet and its NAPI thread is not running.
const (
	settlePoll    = 2 * time.Millisecond
	settleQuiet   = 10 * time.Millisecond
	settleTimeout = 30 * time.Second
)

// settle waits until the DUT has handled every packet the veth queued
// and returns when it received the last one (to within settlePoll).
func (b *bench) settle(genEnd time.Time) (time.Time, error) {
	last := genEnd
	var prev uint64
	deadline := time.Now().Add(settleTimeout)
	quietSince := time.Time{}
	for {
		st, err := b.topo.LinkStats()
		if err != nil {
			return last, err
		}
		now := time.Now()
		if st.RxPackets != prev {
			prev, last, quietSince = st.RxPackets, now, now
		}
		if state, err := threadState(b.napi); err == nil && state != 'R' && now.Sub(quietSince) >= settleQuiet {
			return last, nil
		}
		if now.After(deadline) {
			return last, fmt.Errorf("the DUT was still receiving %v after the generator stopped", settleTimeout)
		}
		time.Sleep(settlePoll)
	}
}

// summarize fills the medians and ratios.
func summarize(res *MacroResult) {
	at := map[[3]any]*MacroPoint{}
	for _, p := range res.Points {
		at[[3]any{p.DUT, p.Rules, p.Size}] = p
		var off, drop, ns, stat, busy []float64
		for _, r := range p.Runs {
			off = append(off, r.offeredPPS()/1e6)
			drop = append(drop, r.droppedPPS()/1e6)
			ns = append(ns, r.nsPerPacket())
			if r.Dropped > 0 {
				stat = append(stat, r.StatBusyNS/float64(r.Dropped))
			}
			busy = append(busy, float64(r.NAPINS)/1e9/r.WindowS)
		}
		p.OfferedMpps, p.DroppedMpps, p.NSPerPacket, p.StatNS, p.Busy = median(off), median(drop), median(ns), median(stat), median(busy)
	}
	rate := func(p *MacroPoint) []float64 {
		var v []float64
		for _, r := range p.Runs {
			v = append(v, r.droppedPPS())
		}
		return v
	}
	cost := func(p *MacroPoint) []float64 {
		var v []float64
		for _, r := range p.Runs {
			v = append(v, r.nsPerPacket())
		}
		return v
	}
	for _, p := range res.Points {
		if f := at[[3]any{DUTDrop, p.Rules, p.Size}]; f != nil {
			p.RateVsFloor = medianRatio(rate(p), rate(f))
			p.CostVsFloor = medianRatio(cost(f), cost(p))
		}
	}
	for _, n := range res.Rules {
		for _, s := range res.Sizes {
			x := at[[3]any{DUTXdpfw, n, s}]
			if x == nil {
				continue
			}
			sum := &MacroSummary{Rules: n, Size: s, XdpfwDroppedMpps: x.DroppedMpps, FloorRate: x.RateVsFloor, FloorCost: x.CostVsFloor}
			for _, d := range AllDUTs {
				if _, stack := stackFlavours[d]; !stack {
					continue
				}
				if o := at[[3]any{d, n, s}]; o != nil {
					sum.Versus = append(sum.Versus, MacroVersus{DUT: d, Rate: medianRatio(rate(x), rate(o)), Cost: medianRatio(cost(o), cost(x))})
				}
			}
			res.Summary = append(res.Summary, sum)
		}
	}
}

func parseFloat(s string) float64 {
	v, _ := strconv.ParseFloat(s, 64)
	return v
}

// runStart is what a live benchmark does first: it reads the load
// average (warning when other work will take CPU from the generator and
// the DUT) and the kernel's release, and removes what a killed earlier run
// left.
func runStart(say func(string, ...any)) (load, kernel string) {
	load = loadavg()
	if l1, _, _ := strings.Cut(load, " "); parseFloat(l1) >= 1 {
		say("warning: load average %s: other work will take CPU from the generator and the DUT; expect noisy results", load)
	}
	var uts unix.Utsname
	if unix.Uname(&uts) == nil {
		kernel = unix.ByteSliceToString(uts.Release[:])
	}
	if gone := SweepStale(); len(gone) > 0 {
		say("removed what an earlier, killed run left: %s", strings.Join(gone, ", "))
	}
	return load, kernel
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// undoSteps are what a run set up, undone in reverse order by run.
type undoSteps []func() error

// run undoes every step, also after an error, and adds what failed to
// *err. A pointer: `defer undo.run(&err)` sees the steps added after it.
func (u *undoSteps) run(err *error) {
	var errs []error
	for i := len(*u) - 1; i >= 0; i-- {
		if e := (*u)[i](); e != nil {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		*err = errors.Join(*err, fmt.Errorf("cleaning up: %w", errors.Join(errs...)))
	}
}
