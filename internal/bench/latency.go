package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/latency"
	"github.com/xdpfw/xdpfw/internal/rules"
)

// `xdpfw bench latency`: one-way latency and jitter through a DUT that
// forwards (a router namespace between the generator and a sink,
// NewRouterTopology), at paced offered loads and rule counts
// (docs/realtime.md, "End to end"). The generator (bpf/bench/latency.c)
// writes the clock into each packet's payload; the sink's XDP program
// reads the clock again: one kernel, one clock, no synchronisation.

// The floors: forwarding with no firewall at all.
const (
	DUTXDPFwd    = "xdp-fwd"    // a bare XDP FIB forwarder (bench_fwd): FIB lookup, TTL, MACs, redirect
	DUTKernelFwd = "kernel-fwd" // the kernel forwards (XDP_PASS), no rules
)

// LatencyDUTs is every DUT of the latency benchmark, in the order tables
// list them: the floors, xdpfw, netfilter.
var LatencyDUTs = []string{DUTXDPFwd, DUTKernelFwd, DUTXdpfw, DUTIptablesNFT, DUTIptablesLegacy, DUTNftLinear, DUTNftSet}

// AvailableLatencyDUTs are the DUTs whose tools are installed here,
// without nft-linear (iptables-nft runs the same linear nf_tables rules).
func AvailableLatencyDUTs() []string {
	var out []string
	for _, d := range LatencyDUTs {
		if fl, ok := stackFlavours[d]; ok && (fl.installed() != nil || d == DUTNftLinear) {
			continue
		}
		out = append(out, d)
	}
	return out
}

// LatencyOptions configure a latency run: a load sweep (every rate of
// Rates at LoadRules rules) and a rule sweep (every count of Rules at
// LightRate).
type LatencyOptions struct {
	Rates     []float64 // offered loads of the load sweep, packets/s
	LoadRules int       // rule count of the load sweep
	Rules     []int     // rule counts of the rule sweep
	LightRate float64   // offered load of the rule sweep, packets/s
	Flows     int       // distinct flows, each aimed at its own rule (spread over the rule set)
	Packets   int       // packets per point, at least
	MinTime   time.Duration
	Size      int      // Ethernet frame size, bytes
	DUTs      []string // nil: AvailableLatencyDUTs
	Progress  io.Writer
}

// MaxLatencyRules bounds the rule count (the rule sources of the
// benchmark's rule set stay distinct up to here).
const MaxLatencyRules = 200000

// maxLatPackets bounds the packets of one point (lat_samples' size).
const maxLatPackets = 1 << 21

// LatencyResult is a whole run.
type LatencyResult struct {
	Command   string            `json:"command,omitempty"`
	Started   time.Time         `json:"started"`
	Elapsed   float64           `json:"elapsed_s"`
	Kernel    string            `json:"kernel"`
	CPUs      int               `json:"cpus"`
	Load      [2]string         `json:"loadavg_before_after"`
	Size      int               `json:"size"`
	Flows     int               `json:"flows"`
	Rates     []float64         `json:"rates"`
	LoadRules int               `json:"load_rules"`
	Rules     []int             `json:"rules"`
	LightRate float64           `json:"light_rate"`
	DUTs      []string          `json:"duts"`
	Skipped   map[string]string `json:"skipped,omitempty"`
	Points    []*LatPoint       `json:"points"`
}

