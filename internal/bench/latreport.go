package bench

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
)

// WriteLatencyTable prints one line per point, then the bar of issue 17
// (p99.9 within 2x p50 at the largest rule count) for each DUT.
func WriteLatencyTable(w io.Writer, res *LatencyResult) {
	fmt.Fprintf(w, "%-5s %-15s %6s %9s %9s %8s %8s %8s %9s %8s %6s %13s\n", "sweep", "dut", "rules", "load_pps", "offered",
		"p50_us", "p99_us", "p99.9_us", "max_us", "jitter", "loss", "xdpfw_p50/p99.9_ns")
	for _, p := range res.Points {
		proc := "-"
		if p.Proc != nil {
			proc = fmt.Sprintf("%.0f/%.0f", p.Proc.P50, p.Proc.P999)
		}
		fmt.Fprintf(w, "%-5s %-15s %6d %9.0f %9.0f %8.1f %8.1f %8.1f %9.1f %8.1f %5.1f%% %13s\n", p.Sweep, p.DUT, p.Rules, p.Rate,
			p.OfferedPPS, p.P50, p.P99, p.P999, p.Max, p.Jitter, 100*p.Loss, proc)
	}
	fmt.Fprintln(w, "one-way latency generator -> DUT (forwarding) -> sink, microseconds, of the packets received;")
	fmt.Fprintln(w, "jitter: mean |latency - mean latency|; loss: 1 - received/sent; offered: packets sent per second achieved")
	fmt.Fprintln(w, "(the generator moves its schedule when it was preempted: lower than load_pps on a busy machine);")
	fmt.Fprintln(w, "rules 0: a floor (no firewall); xdpfw_p50/p99.9_ns: xdpfw's own processing time per packet (its histograms)")
	if bars := latencyBars(res); len(bars) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "p99.9 / p50 at the rule sweep's largest rule count (issue 17's bar: <= 2):")
		for _, b := range bars {
			fmt.Fprintf(w, "  %s\n", b)
		}
	}
}

// latencyBars states the ratio p99.9/p50 of each DUT at the rule sweep's
// largest rule count, and of the floors, end to end and for xdpfw's own
// processing time.
func latencyBars(res *LatencyResult) []string {
	if len(res.Rules) == 0 {
		return nil
	}
	top := res.Rules[0]
	for _, n := range res.Rules {
		top = max(top, n)
	}
	var out []string
	for _, p := range res.Points {
		if !res.inRuleSweep(p) || (p.Rules != top && p.Rules != 0) || p.P50 == 0 {
			continue
		}
		s := fmt.Sprintf("%-15s %6d rules: end to end %6.1f / %6.1f us = %5.2fx", p.DUT, p.Rules, p.P999, p.P50, p.P999/p.P50)
		if p.Proc != nil && p.Proc.P50 > 0 {
			s += fmt.Sprintf("; processing time %6.0f / %4.0f ns = %5.2fx", p.Proc.P999, p.Proc.P50, p.Proc.P999/p.Proc.P50)
		}
		out = append(out, s)
	}
	return out
}

// inLoadSweep: p is a point of the load sweep (a point both sweeps share
// is measured once).
func (res *LatencyResult) inLoadSweep(p *LatPoint) bool {
	return (p.Rules == res.LoadRules || p.Rules == 0) && slices.Contains(res.Rates, p.Rate)
}

// inRuleSweep: p is a point of the rule sweep (the floors: their point at
// the sweep's load).
func (res *LatencyResult) inRuleSweep(p *LatPoint) bool {
	return p.Rate == res.LightRate && (p.Rules == 0 || slices.Contains(res.Rules, p.Rules))
}

