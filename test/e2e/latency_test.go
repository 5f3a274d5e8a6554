package e2e

import (
	"strings"
	"testing"

	"github.com/xdpfw/xdpfw/testutil"
)

// latencyJSON is `xdpfw stats --latency --json` and `status --latency --json`.
type latencyJSON struct {
	Sample uint32 `json:"sample"`
	Hists  []struct {
		Chain   string  `json:"chain"`
		Outcome string  `json:"outcome"`
		Count   uint64  `json:"count"`
		P50     float64 `json:"p50_ns"`
		P999    float64 `json:"p99_9_ns"`
		Max     uint64  `json:"max_ns"`
	} `json:"histograms"`
}

func (l *latencyJSON) count(chain, outcome string) uint64 {
	for _, h := range l.Hists {
		if h.Chain == chain && h.Outcome == outcome {
			return h.Count
		}
	}
	return 0
}

func (l *latencyJSON) total() (n uint64) {
	for _, h := range l.Hists {
		n += h.Count
	}
	return n
}

// TestLatencyCLI: `load --latency-sample 1` times every packet; stats,
// status and the metrics show the packets a rule dropped under
// INPUT/drop; `stats --latency-sample 0 --reset-latency` stops and
// empties; nothing is timed while off; a reload keeps the sampling.
func TestLatencyCLI(t *testing.T) {
	testutil.RequireRoot(t)
	l := newPair(t)
	const nDrop, nAccept = 7, 5
	accepted, dropped := newUDPSink(t, l.srv, 5000), newUDPSink(t, l.srv, 5001)
	f := newFW(t, l.srv)
	f.mustRun("load", "-i", l.srvIf, "--latency-sample", "1",
		writeRules(t, "lat.rules", "-A INPUT -p udp --dport 5001 -j DROP", "-A INPUT -p udp --dport 5000 -j ACCEPT"))
	udp := newUDPSender(t, l.cli, "")
	send := func() {
		udp.send(t, hostPort(l.srv4, 5001), "drop", 0, nDrop)
		udp.send(t, hostPort(l.srv4, 5000), "acc", 0, nAccept)
		accepted.wait(t, "acc", nAccept)
		dropped.sync(t)
	}
	send()

	var lj latencyJSON
	out := f.decode(&lj, "stats", "--latency", "--json").stdout
	// INPUT/drop: only the datagrams the rule drops; accept: those and
	// whatever else the peer sends (neighbour discovery)
	if lj.Sample != 1 || lj.count("INPUT", "drop") != nDrop || lj.count("INPUT", "accept") < nAccept {
		t.Fatalf("stats --latency --json: want sample 1, %d INPUT/drop, at least %d INPUT/accept:\n%s", nDrop, nAccept, out)
	}
	for _, h := range lj.Hists {
		if h.Count > 0 && (h.P50 <= 0 || h.Max == 0 || h.P999 > float64(h.Max)) {
			t.Errorf("%s/%s: implausible p50 %g, p99.9 %g, max %d", h.Chain, h.Outcome, h.P50, h.P999, h.Max)
		}
	}
	if out := f.mustRun("status", "--latency").stdout; !strings.Contains(out, "every packet timed") ||
		!strings.Contains(out, "p99.9") || !strings.Contains(out, "INPUT") || !strings.Contains(out, "drop") {
		t.Errorf("status --latency:\n%s", out)
	}
	if out := f.mustRun("status").stdout; !strings.Contains(out, "latency: every packet timed") {
		t.Errorf("status does not say that latency sampling is on:\n%s", out)
	}
	if out := f.mustRun("stats").stdout; !strings.Contains(out, "p99.9") {
		t.Errorf("stats has no latency section:\n%s", out)
	}
	prom := f.mustRun("stats", "--prometheus").stdout
	for _, want := range []string{`xdpfw_packet_processing_seconds_count{chain="INPUT",outcome="drop"} 7`, "xdpfw_latency_sample 1",
		`xdpfw_packet_processing_seconds_bucket{chain="INPUT",outcome="drop",le="+Inf"} 7`} {
		if !strings.Contains(prom, want) {
			t.Errorf("stats --prometheus lacks %q:\n%s", want, prom)
		}
	}

	f.mustRun("stats", "--latency-sample", "0", "--reset-latency")
	send()
	lj = latencyJSON{}
	out = f.decode(&lj, "status", "--latency", "--json").stdout
	if lj.Sample != 0 || lj.total() != 0 {
		t.Errorf("after --latency-sample 0 --reset-latency and more traffic: want sample 0 and nothing timed:\n%s", out)
	}
	// a reload keeps the setting in force
	f.mustRun("stats", "--latency-sample", "8")
	f.mustRun("load", "-i", l.srvIf, writeRules(t, "lat2.rules", "-A INPUT -p udp --dport 5001 -j DROP"))
	if out := f.mustRun("status").stdout; !strings.Contains(out, "latency: 1 packet in 8 timed per CPU") {
		t.Errorf("a reload without --latency-sample changed the sampling (1 in 8 before):\n%s", out)
	}
}
