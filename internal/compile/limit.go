package compile

// The Go model of the data plane's token buckets (lib/ratelimit.h, GCRA)
// for -m limit, given a clock: the reference matcher and the Go twin of
// the classifier test and take tokens as the data plane does, so tests
// that drive the clock (or run within one bucket's interval) agree
// packet by packet. docs/limits.md.

// bucketReady is fw_rl_ready: does the bucket whose theoretical arrival
// time is tat hold a token at now (ns)? A bucket never used (tat 0) is full.
func bucketReady(tat, now, interval uint64, burst uint32) bool {
	t := max(tat, now)
	b := uint64(max(burst, 1))
	return t-now <= (b-1)*interval
}

// LimitState is the state of every -m limit bucket of a rule set, by
// rule index, at the clock Now (ns, the data plane's bpf_ktime_get_ns).
// The zero value's buckets are full.
type LimitState struct {
	Now uint64
	Tat map[int]uint64
}

// ready tells whether rule i's bucket (limit l) holds a token now.
func (s *LimitState) ready(i int, interval uint64, burst uint32) bool {
	if s == nil {
		return true // a nil state is a fresh one: every bucket is full
	}
	return bucketReady(s.Tat[i], s.Now, interval, burst)
}

// take takes a token from rule i's bucket, if there is one (fw_rl_take).
func (s *LimitState) take(i int, interval uint64, burst uint32) bool {
	if !s.ready(i, interval, burst) {
		return false
	}
	if s != nil {
		if s.Tat == nil {
			s.Tat = map[int]uint64{}
		}
		s.Tat[i] = max(s.Tat[i], s.Now) + interval
	}
	return true
}
