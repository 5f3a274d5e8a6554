package bench

import "testing"

// TestSeriesColors: every line of every chart has a colour, distinct from
// the others of its chart, and a configuration has one colour wherever it
// is drawn (one table).
func TestSeriesColors(t *testing.T) {
	for name, lines := range map[string][]string{
		"macro":   AllDUTs,
		"latency": LatencyDUTs,
		"forward": ForwardConfigs,
	} {
		seen := map[[4]uint8]string{}
		for _, l := range lines {
			c, ok := seriesColors[l]
			if !ok {
				t.Errorf("%s chart: %s has no colour", name, l)
				continue
			}
			k := [4]uint8{c.R, c.G, c.B, c.A}
			if o, dup := seen[k]; dup {
				t.Errorf("%s chart: %s and %s have one colour %v", name, o, l, c)
			}
			seen[k] = l
		}
	}
}
