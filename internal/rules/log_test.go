package rules

import "testing"

// TestLogRate checks ParseLogRate (the load/apply flags' parser) and the
// interval the data plane's token bucket gets.
func TestLogRate(t *testing.T) {
	for _, c := range []struct {
		in       string
		canon    string
		interval uint64
	}{
		{"10/s", "10/sec", 100_000_000},
		{"10", "10/sec", 100_000_000},
		{"1000000/second", "1000000/sec", 1000},
		{"3/hour", "3/hour", 1_200_000_000_000},
		{"5/M", "5/min", 12_000_000_000},
		{"1/day", "1/day", 86_400_000_000_000},
	} {
		r, err := ParseLogRate(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if r.String() != c.canon || r.IntervalNS() != c.interval {
			t.Errorf("%q: got %s every %d ns, want %s every %d ns", c.in, r, r.IntervalNS(), c.canon, c.interval)
		}
	}
	for _, bad := range []string{"", "0/s", "-1/s", "x/s", "10/week", "10/", "1000001/s"} {
		if r, err := ParseLogRate(bad); err == nil {
			t.Errorf("%q: accepted as %s", bad, r)
		}
	}
	if (LogRate{}).IntervalNS() != 0 || !(LogRate{}).IsZero() {
		t.Error("the zero rate is not 'unset'")
	}
}
