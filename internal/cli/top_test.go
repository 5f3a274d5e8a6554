package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/internal/latency"
	"github.com/xdpfw/xdpfw/internal/telemetry"
)

// top shows the interval's processing time while latency sampling is on,
// and no latency table while it is off.
func TestRenderTopLatency(t *testing.T) {
	r := &telemetry.Rates{To: time.Unix(0, 0), Seconds: 1,
		Latency: []telemetry.LatencyRate{{Chain: "INPUT", Outcome: "drop", PPS: 12,
			Summary: latency.Summary{Count: 12, P50: 110, P90: 240, P99: 1500, P999: 5660, Max: 5680}}}}
	var b strings.Builder
	if err := renderTop(&b, r, 5, 0); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"latency (this interval)", "p99.9", "110ns", "240ns", "1.5µs", "5.66µs", "5.68µs", "INPUT drop"} {
		if !strings.Contains(out, want) {
			t.Errorf("top lacks %q:\n%s", want, out)
		}
	}
	r.Latency = nil
	b.Reset()
	if err := renderTop(&b, r, 5, 0); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "latency") {
		t.Errorf("top shows latency with sampling off:\n%s", b.String())
	}
}
