package latency

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Every value falls in the bucket whose bounds hold it, buckets tile the
// range without gap or overlap, and each is at most 1/Sub of its values
// wide.
func TestBucketBounds(t *testing.T) {
	var next uint64
	for i := 0; i < Buckets; i++ {
		lo, hi := Bounds(i)
		if lo != next {
			t.Fatalf("bucket %d starts at %d, want %d (the previous one's end)", i, lo, next)
		}
		if i == Overflow {
			if lo != 1<<MaxExp || hi != math.MaxUint64 {
				t.Fatalf("overflow bucket [%d, %d)", lo, hi)
			}
			break
		}
		if w := hi - lo; i >= Sub && float64(w) > float64(lo)/Sub {
			t.Errorf("bucket %d [%d, %d) is wider than 1/%d of its values", i, lo, hi, Sub)
		}
		for _, v := range []uint64{lo, hi - 1, lo + (hi-lo)/2} {
			if b := Bucket(v); b != i {
				t.Fatalf("Bucket(%d) = %d, want %d ([%d, %d))", v, b, i, lo, hi)
			}
		}
		next = hi
	}
	for _, c := range []struct {
		ns   uint64
		want int
	}{{0, 0}, {15, 15}, {16, 16}, {31, 31}, {32, 32}, {33, 32}, {34, 33}, {1<<MaxExp - 1, Overflow - 1},
		{1 << MaxExp, Overflow}, {math.MaxUint64, Overflow}} {
		if b := Bucket(c.ns); b != c.want {
			t.Errorf("Bucket(%d) = %d, want %d", c.ns, b, c.want)
		}
	}
}

// exact is the nearest-rank quantile of sorted values.
func exact(sorted []uint64, q float64) float64 {
	r := int(math.Ceil(q * float64(len(sorted))))
	return float64(sorted[max(r, 1)-1])
}

// Quantiles of known distributions are within a bucket's width (1/Sub of
// the value, exact below Sub ns) of the exact ones.
func TestQuantileKnownDistributions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dists := map[string]func() uint64{
		"constant 250ns":     func() uint64 { return 250 },
		"constant 7ns":       func() uint64 { return 7 },
		"uniform 20ns-100us": func() uint64 { return 20 + rng.Uint64N(100_000-20) },
		"exponential mean 300ns": func() uint64 {
			return uint64(rng.ExpFloat64()*300) + 20
		},
		"bimodal 80ns/40us": func() uint64 {
			if rng.IntN(100) == 0 {
				return 40_000 + rng.Uint64N(1000)
			}
			return 80 + rng.Uint64N(10)
		},
	}
	for name, gen := range dists {
		var h Hist
		vals := make([]uint64, 100_000)
		for i := range vals {
			vals[i] = gen()
			h.Add(vals[i])
		}
		slices.Sort(vals)
		for _, q := range []float64{0, 0.001, 0.5, 0.9, 0.99, 0.999, 1} {
			got, want := h.Quantile(q), exact(vals, q)
			lo, hi := Bounds(Bucket(uint64(want)))
			if tol := float64(hi - lo); math.Abs(got-want) > tol {
				t.Errorf("%s: q%g = %.1f, want %.1f ± %.0f", name, q, got, want, tol)
			}
		}
		if h.Quantile(1) != float64(vals[len(vals)-1]) {
			t.Errorf("%s: q1 = %g, want the max %d", name, h.Quantile(1), vals[len(vals)-1])
		}
		var sum uint64
		for _, v := range vals {
			sum += v
		}
		if h.Sum != sum || h.Count != uint64(len(vals)) || h.Mean() != float64(sum)/float64(len(vals)) {
			t.Errorf("%s: count %d sum %d, want %d %d", name, h.Count, h.Sum, len(vals), sum)
		}
	}
}

