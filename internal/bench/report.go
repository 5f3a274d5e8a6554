package bench

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// WriteMacroTable prints the results: one line per DUT and point, then
// xdpfw against the others.
func WriteMacroTable(w io.Writer, res *MacroResult) {
	fmt.Fprintf(w, "%6s %5s %-15s %9s %9s %5s %9s %9s %8s %8s\n", "rules", "size", "dut",
		"offer_Mpps", "drop_Mpps", "busy", "ns/pkt", "stat_ns", "rate/flr", "cost/flr")
	for _, p := range res.Points {
		fmt.Fprintf(w, "%6d %5d %-15s %9.3f %9.4f %4.0f%% %9.0f %9.0f %8s %8s\n", p.Rules, p.Size, p.DUT,
			p.OfferedMpps, p.DroppedMpps, 100*p.Busy, p.NSPerPacket, p.StatNS, ratio(p.RateVsFloor), ratio(p.CostVsFloor))
	}
	if res.Spread {
		fmt.Fprintln(w, "traffic spread over the whole rule set (--spread): each packet aimed at the next rule of a random order")
		fmt.Fprintln(w, "offer/drop_Mpps: generated / dropped by the DUT's rules, per second (median over rounds);")
	} else {
		fmt.Fprintln(w, "offer/drop_Mpps: generated / dropped by the DUT's intended rule, per second (median over rounds);")
	}
	fmt.Fprintln(w, "busy: DUT NAPI thread CPU time / window; ns/pkt: that CPU time per dropped packet;")
	fmt.Fprintln(w, "stat_ns: softirq+system+irq of the DUT's CPU (/proc/stat, includes anything else on it) per dropped packet;")
	fmt.Fprintln(w, "rate/flr: drop rate / xdp-drop's; cost/flr: xdp-drop's ns/pkt / this one's (median of per-round ratios)")
	if len(res.Summary) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "xdpfw against the others (higher is better for xdpfw; rate: drop rates, cost: inverse ns/pkt)\n")
	fmt.Fprintf(w, "%6s %5s %10s %10s %10s", "rules", "size", "xdpfw_Mpps", "floor_rate", "floor_cost")
	others := res.Summary[0].Versus
	for _, v := range others {
		fmt.Fprintf(w, " %*s %*s", len(v.DUT)+5, v.DUT+"_rate", len(v.DUT)+5, v.DUT+"_cost")
	}
	fmt.Fprintln(w)
	for _, s := range res.Summary {
		fmt.Fprintf(w, "%6d %5d %10.3f %10s %10s", s.Rules, s.Size, s.XdpfwDroppedMpps, ratio(s.FloorRate), ratio(s.FloorCost))
		for _, o := range others {
			v := s.Vs(o.DUT)
			fmt.Fprintf(w, " %*s %*s", len(o.DUT)+5, ratio(v.Rate), len(o.DUT)+5, ratio(v.Cost))
		}
		fmt.Fprintln(w)
	}
}

func ratio(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v >= 100:
		return fmt.Sprintf("%.0fx", v)
	case v >= 10:
		return fmt.Sprintf("%.1fx", v)
	}
	return fmt.Sprintf("%.2fx", v)
}

// WriteMacroReport writes dir/index.html with PNG plots per frame size
// (drop rate, ns/packet and ratio to the floor, against the rule count),
// the table, and dir/results.json.
func WriteMacroReport(dir string, res *MacroResult) error {
	if err := writeResults(dir, res); err != nil {
		return err
	}
	type section struct {
		Size  int
		Plots []reportPlot
	}
	var sections []section
	for _, size := range res.Sizes {
		plots, err := writeCharts(dir, macroCharts(res, size))
		if err != nil {
			return err
		}
		sections = append(sections, section{Size: size, Plots: plots})
	}
	var table strings.Builder
	WriteMacroTable(&table, res)
	return writeIndex(dir, reportTmpl, map[string]any{"R": res, "Sections": sections, "Table": table.String()})
}

// A report is a directory: results.json, PNG plots and index.html.

// reportPlot is a plot in a report's index: its PNG file, and the same
// PNG as a data URL for a self-contained page.
type reportPlot struct {
	File, Alt string
	Src       template.URL
}

// writeResults makes dir and writes res into it as results.json.
func writeResults(dir string, res any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "results.json"), js, 0o644)
}

// writeCharts renders each chart into dir as its PNG file.
func writeCharts(dir string, charts []namedChart) ([]reportPlot, error) {
	var plots []reportPlot
	for _, c := range charts {
		b, err := c.chart.PNG()
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, c.file), b, 0o644); err != nil {
			return nil, err
		}
		plots = append(plots, reportPlot{File: c.file, Alt: c.chart.Title,
			Src: template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(b))})
	}
	return plots, nil
}

// writeIndex writes dir/index.html from tmpl and data.
func writeIndex(dir string, tmpl *template.Template, data any) error {
	f, err := os.Create(filepath.Join(dir, "index.html"))
	if err != nil {
		return err
	}
	err = tmpl.Execute(f, data)
	return errors.Join(err, f.Close())
}

type namedChart struct {
	file  string
	chart *Chart
}