// LatPoint is one DUT at one rule count and offered load.
type LatPoint struct {
	DUT   string  `json:"dut"`
	Rules int     `json:"rules"` // 0 for the floors (no rules)
	Rate  float64 `json:"rate_pps"`
	Sweep string  `json:"sweep"` // "load" or "rules"
	// Counts.
	Sent     uint64 `json:"sent"`
	Received uint64 `json:"received"` // by the sink
	Accepted uint64 `json:"accepted"` // the DUT's count of forwarded packets (its rules', or its program's)
	FastPath uint64 `json:"fast_path,omitempty"`
	Burst    uint32 `json:"burst"` // packets per flush
	Late     uint64 `json:"late"`  // sent more than an interval late (the generator was preempted): the schedule moved
	// Offered: packets / the generator's time; Loss: 1 - received/sent.
	OfferedPPS float64 `json:"offered_pps"`
	Loss       float64 `json:"loss"`
	// One-way latency of the received packets, microseconds.
	Min    float64 `json:"min_us"`
	P50    float64 `json:"p50_us"`
	P99    float64 `json:"p99_us"`
	P999   float64 `json:"p99_9_us"`
	Max    float64 `json:"max_us"`
	Mean   float64 `json:"mean_us"`
	Jitter float64 `json:"jitter_us"` // mean |latency - mean|
	// xdpfw only: its own per-packet processing time (FORWARD, accepted;
	// the data plane's histograms, every packet sampled), ns.
	Proc *latency.Summary `json:"xdpfw_processing,omitempty"`
}

// latDUT is one device under test of the latency benchmark: programs on
// both of the DUT's veths, rules in force.
type latDUT interface {
	name() string
	use(n int) error // n rules in force (ignored by the floors)
	// accepted is the running count of packets it forwarded, and of
	// those, how many by an XDP fast path (xdpfw).
	accepted() (all, fast uint64, err error)
	proc() (*latency.Hist, error) // xdpfw's processing time histogram, nil for the others
	close()
}

// latBench is the state of one run.
type latBench struct {
	opt      LatencyOptions
	ctx      context.Context
	topo     *Topology
	objs     latbenchObjects
	frame    []byte
	say      func(format string, a ...any)
	aims     map[int][]latbenchLatAim // per rule count
	links    routerLinks              // the DUT's veths: from the generator, to the sink
	progs    *benchProgs
	stack    *stackState
	shape    ruleShape
	pinRoot  string
	aimedFor int // the rule count lat_aims holds (-1: none)
	napi     int // pid of the DUT's NAPI thread
}

