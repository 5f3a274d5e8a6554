package bench

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/cilium/ebpf"

	"github.com/xdpfw/xdpfw/internal/compile"
	"github.com/xdpfw/xdpfw/internal/datapath"
)

// aim is a frame aimed at one rule: the rule (index) that decides it.
type aim struct {
	frame []byte
	rule  int
	walk  compile.WalkCost // what its walk reads (the Go twin's count)
}

// aimTries is how many random points of a rule's box aimFrames tries
// before it calls the rule unreachable (covered by earlier rules).
const aimTries = 16

// aimFrames returns frames aimed at up to k distinct rules of rs, picked
// in a random (seeded) order, which is also the frames' order. Each frame
// is a random point of its rule's box that the Go twin of the classifier
// (Tables.Classify) says the rule decides; rules for which aimTries points
// found none are skipped and counted (unreachable: earlier rules cover
// them, or nearly).
func aimFrames(rs []benchRule, c *compiled, k int, family string) (aims []aim, unreachable int) {
	rnd := rand.New(rand.NewPCG(uint64(len(rs)), 7))
	for _, i := range rnd.Perm(len(rs)) {
		if len(aims) == k {
			break
		}
		found := false
		for t := 0; t < aimTries && !found; t++ {
			p := rs[i].pointIn(rnd, family == "ipv6")
			rp := compile.RefPacketOf(p, "")
			if e := c.tables.Classify(&rp, compile.Dev{}).Entry; e >= 0 && c.tables.Entries[e].RuleID == c.ids[i] {
				r := int(rp.Chain) * 2
				if rp.Src.Is6() {
					r++
				}
				w := c.tables.WalkCostOf(r, compile.KeyOf(&rp, compile.Dev{}))
				aims, found = append(aims, aim{p.Bytes(), i, w}), true
			}
		}
		if !found {
			unreachable++
		}
	}
	return aims, unreachable
}

// spreadAims is aimFrames with the result it starts.
func spreadAims(rs []benchRule, c *compiled, k int, family string) ([]aim, *SpreadResult) {
	aims, unreachable := aimFrames(rs, c, k, family)
	return aims, &SpreadResult{K: len(aims), Unreachable: unreachable, Walk: walkOf(aims)}
}

// WalkShape is what the K frames' walks read, by the Go twin
// (compile.WalkCostOf): mean and p99 per packet of the fat nodes, the
// candidate records and the lines of leaf slots, and the mean trees.
type WalkShape struct {
	Trees    float64 `json:"trees_mean"`
	Nodes    float64 `json:"nodes_mean"`
	NodesP99 int     `json:"nodes_p99"`
	Cands    float64 `json:"cands_mean"`
	CandsP99 int     `json:"cands_p99"`
	Slots    float64 `json:"slot_lines_mean"`
}

// walkOf sums the walks of aims.
func walkOf(aims []aim) WalkShape {
	var w WalkShape
	if len(aims) == 0 {
		return w
	}
	var nodes, cands []int
	for _, a := range aims {
		w.Trees += float64(a.walk.Trees)
		w.Nodes += float64(a.walk.Nodes)
		w.Cands += float64(a.walk.Cands)
		w.Slots += float64(a.walk.Slots)
		nodes, cands = append(nodes, a.walk.Nodes), append(cands, a.walk.Cands)
	}
	n := float64(len(aims))
	w.Trees, w.Nodes, w.Cands, w.Slots = w.Trees/n, w.Nodes/n, w.Cands/n, w.Slots/n
	slices.Sort(nodes)
	slices.Sort(cands)
	w.NodesP99, w.CandsP99 = nodes[len(nodes)*99/100], cands[len(cands)*99/100]
	return w
}

// SpreadStats are per-packet times of one series kind, over all rounds.
type SpreadStats struct {
	// Mean leaves out the histogram's last bucket (interrupted runs);
	// it is finer than the percentiles where the clock ticks coarsely.
	Mean float64 `json:"mean_ns"`
	P50  float64 `json:"p50_ns"`
	P90  float64 `json:"p90_ns"`
	P99  float64 `json:"p99_ns"`
	P999 float64 `json:"p99_9_ns"` // issue 17's first bar: p99.9 against p50
}