// A uniform spread over one wide bucket interpolates: the median sits in
// its middle, not at an edge.
func TestQuantileInterpolates(t *testing.T) {
	var h Hist
	lo, hi := Bounds(Bucket(40_000)) // [39936, 40960)
	for v := lo; v < hi; v++ {
		h.Add(v)
	}
	if got, want := h.Quantile(0.5), float64(lo+hi)/2; math.Abs(got-want) > 1 {
		t.Errorf("median of [%d, %d) = %g, want %g", lo, hi, got, want)
	}
	if got := h.Quantile(0.25); math.Abs(got-float64(lo+(hi-lo)/4)) > 1 {
		t.Errorf("q0.25 of [%d, %d) = %g", lo, hi, got)
	}
}

// Per-CPU histograms merge into the histogram of all their packets.
func TestMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var cpus [4]Hist
	var all Hist
	for i := 0; i < 40_000; i++ {
		v := 30 + rng.Uint64N(uint64(1000*(i%4+1)))
		cpus[i%4].Add(v)
		all.Add(v)
	}
	var m Hist
	for i := range cpus {
		m.Merge(&cpus[i])
	}
	if m != all {
		t.Fatalf("merged %+v\nwant %+v", m.Summarize(), all.Summarize())
	}
	if m.Max != max(cpus[0].Max, cpus[1].Max, cpus[2].Max, cpus[3].Max) {
		t.Errorf("max %d", m.Max)
	}
	var empty Hist
	m.Merge(&empty)
	if m != all {
		t.Error("merging an empty histogram changed it")
	}
}

func TestEmpty(t *testing.T) {
	var h Hist
	if s := h.Summarize(); s != (Summary{}) {
		t.Errorf("empty histogram: %+v, want zeros", s)
	}
}

// Values past the last bucket land in the overflow bucket; quantiles
// there lie between its start and the max.
func TestOverflow(t *testing.T) {
	var h Hist
	for i := 0; i < 90; i++ {
		h.Add(100)
	}
	for _, v := range []uint64{2_000_000, 3_000_000, 5_000_000, 7_000_000, 9_000_000, 1 << 40, 1 << 41, 1 << 42, 1 << 43, 1 << 44} {
		h.Add(v)
	}
	if h.Counts[Overflow] != 10 {
		t.Fatalf("overflow bucket holds %d, want 10", h.Counts[Overflow])
	}
	if q, lo, hi := h.Quantile(0.5), uint64(100), uint64(104); q < float64(lo) || q >= float64(hi) {
		t.Errorf("median %g, want within 100's bucket [%d, %d)", q, lo, hi)
	}
	for _, q := range []float64{0.91, 0.95, 0.999} {
		if v := h.Quantile(q); v < 1<<MaxExp || v > float64(h.Max) {
			t.Errorf("q%g = %g, want within [%d, %d]", q, v, 1<<MaxExp, h.Max)
		}
	}
	if h.Quantile(1) != 1<<44 {
		t.Errorf("max %g", h.Quantile(1))
	}
}

// The histogram between two readings is that of the packets in between;
// a reset in between leaves the later reading.
func TestSince(t *testing.T) {
	var a, b, mid Hist
	for _, v := range []uint64{100, 200, 300} {
		a.Add(v)
		b.Add(v)
	}
	for _, v := range []uint64{150, 5000} {
		b.Add(v)
		mid.Add(v)
	}
	if d := b.Since(&a); d != mid {
		t.Errorf("since: %+v, want %+v", d.Summarize(), mid.Summarize())
	}
	// the max was before: the interval's is its top bucket's end
	var c Hist
	c = b
	c.Add(120)
	d := c.Since(&b)
	if lo, hi := Bounds(Bucket(120)); d.Count != 1 || d.Max < lo || d.Max >= hi {
		t.Errorf("since, max earlier: %+v, want one packet, max in [%d, %d)", d.Summarize(), lo, hi)
	}
	var reset Hist
	reset.Add(7)
	if d := reset.Since(&b); d != reset {
		t.Errorf("after a reset: %+v, want the later reading", d.Summarize())
	}
}
