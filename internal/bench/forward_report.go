package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteForwardTable prints the medians, one line per point and
// configuration, then the bars.
func WriteForwardTable(w io.Writer, res *ForwardResult) {
	fmt.Fprintf(w, "kernel %s, %d CPUs (generator CPU %d, router CPU %d), %d rounds x %.1fs, %d FORWARD rules, load %s -> %s\n",
		res.Kernel, res.CPUs, res.GenCPU, res.DUTCPU, res.Rounds, res.Duration, res.Rules, res.Load[0], res.Load[1])
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "routes\tsize\tflows\tconfiguration\tMpps\tns/pkt (router)\tbusy\tvs kernel\tvs floor\tvs 0 routes\tns/pkt (sink)\t\n")
	for _, p := range res.Points {
		vr := "-"
		if p.VsNoRoutes > 0 {
			vr = fmt.Sprintf("%.3f", p.VsNoRoutes)
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%.3f\t%.0f\t%.0f%%\t%.2f\t%.2f\t%s\t%.0f\t\n", p.Routes, p.Size, p.Flows, p.Config,
			p.Mpps, p.NsPerPacket, 100*p.Busy, p.VsKernel, p.VsFloor, vr, p.SinkNs)
	}
	tw.Flush()
	if len(res.Bars) > 0 {
		fmt.Fprintln(w, "bars (issue 16):")
		for _, b := range res.Bars {
			verdict := "met"
			if !b.Met {
				verdict = "NOT met"
			}
			fmt.Fprintf(w, "  %-60s %.3f (at most %.3f): %s, margin %.2fx [%s]\n", b.Bar, b.Value, b.Target, verdict, b.Margin, b.Where)
			if b.Note != "" {
				fmt.Fprintf(w, "  %-60s %s\n", "", b.Note)
			}
		}
	}
}

// forwardCharts are the plots of one frame size and traffic: router
// ns/packet and Mpps against the route count, one line per
// configuration.
func forwardCharts(res *ForwardResult, size int, flows string) []namedChart {
	cost := &Chart{Title: fmt.Sprintf("Router CPU time per forwarded packet, %d B, %s flow(s)", size, flows),
		XLabel: "extra routes", YLabel: "ns/packet (router NAPI thread)", LogY: true}
	rate := &Chart{Title: fmt.Sprintf("Packets forwarded per second, %d B, %s flow(s)", size, flows),
		XLabel: "extra routes", YLabel: "Mpps", LogY: true}
	for _, cfg := range res.Configs {
		c, r := Series{Name: cfg, Color: seriesColors[cfg]}, Series{Name: cfg, Color: seriesColors[cfg]}
		for _, p := range res.Points {
			if p.Config != cfg || p.Size != size || p.Flows != flows || p.NsPerPacket <= 0 {
				continue
			}
			c.X, c.Y = append(c.X, float64(p.Routes)), append(c.Y, p.NsPerPacket)
			r.X, r.Y = append(r.X, float64(p.Routes)), append(r.Y, p.Mpps)
		}
		if len(c.X) > 0 {
			cost.Series, rate.Series = append(cost.Series, c), append(rate.Series, r)
		}
	}
	return []namedChart{
		{fmt.Sprintf("cost-%d-%s.png", size, flows), cost},
		{fmt.Sprintf("rate-%d-%s.png", size, flows), rate},
	}
}

// WriteForwardReport writes dir/index.html with PNG plots per frame size
// and traffic, the table, and dir/results.json.
func WriteForwardReport(dir string, res *ForwardResult) error {
	if err := writeResults(dir, res); err != nil {
		return err
	}
	var plots []reportPlot
	for _, size := range res.Sizes {
		for _, flows := range res.Flows {
			p, err := writeCharts(dir, forwardCharts(res, size, flows))
			if err != nil {
				return err
			}
			plots = append(plots, p...)
		}
	}
	var table strings.Builder
	WriteForwardTable(&table, res)
	return writeIndex(dir, forwardTmpl, map[string]any{"R": res, "Plots": plots, "Table": table.String()})
}

var forwardTmpl = reportPage("forward", `<table>
<tr><th>started</th><td>{{.R.Started.Format "2006-01-02 15:04:05 MST"}} ({{printf "%.0f" .R.Elapsed}} s)</td></tr>
<tr><th>command</th><td><code>{{.R.Command}}</code></td></tr>
<tr><th>kernel, CPUs</th><td>{{.R.Kernel}}, {{.R.CPUs}} CPUs; generator on CPU {{.R.GenCPU}}, router NAPI thread on CPU {{.R.DUTCPU}}</td></tr>
<tr><th>load average before / after</th><td>{{index .R.Load 0}} / {{index .R.Load 1}}</td></tr>
<tr><th>runs</th><td>{{.R.Rounds}} interleaved rounds, {{.R.Duration}} s of traffic per run, {{.R.Rules}} FORWARD rules, frame sizes {{.R.Sizes}} B, routes {{.R.Routes}}</td></tr>
</table>
<h2>Results</h2>
<pre>{{.Table}}</pre>
{{range .Plots}}<img src="{{.File}}" alt="{{.Alt}}">
{{end}}
<p>Raw data: <a href="results.json">results.json</a>. Method: docs/bench.md, "bench forward".</p>
`)