// SpreadResult compares packets that repeat one path (K = 1) with K
// frames aimed at K different rules, in random order.
type SpreadResult struct {
	K           int       `json:"k"`
	Unreachable int       `json:"unreachable_rules"` // rules tried that no frame could reach
	Walk        WalkShape `json:"walk"`
	// Warm (K = 1) and Spread (K frames): xdpfw's own time per packet,
	// the driver's median subtracted (see docs/bench.md).
	Warm   SpreadStats `json:"warm"`
	Spread SpreadStats `json:"spread"`
	// DriverWarm and DriverSpread: the driver and test loop alone
	// (spread_empty) with the same frames, raw.
	DriverWarm   SpreadStats `json:"driver_warm"`
	DriverSpread SpreadStats `json:"driver_spread"`
	// Ratio: the median over rounds of the per-round ratio of spread to
	// warm p50 (each net of its driver p50 of the same round).
	Ratio    float64   `json:"spread_vs_warm_p50"`
	WarmP50  []float64 `json:"warm_p50_ns"`   // per round, net
	SpreadP5 []float64 `json:"spread_p50_ns"` // per round, net
	// MeanRatio is Ratio for the means.
	MeanRatio  float64   `json:"spread_vs_warm_mean"`
	WarmMean   []float64 `json:"warm_mean_ns"`   // per round, net
	SpreadMean []float64 `json:"spread_mean_ns"` // per round, net
}

// spreadRig is the loaded driver (bpf/bench/spread.c) with its frames.
type spreadRig struct {
	objs   spreadObjects
	frames int
	data   []byte // the test packet's initial contents
	// histograms summed over rounds: [xdpfw warm, xdpfw spread, empty
	// warm, empty spread]
	hist [4][]uint64
	res  SpreadResult
}

const (
	seriesWarm = iota
	seriesSpread
	seriesEmptyWarm
	seriesEmptySpread
)

// newSpreadRig loads the driver with aims' frames.
func newSpreadRig(aims []aim) (*spreadRig, error) {
	spec, err := loadSpread()
	if err != nil {
		return nil, err
	}
	spec.Maps["spread_frames"].MaxEntries = uint32(len(aims))
	r := &spreadRig{frames: len(aims), data: aims[0].frame}
	if err := spec.LoadAndAssign(&r.objs, nil); err != nil {
		return nil, fmt.Errorf("loading the spread driver: %w", err)
	}
	for i, a := range aims {
		var f spreadSpreadFrame
		for w := range f.W {
			for b := 0; b < 8; b++ {
				f.W[w] |= uint64(a.frame[w*8+b]) << (8 * b)
			}
		}
		if err := r.objs.SpreadFrames.Update(uint32(i), &f, ebpf.UpdateAny); err != nil {
			r.objs.Close()
			return nil, fmt.Errorf("spread frame %d: %w", i, err)
		}
	}
	for i := range r.hist {
		r.hist[i] = make([]uint64, len(spreadSpreadHist{}.N))
	}
	r.res.K = len(aims)
	return r, nil
}

func (r *spreadRig) Close() { r.objs.Close() }

// series runs packets runs of the driver over the first k frames with
// target as the program under test and returns the histogram.
func (r *spreadRig) series(target *ebpf.Program, k, packets int) ([]uint32, error) {
	if err := r.objs.SpreadProgs.Update(uint32(0), target, ebpf.UpdateAny); err != nil {
		return nil, fmt.Errorf("spread driver: program under test: %w", err)
	}
	var h spreadSpreadHist
	if err := r.objs.SpreadHists.Update(uint32(0), &h, ebpf.UpdateAny); err != nil {
		return nil, err
	}
	st := spreadSpreadState{Count: uint32(k)}
	if err := r.objs.SpreadSt.Update(uint32(0), &st, ebpf.UpdateAny); err != nil {
		return nil, err
	}
	if _, err := r.objs.Spread.Run(&ebpf.RunOptions{Data: r.data, Repeat: uint32(packets)}); err != nil {
		return nil, fmt.Errorf("BPF_PROG_TEST_RUN of the spread driver: %w", err)
	}
	if err := r.objs.SpreadHists.Lookup(uint32(0), &h); err != nil {
		return nil, err
	}
	return h.N[:], nil
}