// macroCharts are the plots of one frame size.
func macroCharts(res *MacroResult, size int) []namedChart {
	rate := &Chart{Title: fmt.Sprintf("Packets dropped per second, %d B frames, new flows", size),
		XLabel: "rules (only the last one matches)", YLabel: "Mpps", LogX: true, LogY: true}
	cost := &Chart{Title: fmt.Sprintf("DUT CPU time per dropped packet, %d B frames", size),
		XLabel: "rules (only the last one matches)", YLabel: "ns/packet (NAPI thread)", LogX: true, LogY: true}
	floor := &Chart{Title: fmt.Sprintf("Relative to a bare XDP_DROP program, %d B frames", size),
		XLabel: "rules (only the last one matches)", YLabel: "ratio to XDP_DROP (1 = the floor; rate, or cost: inverse ns/pkt)", LogX: true, LogY: true,
		HLines: []float64{0.5, 1}}
	for _, d := range res.DUTs {
		var r, c, f, fc Series
		r.Name, c.Name, f.Name = d, d, d+" (rate)"
		r.Color, c.Color, f.Color = seriesColors[d], seriesColors[d], seriesColors[d]
		fc.Name, fc.Color = d+" (cost)", lighter(seriesColors[d])
		for _, p := range res.Points {
			if p.DUT != d || p.Size != size {
				continue
			}
			x := float64(p.Rules)
			r.X, r.Y = append(r.X, x), append(r.Y, p.DroppedMpps)
			c.X, c.Y = append(c.X, x), append(c.Y, p.NSPerPacket)
			f.X, f.Y = append(f.X, x), append(f.Y, p.RateVsFloor)
			fc.X, fc.Y = append(fc.X, x), append(fc.Y, p.CostVsFloor)
		}
		rate.Series = append(rate.Series, r)
		cost.Series = append(cost.Series, c)
		if d != DUTDrop && len(f.X) > 0 && f.Y[0] > 0 {
			floor.Series = append(floor.Series, f)
			if d == DUTXdpfw {
				floor.Series = append(floor.Series, fc)
			}
		}
	}
	out := []namedChart{
		{fmt.Sprintf("rate-%d.png", size), rate},
		{fmt.Sprintf("cost-%d.png", size), cost},
	}
	if len(floor.Series) > 0 {
		out = append(out, namedChart{fmt.Sprintf("floor-%d.png", size), floor})
	}
	return out
}

func lighter(c color.RGBA) color.RGBA {
	l := func(v uint8) uint8 { return v + (0xff-v)/2 }
	return color.RGBA{l(c.R), l(c.G), l(c.B), 0xff}
}

var reportTmpl = reportPage("macro", `<table>
<tr><th>started</th><td>{{.R.Started.Format "2006-01-02 15:04:05 MST"}} ({{printf "%.0f" .R.Elapsed}} s)</td></tr>
<tr><th>command</th><td><code>{{.R.Command}}</code></td></tr>
<tr><th>kernel, CPUs</th><td>{{.R.Kernel}}, {{.R.CPUs}} CPUs; generator on CPU {{.R.GenCPU}}, DUT NAPI thread on CPU {{.R.DUTCPU}}</td></tr>
<tr><th>load average before / after</th><td>{{index .R.Load 0}} / {{index .R.Load 1}}</td></tr>
<tr><th>runs</th><td>{{.R.Rounds}} interleaved rounds, {{.R.Duration}} s of traffic per run, rules {{.R.Rules}}, frame sizes {{.R.Sizes}} B</td></tr>
<tr><th>DUTs</th><td>{{range .R.DUTs}}{{.}} {{end}}</td></tr>
{{range $d, $why := .R.Skipped}}<tr><th>not measured</th><td>{{$d}}: {{$why}}</td></tr>{{end}}
</table>
<p>Topology: two network namespaces joined by a veth pair. A live-frames XDP traffic generator
(BPF_PROG_RUN, BPF_F_TEST_XDP_LIVE_FRAMES) on one CPU makes every packet a new flow (IPv4/UDP, new
source port, then new source address) and redirects it into the veth; the DUT's veth is polled by
its own NAPI thread on the other CPU, where the DUT drops the packet: xdpfw, a bare XDP_DROP program
(the floor), or iptables in the DUT's namespace (an XDP_PASS program hands frames to the stack).
The rule set has N rules of which only the last matches. See docs/bench.md for the method and its
caveats (a veth is not a NIC).</p>
<h2>Results</h2>
<pre>{{.Table}}</pre>
{{range .Sections}}<h2>{{.Size}} B frames</h2>
{{range .Plots}}<img src="{{.File}}" alt="{{.Alt}}">
{{end}}{{end}}
<p>Raw data, every run: <a href="results.json">results.json</a>.</p>
`)

// reportPage is a report's index.html template: the page of `xdpfw
// bench cmd`, its style and heading, then body.
func reportPage(cmd, body string) *template.Template {
	return template.Must(template.New(cmd).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>xdpfw bench ` + cmd + `</title>
<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}
pre{background:#f6f6f6;padding:1em;overflow-x:auto;font-size:12px}
td,th{padding:2px 10px;text-align:left}img{max-width:100%;border:1px solid #ddd;margin:4px 0}</style></head>
<body>
<h1>xdpfw bench ` + cmd + `</h1>
` + body + `</body></html>
`))
}