// Latency runs the latency benchmark; everything it makes is removed
// again, also on error or when ctx ends.
func Latency(ctx context.Context, opt LatencyOptions) (res *LatencyResult, err error) {
	b := &latBench{opt: opt, ctx: ctx, say: sayer(opt.Progress), aims: map[int][]latbenchLatAim{}, aimedFor: -1}
	if err := CheckLatencyOptions(opt); err != nil {
		return nil, err
	}
	res = &LatencyResult{Started: time.Now(), CPUs: runtime.NumCPU(), Size: opt.Size, Flows: opt.Flows, Rates: opt.Rates,
		LoadRules: opt.LoadRules, Rules: opt.Rules, LightRate: opt.LightRate, Skipped: map[string]string{}}
	res.Load[0], res.Kernel = runStart(b.say)
	var undo undoSteps
	defer undo.run(&err)
	if b.topo, err = NewRouterTopology(); err != nil {
		return nil, err
	}
	undo = append(undo, b.topo.Close)
	t := b.topo
	b.shape = ruleShape{chain: "FORWARD", target: "ACCEPT", policy: "DROP", answersIf: t.RouteIf.Name}
	b.say("topology: %s (%s) -> %s (%s | %s, forwarding) -> %s (%s); generator on CPU %d, DUT on CPU %d",
		t.Gen.Name, t.GenIf.Name, t.DUT.Name, t.DUTIf.Name, t.RouteIf.Name, t.Sink.Name, t.SinkIf.Name, t.GenCPU, t.DUTCPU)

	var unmount func() error
	if b.pinRoot, unmount, err = privateBPFFS(); err != nil {
		return nil, err
	}
	undo = append(undo, unmount)
	if err := b.load(); err != nil {
		return nil, err
	}
	undo = append(undo, func() error { b.objs.Close(); return nil })
	if b.progs, err = loadDUTPrograms(t, nil); err != nil {
		return nil, err
	}
	undo = append(undo, func() error { b.progs.objs.Close(); return nil })
	// The sink's and the generator's veths: their programs; the DUT's two:
	// one link each, whose program each DUT sets.
	if err := attachEnds(t, b.objs.Latsink, b.objs.Latreply, &undo); err != nil {
		return nil, err
	}
	if b.links, err = attachRouter(t, b.progs.objs.BenchPass, &undo); err != nil {
		return nil, err
	}
	// The DUT's veth from the generator is polled by its own thread (as in
	// bench macro) on the DUT's CPU, at real-time priority, as a
	// time-sensitive deployment would run it: other work on that CPU (this
	// machine is shared) waits for it, not the packets for that work. The
	// sink's veth is polled in the softirq that thread's redirects and
	// transmits raise, at its end, on that CPU too. (A thread of its own
	// for the sink, at the same priority, halved what the DUTs forward:
	// a context switch per poll.)
	if err := t.SetThreadedNAPI(true); err != nil {
		return nil, err
	}
	if b.napi, err = t.NAPIThread(); err != nil {
		return nil, err
	}
	if err := realtime(b.napi, latNAPIPriority, "the DUT's NAPI thread"); err != nil {
		return nil, err
	}
	if b.frame, err = templateFrame(t, t.SinkIf.Addr.Addr(), 1, opt.Size); err != nil {
		return nil, err
	}
	var head latbenchLatHead
	for i := range head.W {
		head.W[i] = binary.NativeEndian.Uint64(b.frame[8*i:])
	}
	if err := b.objs.LatTmpl.Put(uint32(0), head); err != nil {
		return nil, fmt.Errorf("writing the frame template: %w", err)
	}

	want := opt.DUTs
	explicit := want != nil
	if !explicit {
		want = AvailableLatencyDUTs()
	}
	b.stack = &stackState{loaded: map[string]int{}}
	var duts []latDUT
	for _, name := range want {
		var d latDUT
		switch name {
		case DUTXDPFwd:
			d = &floorDUT{b: b, dut: name, prog: b.progs.objs.BenchFwd, slot: dutSlotFwd}
		case DUTKernelFwd:
			d = &floorDUT{b: b, dut: name, prog: b.progs.objs.BenchPass, slot: dutSlotPass}
		case DUTXdpfw:
			d = &xdpfwFwdDUT{b: b}
		case DUTIptablesNFT, DUTIptablesLegacy, DUTNftLinear, DUTNftSet:
			s, err := newStackDUT(ctx, name, t, b.links[0], b.progs, b.stack, b.shape, true)
			if err != nil {
				if explicit {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				res.Skipped[name] = err.Error()
				b.say("%s: not measured: %v", name, err)
				continue
			}
			d = &stackFwdDUT{s: s, b: b}
		default:
			return nil, fmt.Errorf("unknown DUT %q (want %s)", name, strings.Join(LatencyDUTs, ", "))
		}
		undo = append(undo, func() error { d.close(); return nil })
		duts = append(duts, d)
		res.DUTs = append(res.DUTs, name)
	}
	if len(duts) == 0 {
		return nil, errors.New("no DUT to measure")
	}

	total := 0
	for _, d := range duts {
		for _, s := range b.plan(d.name()) {
			total += len(s.points)
		}
	}
	b.say("measuring %d points: %d DUTs; loads %v pps at %d rules; rules %v at %.0f pps; %d flows, >= %d packets per point",
		total, len(duts), opt.Rates, opt.LoadRules, opt.Rules, opt.LightRate, opt.Flows, opt.Packets)
	start, done := time.Now(), 0
	for _, d := range duts {
		for _, step := range b.plan(d.name()) {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("interrupted: %w", err)
			}
			if err := b.prepare(d, step.rules); err != nil {
				return nil, fmt.Errorf("%s with %d rules: %w", d.name(), step.rules, err)
			}
			for _, pt := range step.points {
				if err := ctx.Err(); err != nil {
					return nil, fmt.Errorf("interrupted: %w", err)
				}
				p, err := b.measure(d, step.rules, pt.rate)
				if err != nil {
					return nil, fmt.Errorf("%s, %d rules, %.0f pps: %w", d.name(), step.rules, pt.rate, err)
				}
				p.Sweep = pt.sweep
				res.Points = append(res.Points, p)
				done++
				eta := time.Duration(float64(time.Since(start)) / float64(done) * float64(total-done))
				b.say("[%3d/%d] %-15s %6d rules %9.0f pps (offered %9.0f): p50 %8.1f p99 %8.1f p99.9 %8.1f max %9.1f jitter %7.1f us, loss %5.1f%%  ETA %v",
					done, total, d.name(), p.Rules, p.Rate, p.OfferedPPS, p.P50, p.P99, p.P999, p.Max, p.Jitter, 100*p.Loss, eta.Round(time.Second))
			}
		}
	}
	res.Load[1] = loadavg()
	res.Elapsed = time.Since(res.Started).Seconds()
	return res, nil
}