// round runs the four series once, in an order that rotates with the
// round, and records the per-round p50s.
func (r *spreadRig) round(round int, xdpfw *ebpf.Program, packets int) error {
	var p50, mean [4]float64
	for j := range 4 {
		s := (j + round) % 4
		target, k := xdpfw, 1
		if s >= seriesEmptyWarm {
			target = r.objs.SpreadEmpty
		}
		if s == seriesSpread || s == seriesEmptySpread {
			k = r.frames
		}
		h, err := r.series(target, k, packets)
		if err != nil {
			return err
		}
		for b, n := range h {
			r.hist[s][b] += uint64(n)
		}
		p50[s], mean[s] = percentile(h, 0.5), histMean(h)
	}
	w, sp := p50[seriesWarm]-p50[seriesEmptyWarm], p50[seriesSpread]-p50[seriesEmptySpread]
	r.res.WarmP50 = append(r.res.WarmP50, w)
	r.res.SpreadP5 = append(r.res.SpreadP5, sp)
	r.res.WarmMean = append(r.res.WarmMean, mean[seriesWarm]-mean[seriesEmptyWarm])
	r.res.SpreadMean = append(r.res.SpreadMean, mean[seriesSpread]-mean[seriesEmptySpread])
	return nil
}

// result summarises the rounds.
func (r *spreadRig) result() SpreadResult {
	st := func(h []uint64) SpreadStats {
		return SpreadStats{histMean(h), percentile(h, 0.5), percentile(h, 0.9), percentile(h, 0.99), percentile(h, 0.999)}
	}
	net := func(s, base SpreadStats) SpreadStats {
		return SpreadStats{s.Mean - base.Mean, s.P50 - base.P50, s.P90 - base.P50, s.P99 - base.P50, s.P999 - base.P50}
	}
	res := r.res
	res.DriverWarm, res.DriverSpread = st(r.hist[seriesEmptyWarm]), st(r.hist[seriesEmptySpread])
	res.Warm, res.Spread = net(st(r.hist[seriesWarm]), res.DriverWarm), net(st(r.hist[seriesSpread]), res.DriverSpread)
	res.Ratio = medianRatio(res.SpreadP5, res.WarmP50)
	res.MeanRatio = medianRatio(res.SpreadMean, res.WarmMean)
	return res
}

// histMean is the mean of a histogram of 1 ns buckets, its last bucket
// (everything longer) left out.
func histMean[T uint32 | uint64](h []T) float64 {
	var n, sum float64
	for b, c := range h[:len(h)-1] {
		n += float64(c)
		sum += float64(b) * float64(c)
	}
	if n == 0 {
		return 0
	}
	return sum / n
}

// percentile is the q-quantile of a histogram of 1 ns buckets.
func percentile[T uint32 | uint64](h []T, q float64) float64 {
	var total uint64
	for _, n := range h {
		total += uint64(n)
	}
	if total == 0 {
		return 0
	}
	want := uint64(q*float64(total-1)) + 1
	var seen uint64
	for b, n := range h {
		if seen += uint64(n); seen >= want {
			return float64(b)
		}
	}
	return float64(len(h) - 1)
}

// checkAims runs every aimed frame through the loaded data plane
// (BPF_PROG_TEST_RUN with the trace) and checks that its rule decides it.
func checkAims(dp *datapath.Datapath, aims []aim, ids []uint32) error {
	for _, a := range aims {
		tr, err := dp.Trace(a.frame, 0, datapath.NoCTState)
		if err != nil {
			return err
		}
		if tr.RuleID != ids[a.rule] {
			return fmt.Errorf("spread frame aimed at rule %d (id %d) decided by rule id %d", a.rule+1, ids[a.rule], tr.RuleID)
		}
	}
	return nil
}