// latencyCharts are the report's plots, in the manner of the thesis'
// figures: latency against the offered load, and against the rule count.
func latencyCharts(res *LatencyResult) []namedChart {
	var out []namedChart
	type metric struct {
		file, title, ylabel string
		logY                bool
		get                 func(p *LatPoint) float64
	}
	series := func(c *Chart, sweep string, m metric, x func(p *LatPoint) float64, suffix string, light bool) {
		for _, d := range res.DUTs {
			s := Series{Name: d + suffix, Color: seriesColors[d]}
			if light {
				s.Color = lighter(s.Color)
			}
			var pts []*LatPoint
			for _, p := range res.Points {
				if p.DUT == d && (sweep == "load" && res.inLoadSweep(p) || sweep == "rules" && res.inRuleSweep(p)) {
					pts = append(pts, p)
				}
			}
			slices.SortFunc(pts, func(a, b *LatPoint) int { return cmp.Compare(x(a), x(b)) })
			for _, p := range pts {
				s.X, s.Y = append(s.X, x(p)), append(s.Y, m.get(p))
			}
			if len(s.X) > 0 {
				c.Series = append(c.Series, s)
			}
		}
	}
	p50 := metric{get: func(p *LatPoint) float64 { return p.P50 }}
	p999 := metric{get: func(p *LatPoint) float64 { return p.P999 }}
	if len(res.Rates) > 0 {
		load := func(p *LatPoint) float64 { return p.OfferedPPS }
		c := &Chart{Title: fmt.Sprintf("One-way latency vs offered load, %d rules, %d B frames", res.LoadRules, res.Size),
			XLabel: "offered load (packets/s, achieved)", YLabel: "latency (us): p50 dark, p99.9 light", LogX: true, LogY: true}
		series(c, "load", p50, load, " p50", false)
		series(c, "load", p999, load, " p99.9", true)
		out = append(out, namedChart{"latency-load.png", c})
		j := &Chart{Title: fmt.Sprintf("Jitter vs offered load, %d rules", res.LoadRules),
			XLabel: "offered load (packets/s, achieved)", YLabel: "jitter: mean |latency - mean| (us)", LogX: true, LogY: true}
		series(j, "load", metric{get: func(p *LatPoint) float64 { return p.Jitter }}, load, "", false)
		out = append(out, namedChart{"jitter-load.png", j})
		l := &Chart{Title: fmt.Sprintf("Loss vs offered load, %d rules", res.LoadRules),
			XLabel: "offered load (packets/s, achieved)", YLabel: "lost (%)", LogX: true}
		series(l, "load", metric{get: func(p *LatPoint) float64 { return 100 * p.Loss }}, load, "", false)
		out = append(out, namedChart{"loss-load.png", l})
	}
	if len(res.Rules) > 0 {
		rulesX := func(p *LatPoint) float64 { return float64(max(p.Rules, 1)) }
		c := &Chart{Title: fmt.Sprintf("One-way latency vs rule count, %.0f packets/s offered, spread over the rules", res.LightRate),
			XLabel: "rules (floors: none, drawn at 1)", YLabel: "latency (us): p50 dark, p99.9 light", LogX: true, LogY: true}
		series(c, "rules", p50, rulesX, " p50", false)
		series(c, "rules", p999, rulesX, " p99.9", true)
		out = append(out, namedChart{"latency-rules.png", c})
		j := &Chart{Title: fmt.Sprintf("Jitter vs rule count, %.0f packets/s offered", res.LightRate),
			XLabel: "rules (floors: none, drawn at 1)", YLabel: "jitter: mean |latency - mean| (us)", LogX: true, LogY: true}
		series(j, "rules", metric{get: func(p *LatPoint) float64 { return p.Jitter }}, rulesX, "", false)
		out = append(out, namedChart{"jitter-rules.png", j})
	}
	return out
}

// WriteLatencyReport writes dir/index.html (self-contained: the plots
// are inside it), the plots as PNG files and dir/results.json.
func WriteLatencyReport(dir string, res *LatencyResult) error {
	if err := writeResults(dir, res); err != nil {
		return err
	}
	plots, err := writeCharts(dir, latencyCharts(res))
	if err != nil {
		return err
	}
	var table strings.Builder
	WriteLatencyTable(&table, res)
	return writeIndex(dir, latencyTmpl, map[string]any{"R": res, "Plots": plots, "Table": table.String()})
}

var latencyTmpl = reportPage("latency", `<table>
<tr><th>started</th><td>{{.R.Started.Format "2006-01-02 15:04:05 MST"}} ({{printf "%.0f" .R.Elapsed}} s)</td></tr>
<tr><th>command</th><td><code>{{.R.Command}}</code></td></tr>
<tr><th>kernel, CPUs</th><td>{{.R.Kernel}}, {{.R.CPUs}} CPUs</td></tr>
<tr><th>load average before / after</th><td>{{index .R.Load 0}} / {{index .R.Load 1}}</td></tr>
<tr><th>traffic</th><td>{{.R.Size}} B frames, {{.R.Flows}} flows (at most one per rule), loads {{.R.Rates}} pps at {{.R.LoadRules}} rules, rules {{.R.Rules}} at {{.R.LightRate}} pps</td></tr>
<tr><th>DUTs</th><td>{{range .R.DUTs}}{{.}} {{end}}</td></tr>
{{range $d, $why := .R.Skipped}}<tr><th>not measured</th><td>{{$d}}: {{$why}}</td></tr>{{end}}
</table>
<p>Three network namespaces: generator, DUT (a router), sink, joined by two veth pairs. A paced
live-frames XDP generator writes the kernel clock into every packet; the DUT forwards it (xdpfw's
XDP fast path, a bare XDP forwarder, or the kernel with iptables/nftables rules in FORWARD); the
sink's XDP program reads the clock again: one-way latency, one kernel clock. Every flow is answered
once before measuring (a warm-up), so connections are established. See docs/realtime.md.</p>
<h2>Results</h2>
<pre>{{.Table}}</pre>
{{range .Plots}}<img src="{{.Src}}" alt="{{.Alt}}">
{{end}}
`)