// CheckLatencyOptions refuses options Latency cannot run with.
func CheckLatencyOptions(opt LatencyOptions) error {
	switch {
	case len(opt.Rates) == 0 && len(opt.Rules) == 0:
		return errors.New("latency: neither loads nor rule counts to measure")
	case opt.Flows < 1 || opt.Packets < 1 || opt.Packets > maxLatPackets:
		return fmt.Errorf("latency: %d flows, %d packets per point: want at least 1, at most %d packets", opt.Flows, opt.Packets, maxLatPackets)
	case opt.Size < MinLatFrameSize || opt.Size > MaxFrameSize:
		return fmt.Errorf("frame size %d: want %d..%d bytes", opt.Size, MinLatFrameSize, MaxFrameSize)
	case len(opt.Rules) > 0 && opt.LightRate <= 0:
		return errors.New("latency: the rule sweep needs a load")
	}
	for _, n := range append(slices.Clone(opt.Rules), opt.LoadRules) {
		if n < 1 || n > MaxLatencyRules {
			return fmt.Errorf("rule count %d: want 1..%d", n, MaxLatencyRules)
		}
	}
	for _, r := range opt.Rates {
		if r < 1 || r > 100e6 {
			return fmt.Errorf("load %.0f pps: want 1..100M", r)
		}
	}
	return nil
}

// latNAPIPriority is the DUT's NAPI thread's SCHED_FIFO priority (the
// kernel's threaded IRQ handlers run at 50).
const latNAPIPriority = 50

// MinLatFrameSize fits the generator's payload (magic, sequence, clock).
const MinLatFrameSize = MinFrameSize + 16 // also LAT_HEAD (48) or more

// latStep is one rule count of one DUT and the loads measured with it.
type latStep struct {
	rules  int
	points []struct {
		rate  float64
		sweep string
	}
}

// plan is what DUT d measures: the load sweep at LoadRules, then the rule
// sweep at LightRate. The floors have no rules: their rule sweep is one
// point at LightRate (rules 0).
func (b *latBench) plan(d string) []latStep {
	floor := d == DUTXDPFwd || d == DUTKernelFwd
	var steps []latStep
	add := func(n int, rate float64, sweep string) {
		if floor {
			n = 0
		}
		for i := range steps {
			if steps[i].rules == n {
				for _, p := range steps[i].points {
					if p.rate == rate {
						return // the same point: measured once, in the first sweep
					}
				}
				steps[i].points = append(steps[i].points, struct {
					rate  float64
					sweep string
				}{rate, sweep})
				return
			}
		}
		steps = append(steps, latStep{rules: n, points: []struct {
			rate  float64
			sweep string
		}{{rate, sweep}}})
	}
	for _, r := range b.opt.Rates {
		add(b.opt.LoadRules, r, "load")
	}
	for _, n := range b.opt.Rules {
		add(n, b.opt.LightRate, "rules")
	}
	return steps
}

