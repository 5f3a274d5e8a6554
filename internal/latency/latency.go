// Package latency is the arithmetic of the data plane's per-packet
// processing-time histograms (bpf/lib/latency.h, docs/realtime.md): the
// log-linear bucket layout of struct fw_lat_hist, merging per-CPU
// histograms, and quantiles. Pure Go: no kernel needed.
//
// Layout: values below Sub nanoseconds have a bucket each; every
// power-of-two range [2^k, 2^(k+1)) above is split in Sub equal buckets,
// so a bucket is at most 1/Sub (6.25 %) of its values wide; from 2^MaxExp
// ns (1.05 ms) on, one overflow bucket holds everything.
package latency

import (
	"math"
	"math/bits"
)

// The layout of bpf/types.h (FW_LAT_*); internal/datapath checks the
// generated struct against Buckets.
const (
	SubBits = 4
	Sub     = 1 << SubBits
	MaxExp  = 20
	// Buckets counts the buckets, the overflow bucket (the last) included.
	Buckets = (MaxExp-SubBits+1)*Sub + 1
	// Overflow is the index of the overflow bucket.
	Overflow = Buckets - 1
)

// Bucket is the bucket of a value of ns nanoseconds: the twin of
// fw_lat_bucket (bpf/lib/latency.h).
func Bucket(ns uint64) int {
	if ns < Sub {
		return int(ns)
	}
	if ns>>MaxExp != 0 {
		return Overflow
	}
	k := bits.Len64(ns) - 1 // floor(log2 ns)
	return (k-SubBits+1)*Sub + int(ns>>(k-SubBits))&(Sub-1)
}

// Bounds are the values bucket i holds: [lo, hi) nanoseconds. The overflow
// bucket's hi is math.MaxUint64 (its values are known only up to the
// histogram's Max).
func Bounds(i int) (lo, hi uint64) {
	switch {
	case i < Sub:
		return uint64(i), uint64(i) + 1
	case i >= Overflow:
		return 1 << MaxExp, math.MaxUint64
	}
	k := i/Sub + SubBits - 1
	sub := uint64(i % Sub)
	w := uint64(1) << (k - SubBits)
	return (Sub + sub) * w, (Sub + sub + 1) * w
}

// Hist is one histogram: sampled packets' processing times.
type Hist struct {
	Count  uint64          // packets measured
	Sum    uint64          // their nanoseconds, summed
	Max    uint64          // the longest, ns
	Counts [Buckets]uint64 // per bucket
}

// Add counts one value of ns nanoseconds (what the data plane does; the
// tests' way to build a known distribution).
func (h *Hist) Add(ns uint64) {
	h.Counts[Bucket(ns)]++
	h.Count++
	h.Sum += ns
	h.Max = max(h.Max, ns)
}

// Merge adds o into h: the histogram of both sets of packets (per-CPU
// histograms sum into one).
func (h *Hist) Merge(o *Hist) {
	h.Count += o.Count
	h.Sum += o.Sum
	h.Max = max(h.Max, o.Max)
	for i := range h.Counts {
		h.Counts[i] += o.Counts[i]
	}
}

// Mean is the mean in nanoseconds (0 when empty).
func (h *Hist) Mean() float64 {
	if h.Count == 0 {
		return 0
	}
	return float64(h.Sum) / float64(h.Count)
}

// Quantile is the value in nanoseconds below which a fraction q (0..1) of
// the packets lie: the bucket that holds the packet of rank ceil(q*Count),
// interpolated linearly within it (its packets taken as spread evenly over
// it), never above Max. The error is at most the bucket's width: exact
// below Sub ns, within 1/Sub of the value above. 0 when empty; Max for
// q >= 1. The bucket counts are what counts: a histogram read while the
// data plane writes may have a Count a packet ahead of them.
func (h *Hist) Quantile(q float64) float64 {
	var total uint64
	for _, c := range h.Counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	if q >= 1 {
		return float64(h.Max)
	}
	rank := math.Ceil(q * float64(total))
	rank = max(rank, 1)
	var cum uint64
	for i, c := range h.Counts {
		if c == 0 || float64(cum+c) < rank {
			cum += c
			continue
		}
		lo, hi := Bounds(i)
		if hi-lo == 1 {
			return float64(lo) // a bucket of one value
		}
		top := float64(hi)
		if i == Overflow || float64(h.Max) < top {
			top = max(float64(h.Max)+1, float64(lo)+1) // the bucket's values end at Max
		}
		// the c packets of the bucket at lo + (j - 1/2) * width/c, j = 1..c
		v := float64(lo) + (rank-float64(cum)-0.5)*(top-float64(lo))/float64(c)
		return min(v, float64(h.Max))
	}
	return float64(h.Max) // not reached: rank <= total
}

// Summary is a histogram's headline numbers, ns.
type Summary struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean_ns"`
	P50   float64 `json:"p50_ns"`
	P90   float64 `json:"p90_ns"`
	P99   float64 `json:"p99_ns"`
	P999  float64 `json:"p99_9_ns"`
	Max   uint64  `json:"max_ns"`
}

// Summarize computes h's Summary.
func (h *Hist) Summarize() Summary {
	return Summary{Count: h.Count, Mean: h.Mean(), P50: h.Quantile(0.5), P90: h.Quantile(0.9), P99: h.Quantile(0.99),
		P999: h.Quantile(0.999), Max: h.Max}
}

// Since is the histogram of the packets counted after earlier, a
// histogram of the same packets read before h: bucket by bucket, h less
// earlier. A count that went down means the histograms were reset in
// between: then h is all there is. Max is the interval's when it grew
// (h.Max > earlier.Max), else the top of the highest bucket the interval
// used, at most h.Max.
func (h *Hist) Since(earlier *Hist) Hist {
	var d Hist
	for i, c := range h.Counts {
		if c < earlier.Counts[i] || h.Count < earlier.Count || h.Sum < earlier.Sum {
			return *h
		}
		d.Counts[i] = c - earlier.Counts[i]
	}
	d.Count, d.Sum = h.Count-earlier.Count, h.Sum-earlier.Sum
	if h.Max > earlier.Max {
		d.Max = h.Max
		return d
	}
	for i := Overflow; i >= 0; i-- {
		if d.Counts[i] > 0 {
			_, hi := Bounds(i)
			d.Max = min(hi-1, h.Max)
			break
		}
	}
	return d
}
