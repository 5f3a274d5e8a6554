package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/xdpfw/xdpfw/internal/latency"
	"github.com/xdpfw/xdpfw/internal/telemetry"
)

// latencySampleHelp describes --latency-sample (load, stats).
const latencySampleHelp = "time one packet in N per CPU in the data plane (per-packet processing time by chain and outcome: " +
	"stats --latency, status --latency, metrics); 0 turns it off (then a packet pays one load and two branches)"

// printLatency prints the processing-time summaries of the chains and
// outcomes that timed packets (all of them with all).
func printLatency(w io.Writer, l *telemetry.Latency, all bool) error {
	if l == nil {
		_, err := fmt.Fprintln(w, "latency: the program in force predates latency sampling (`xdpfw load` again)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "latency: %s; per-packet processing time in the data plane, entry to verdict, all CPUs\n", sampleText(l.Sample))
	fmt.Fprintf(tw, "chain\toutcome\tpackets\tmean\tp50\tp90\tp99\tp99.9\tmax\t\n")
	for _, h := range l.Hists {
		if h.Count == 0 && !all {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", h.Chain, h.Outcome, h.Count, summaryCols(h.Summary))
	}
	return tw.Flush()
}

// summaryCols are a summary's mean, p50, p90, p99, p99.9 and max,
// tab-separated, tab-terminated.
func summaryCols(s latency.Summary) string {
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t", ns(s.Mean), ns(s.P50), ns(s.P90), ns(s.P99), ns(s.P999), ns(float64(s.Max)))
}

// sampleText says how packets are sampled.
func sampleText(n uint32) string {
	switch n {
	case 0:
		return "sampling off (--latency-sample N turns it on)"
	case 1:
		return "every packet timed"
	}
	return fmt.Sprintf("1 packet in %d timed per CPU", n)
}

// ns formats nanoseconds: 87ns, 1.25µs, 3.4ms.
func ns(v float64) string {
	switch {
	case v < 1000:
		return fmt.Sprintf("%.0fns", v)
	case v < 1e6:
		return fmt.Sprintf("%.3gµs", v/1e3)
	}
	return fmt.Sprintf("%.3gms", v/1e6)
}

// latencyControl changes the running data plane's latency sampling to
// sample (when set) and empties its histograms (when reset). One map
// write each: no lock is needed, and the record of the rules is not
// touched.
func (e *env) latencyControl(set bool, sample uint32, reset bool) error {
	if !set && !reset {
		return nil
	}
	fw, err := e.openRead()
	if err != nil {
		return err
	}
	defer fw.Close()
	dp := fw.Datapath()
	if set {
		if err := dp.SetLatencySample(sample); err != nil {
			return err
		}
	}
	if reset {
		return dp.ResetLatency()
	}
	return nil
}