func (b *latBench) load() error {
	spec, err := loadLatbench()
	if err != nil {
		return fmt.Errorf("loading embedded latbench objects: %w", err)
	}
	spec.Maps["lat_aims"].MaxEntries = uint32(b.opt.Flows)
	spec.Maps["lat_samples"].MaxEntries = maxLatPackets
	if err := spec.Variables["gen_ifindex"].Set(uint32(b.topo.GenIf.Index)); err != nil {
		return err
	}
	if err := spec.LoadAndAssign(&b.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return fmt.Errorf("the verifier rejected the latency programs: %+v", ve)
		}
		return fmt.Errorf("loading the latency programs: %w", err)
	}
	return nil
}

// latAims are the flows for n rules: Flows of them (at most n), each
// aimed at a different rule of the benchmark's rule set, the rules drawn
// at random from all n (the last one's pair from its /17), each with its
// own source port.
func latAims(n, flows int) []latbenchLatAim {
	k := min(n, flows)
	rnd := rand.New(rand.NewPCG(uint64(n), 2))
	picked := rnd.Perm(n)[:k]
	aims := make([]latbenchLatAim, k)
	for j, i := range picked {
		src, port := nonMatching(i)
		if i == n-1 {
			src, port = randIn(rnd, TrafficSrc, false), TrafficDPort
		}
		a := src.As4()
		aims[j] = latbenchLatAim{Saddr: binary.NativeEndian.Uint32(a[:]), Dport: bits.ReverseBytes16(port),
			Sport: bits.ReverseBytes16(uint16(10000 + j%50000))}
	}
	return aims
}

// aim writes the flows of n rules (floors: n = 0, the flows of LoadRules).
func (b *latBench) aim(n int) error {
	if n == 0 {
		n = b.opt.LoadRules
	}
	if b.aimedFor == n {
		return nil
	}
	aims, ok := b.aims[n]
	if !ok {
		aims = latAims(n, b.opt.Flows)
		b.aims[n] = aims
	}
	keys := make([]uint32, len(aims))
	for i := range keys {
		keys[i] = uint32(i)
	}
	if _, err := b.objs.LatAims.BatchUpdate(keys, aims, nil); err != nil {
		return fmt.Errorf("writing %d flows: %w", len(aims), err)
	}
	b.aimedFor = n
	return nil
}

func (b *latBench) ctl() (latbenchLatCtl, error) {
	var c latbenchLatCtl
	err := b.objs.LatCtlMap.Lookup(uint32(0), &c)
	return c, err
}

// reset starts a run: packet 0 next, paced at rate (0: flat out), the
// counts zeroed.
func (b *latBench) reset(n int, rate float64, answer bool) error {
	c := latbenchLatCtl{Aims: uint32(len(b.aims[n])), Burst: latBurst(rate)}
	if rate > 0 {
		c.Interval = uint64(1e9 / rate)
	}
	if answer {
		c.Answer = 1
	}
	return b.objs.LatCtlMap.Put(uint32(0), c)
}

// latBurst is the frames per flush at rate: one up to burstRate packets
// per second, then as many as keep a flush every 1/burstRate seconds (at
// most 64, the kernel's default batch). A flush costs the generator
// microseconds (it wakes the DUT's NAPI thread); frames of one burst reach
// the DUT together and queue there behind each other.
func latBurst(rate float64) uint32 {
	return uint32(min(64, max(1, math.Ceil(rate/burstRate))))
}

const burstRate = 100e3

// prepare puts d with n rules in force and warms it up: every flow sends
// one packet, which the sink answers, so that each connection is
// established (answered) before measuring: xdpfw forwards a connection in
// its fast path once answered (docs/forward.md), netfilter's conntrack
// knows them all.
func (b *latBench) prepare(d latDUT, n int) error {
	if err := d.use(n); err != nil {
		return err
	}
	if err := b.aim(n); err != nil {
		return err
	}
	key := n
	if key == 0 {
		key = b.opt.LoadRules
	}
	k := len(b.aims[key])
	// Paced at 20,000 packets/s, in bursts well below the veth's ring of
	// 256: the first packet of a connection may take the kernel's slower
	// path (xdpfw: until answered).
	if err := b.reset(key, 20000, true); err != nil {
		return err
	}
	const batch = 200
	sent := 0
	for sent < k {
		if err := b.ctx.Err(); err != nil {
			return fmt.Errorf("interrupted: %w", err)
		}
		m := min(batch, k-sent)
		if _, err := liveRuns(b.topo, b.objs.Latgen, b.frame, latBurst(20000), func(run func(uint32) error) error { return run(uint32(m)) }); err != nil {
			return err
		}
		sent += m
		// Wait for the answers, while they come.
		var last uint64
		quiet := time.Now()
		for {
			c, err := b.ctl()
			if err != nil {
				return err
			}
			if c.Answers >= uint64(sent) {
				break
			}
			if c.Answers != last {
				last, quiet = c.Answers, time.Now()
			}
			if time.Since(quiet) > 2*time.Second {
				acc, fast, _ := d.accepted()
				why := ""
				if x, ok := d.(*xdpfwFwdDUT); ok {
					why = x.paths()
				}
				return fmt.Errorf("warm-up: %d flows sent, %s forwarded %d (%d in XDP%s), the sink received %d, %d answers came back (%d foreign frames)",
					sent, d.name(), acc, fast, why, c.Received, c.Answers, c.Foreign)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// measure sends one point's packets at rate and computes its statistics.
func (b *latBench) measure(d latDUT, n int, rate float64) (*LatPoint, error) {
	key := n
	if key == 0 {
		key = b.opt.LoadRules
	}
	count := max(b.opt.Packets, int(rate*b.opt.MinTime.Seconds()))
	count = min(count, maxLatPackets)
	zeros := make([]uint32, count)
	keys := make([]uint32, count)
	for i := range keys {
		keys[i] = uint32(i)
	}
	if _, err := b.objs.LatSamples.BatchUpdate(keys, zeros, nil); err != nil {
		return nil, fmt.Errorf("clearing the samples: %w", err)
	}
	if err := b.reset(key, rate, false); err != nil {
		return nil, err
	}
	acc0, fast0, err := d.accepted()
	if err != nil {
		return nil, err
	}
	proc0, err := d.proc()
	if err != nil {
		return nil, err
	}
	ran, err := liveRuns(b.topo, b.objs.Latgen, b.frame, latBurst(rate), func(run func(uint32) error) error { return run(uint32(count)) })
	if err != nil {
		return nil, err
	}
	// Settled: the sink's count has not moved for 50 ms and the DUT's
	// NAPI thread is not running (it may work for a long time on a packet:
	// iptables at 100,000 rules).
	var c latbenchLatCtl
	var last uint64
	quiet := time.Now()
	for deadline := time.Now().Add(30 * time.Second); ; {
		if c, err = b.ctl(); err != nil {
			return nil, err
		}
		if c.Received != last {
			last, quiet = c.Received, time.Now()
		}
		if c.Received >= uint64(count) {
			break
		}
		if state, err := threadState(b.napi); err == nil && state != 'R' && time.Since(quiet) > 50*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			return nil, errors.New("the sink was still receiving 30 s after the generator stopped")
		}
		time.Sleep(2 * time.Millisecond)
	}
	acc1, fast1, err := d.accepted()
	if err != nil {
		return nil, err
	}
	p := &LatPoint{DUT: d.name(), Rules: n, Rate: rate, Sent: c.Seq, Received: c.Received, Accepted: acc1 - acc0,
		FastPath: fast1 - fast0, Late: c.Late, Burst: c.Burst, OfferedPPS: float64(c.Seq) / ran.Seconds()}
	if p.Sent != uint64(count) {
		return nil, fmt.Errorf("the generator sent %d packets, want %d", p.Sent, count)
	}
	if p.Received > p.Sent || p.Accepted > p.Sent || p.Received > p.Accepted {
		return nil, fmt.Errorf("counts do not add up: sent %d, %s forwarded %d, the sink received %d", p.Sent, d.name(), p.Accepted, p.Received)
	}
	if c.Foreign != 0 {
		return nil, fmt.Errorf("the sink or the generator's veth saw %d frames that were not the benchmark's", c.Foreign)
	}
	samples := make([]uint32, count)
	if _, err := b.objs.LatSamples.BatchLookup(new(ebpf.MapBatchCursor), keys, samples, nil); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil, fmt.Errorf("reading the samples: %w", err)
	}
	var got []float64
	for _, s := range samples {
		if s != 0 {
			got = append(got, float64(s-1)/1e3)
		}
	}
	if c, err = b.ctl(); err != nil {
		return nil, err
	}
	if uint64(len(got)) != p.Received || c.Received != p.Received {
		return nil, fmt.Errorf("the sink counted %d packets and holds %d samples", p.Received, len(got))
	}
	p.Loss = 1 - float64(p.Received)/float64(p.Sent)
	fillLatStats(p, got)
	if proc0 != nil {
		proc1, err := d.proc()
		if err != nil {
			return nil, err
		}
		h := proc1.Since(proc0)
		s := h.Summarize()
		p.Proc = &s
	}
	return p, nil
}

// fillLatStats computes the point's statistics from its latencies (us).
func fillLatStats(p *LatPoint, v []float64) {
	if len(v) == 0 {
		return
	}
	sort.Float64s(v)
	q := func(f float64) float64 { return v[min(len(v)-1, int(math.Ceil(f*float64(len(v))))-1)] }
	var sum float64
	for _, x := range v {
		sum += x
	}
	mean := sum / float64(len(v))
	var dev float64
	for _, x := range v {
		dev += math.Abs(x - mean)
	}
	p.Min, p.P50, p.P99, p.P999, p.Max = v[0], q(0.5), q(0.99), q(0.999), v[len(v)-1]
	p.Mean, p.Jitter = mean, dev/float64(len(v))
}

// clearStack empties every netfilter flavour's rules in the DUT's
// namespace (a floor or xdpfw runs: the kernel forwards what it gets
// without rules).
func (b *latBench) clearStack() error {
	for name, k := range b.stack.loaded {
		if k == 0 {
			continue
		}
		if _, err := runIn(b.ctx, b.topo.DUT, stackFlavours[name].empty); err != nil {
			return err
		}
		b.stack.loaded[name] = 0
	}
	return nil
}

// floorDUT forwards with no firewall: bench_fwd (XDP) or bench_pass (the
// kernel), counted in dut_stats' slot.
type floorDUT struct {
	b    *latBench
	dut  string
	prog *ebpf.Program
	slot uint32
}

func (d *floorDUT) name() string { return d.dut }
func (d *floorDUT) use(int) error {
	return errors.Join(d.b.clearStack(), d.b.links.set(d.prog))
}
func (d *floorDUT) accepted() (uint64, uint64, error) {
	n, err := d.b.progs.count(d.slot)
	if d.dut == DUTXDPFwd {
		return n, n, err
	}
	return n, 0, err
}
func (d *floorDUT) proc() (*latency.Hist, error) { return nil, nil }
func (d *floorDUT) close()                       {}

// xdpfwFwdDUT is the firewall on both veths with its forwarding fast path
// through them (xdp-veth: the sink's and the generator's veths run XDP
// programs and the generator sends no checksum to finish), one data plane
// at a time, every packet's processing time sampled.
type xdpfwFwdDUT struct {
	b  *latBench
	dp *datapath.Datapath
	n  int
}

func (d *xdpfwFwdDUT) name() string { return DUTXdpfw }

func (d *xdpfwFwdDUT) use(n int) error {
	if err := d.b.clearStack(); err != nil {
		return err
	}
	if d.dp != nil && d.n == n {
		return d.b.links.set(d.dp.Program())
	}
	// One data plane at a time: the old one leaves the veths first.
	if err := d.b.links.set(d.b.progs.objs.BenchPass); err != nil {
		return err
	}
	d.close()
	t := d.b.topo
	c, err := compileFor(d.b.shape.iptables(n), n+1, rules.ParseOptions{Family: rules.FamilyIPv4},
		map[string]uint32{t.DUTIf.Name: uint32(t.DUTIf.Index), t.RouteIf.Name: uint32(t.RouteIf.Index)})
	if err != nil {
		return fmt.Errorf("%d rules: %w", n, err)
	}
	dp, err := datapath.Load(filepath.Join(d.b.pinRoot, fmt.Sprintf("xdpfw-%d", n)), c.lim)
	if err != nil {
		return err
	}
	d.dp, d.n = dp, n
	steps := []func() error{
		func() error { return dp.Install(c.tables) },
		func() error {
			return dp.SetConfig(datapath.Config{MalformedAction: compile.ActDrop, Forward: datapath.ForwardXDPVeth})
		},
		// a devmap resolves ifindexes in the namespace of who writes it
		func() error {
			return t.DUT.Do(func() error { return dp.SetForwardPorts([]int{t.DUTIf.Index, t.RouteIf.Index}) })
		},
		func() error { return dp.SetLatencySample(1) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	d.b.say("xdpfw: %d rules compiled in %.0f ms", n, c.compileMS)
	return d.b.links.set(dp.Program())
}

// accepted: every packet FORWARD accepted is counted once by how it was
// delivered (fw_fwd_stats); fast is the fast path's share.
func (d *xdpfwFwdDUT) accepted() (uint64, uint64, error) {
	cs, err := d.dp.ForwardCounters()
	if err != nil {
		return 0, 0, err
	}
	var all uint64
	for _, c := range cs {
		all += c.Packets
	}
	return all, cs[datapath.FwdXDP].Packets, nil
}

// paths lists how xdpfw delivered what FORWARD accepted, by reason.
func (d *xdpfwFwdDUT) paths() string {
	cs, err := d.dp.ForwardCounters()
	if err != nil {
		return ": " + err.Error()
	}
	var out []string
	for r, c := range cs {
		if c.Packets != 0 {
			out = append(out, fmt.Sprintf("%v %d", datapath.FwdReason(r), c.Packets))
		}
	}
	return "; by how: " + strings.Join(out, ", ")
}

func (d *xdpfwFwdDUT) proc() (*latency.Hist, error) {
	hs, err := d.dp.Latency()
	if err != nil {
		return nil, err
	}
	for _, h := range hs {
		if h.Chain == rules.ChainForward && h.Outcome == datapath.LatAccept {
			return &h.Hist, nil
		}
	}
	return nil, errors.New("xdpfw: no FORWARD accept histogram")
}

func (d *xdpfwFwdDUT) close() {
	if d.dp != nil {
		d.dp.Close()
		d.dp = nil
	}
}

// stackFwdDUT is a netfilter flavour's rules in the DUT's FORWARD chain;
// both veths pass every frame to the stack.
type stackFwdDUT struct {
	s *stackDUT
	b *latBench
}

func (d *stackFwdDUT) name() string { return d.s.name() }
func (d *stackFwdDUT) use(n int) error {
	return errors.Join(d.s.use(n), d.b.links.set(d.b.progs.objs.BenchPass))
}
func (d *stackFwdDUT) accepted() (uint64, uint64, error) {
	n, err := d.s.dropped()
	return n, 0, err
}
func (d *stackFwdDUT) proc() (*latency.Hist, error) { return nil, nil }
func (d *stackFwdDUT) close()                       { d.s.close() }
