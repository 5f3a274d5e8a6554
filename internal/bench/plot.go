package bench

import (
	"bytes"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"strconv"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// A small line chart drawn with the standard library (image/png) and a
// fixed bitmap font: enough for the report's plots, without a plotting
// library and its dependencies.

// Series is one line of a chart.
type Series struct {
	Name  string
	Color color.RGBA
	X, Y  []float64
}

// Chart is a line chart with optional log axes and reference lines.
type Chart struct {
	Title, XLabel, YLabel string
	LogX, LogY            bool
	Series                []Series
	HLines                []float64 // dashed horizontal reference lines
}

// seriesColors are the colours of the DUTs (macro, latency) and the
// forwarding configurations (forward) in every chart: one table, so that a
// configuration two benchmarks share (the floors xdp-fwd and kernel-fwd)
// has one colour; a floor is grey. The lines of one chart have distinct
// colours (TestSeriesColors).
var seriesColors = map[string]color.RGBA{
	DUTDrop:           {0x55, 0x55, 0x55, 0xff},
	DUTXdpfw:          {0x1f, 0x77, 0xb4, 0xff},
	DUTIptablesNFT:    {0xd6, 0x27, 0x28, 0xff},
	DUTIptablesLegacy: {0xff, 0x7f, 0x0e, 0xff},
	DUTNftLinear:      {0x94, 0x67, 0xbd, 0xff},
	DUTNftSet:         {0x2c, 0xa0, 0x2c, 0xff},
	DUTXDPFwd:         {0x55, 0x55, 0x55, 0xff}, // FwdFloor
	DUTKernelFwd:      {0x8c, 0x56, 0x4b, 0xff}, // FwdKernel
	DUTXdpfwAudit:     {0x17, 0xbe, 0xcf, 0xff},
	FwdIptables:       {0xd6, 0x27, 0x28, 0xff},
	FwdNft:            {0x94, 0x67, 0xbd, 0xff},
	FwdXdpfwStack:     {0xff, 0x7f, 0x0e, 0xff},
	FwdXdpfwXDP:       {0x1f, 0x77, 0xb4, 0xff},
	FwdXdpfwKMasq:     {0xe3, 0x77, 0xc2, 0xff},
	FwdXdpfwNAT:       {0x17, 0xbe, 0xcf, 0xff},
}

const (
	chartW, chartH = 900, 420
	padL, padR     = 70, 210 // the legend is in the right margin
	padT, padB     = 40, 50
)

var (
	white = color.RGBA{0xff, 0xff, 0xff, 0xff}
	black = color.RGBA{0, 0, 0, 0xff}
	grid  = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
)

// PNG renders the chart.
func (c *Chart) PNG() ([]byte, error) {
	img := image.NewRGBA(image.Rect(0, 0, chartW, chartH))
	draw.Draw(img, img.Bounds(), &image.Uniform{white}, image.Point{}, draw.Src)

	xmin, xmax, ymin, ymax := c.bounds()
	px := func(x float64) float64 { return padL + (axis(x, c.LogX)-xmin)/(xmax-xmin)*(chartW-padL-padR) }
	py := func(y float64) float64 { return chartH - padB - (axis(y, c.LogY)-ymin)/(ymax-ymin)*(chartH-padT-padB) }

	// Grid, ticks and their labels.
	for _, t := range ticks(xmin, xmax, c.LogX) {
		x := px(t)
		line(img, x, padT, x, chartH-padB, grid, 1, false)
		label(img, tickLabel(t), int(x), chartH-padB+16, true)
	}
	for _, t := range ticks(ymin, ymax, c.LogY) {
		y := py(t)
		line(img, padL, y, chartW-padR, y, grid, 1, false)
		s := tickLabel(t)
		label(img, s, padL-6-7*len(s), int(y)+4, false)
	}
	line(img, padL, padT, padL, chartH-padB, black, 1, false)
	line(img, padL, chartH-padB, chartW-padR, chartH-padB, black, 1, false)
	for _, h := range c.HLines {
		if v := axis(h, c.LogY); v >= ymin && v <= ymax {
			line(img, padL, py(h), chartW-padR, py(h), black, 1, true)
		}
	}

	// Lines with a square marker on every point.
	for _, s := range c.Series {
		var prevX, prevY float64
		for i := range s.X {
			if c.LogY && s.Y[i] <= 0 || math.IsNaN(s.Y[i]) {
				continue
			}
			x, y := px(s.X[i]), py(s.Y[i])
			if i > 0 {
				line(img, prevX, prevY, x, y, s.Color, 2, false)
			}
			fill(img, int(x)-3, int(y)-3, 7, 7, s.Color)
			prevX, prevY = x, y
		}
	}

	// Title, axis labels, legend.
	label(img, c.Title, (padL+chartW-padR)/2, 20, true)
	label(img, c.XLabel, (padL+chartW-padR)/2, chartH-12, true)
	label(img, c.YLabel, padL, padT-8, false)
	ly := padT + 8
	for _, s := range c.Series {
		fill(img, chartW-padR+12, ly+3, 14, 4, s.Color)
		label(img, s.Name, chartW-padR+30, ly+10, false)
		ly += 18
	}

	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// axis maps a value to its axis coordinate (log10 on log axes).
func axis(v float64, log bool) float64 {
	if log {
		return math.Log10(v)
	}
	return v
}

// bounds are the data ranges in axis coordinates, padded: log axes to
// whole decades, linear ones from 0 (or below) with a margin on top.
func (c *Chart) bounds() (xmin, xmax, ymin, ymax float64) {
	xmin, ymin = math.Inf(1), math.Inf(1)
	xmax, ymax = math.Inf(-1), math.Inf(-1)
	for _, s := range c.Series {
		for i := range s.X {
			if c.LogY && s.Y[i] <= 0 || math.IsNaN(s.Y[i]) {
				continue
			}
			x, y := axis(s.X[i], c.LogX), axis(s.Y[i], c.LogY)
			xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
			ymin, ymax = math.Min(ymin, y), math.Max(ymax, y)
		}
	}
	for _, h := range c.HLines {
		if !c.LogY || h > 0 {
			ymax = math.Max(ymax, axis(h, c.LogY))
			ymin = math.Min(ymin, axis(h, c.LogY))
		}
	}
	if math.IsInf(xmin, 1) {
		xmin, xmax, ymin, ymax = 0, 1, 0, 1
	}
	if c.LogX {
		xmin, xmax = math.Floor(xmin), math.Ceil(xmax)
	}
	if c.LogY {
		ymin, ymax = math.Floor(ymin), math.Ceil(ymax)
	} else {
		ymin = math.Min(0, ymin)
		ymax += (ymax - ymin) * 0.1
	}
	if xmax == xmin {
		xmax = xmin + 1
	}
	if ymax == ymin {
		ymax = ymin + 1
	}
	return
}

// ticks are tick values (data units) between axis coordinates lo and hi:
// every decade on a log axis, 1/2/5 steps on a linear one.
func ticks(lo, hi float64, log bool) []float64 {
	var out []float64
	if log {
		for e := math.Ceil(lo); e <= hi+1e-9; e++ {
			out = append(out, math.Pow(10, e))
		}
		return out
	}
	step := math.Pow(10, math.Floor(math.Log10((hi-lo)/5)))
	for _, m := range []float64{1, 2, 5, 10} {
		if (hi-lo)/(step*m) <= 7 {
			step *= m
			break
		}
	}
	for v := math.Ceil(lo/step) * step; v <= hi+1e-9; v += step {
		out = append(out, v)
	}
	return out
}

func tickLabel(v float64) string {
	switch {
	case v >= 1e6 && math.Mod(v, 1e6) == 0:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3 && math.Mod(v, 1e3) == 0:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// label draws s with its baseline at y, starting at x or centred on it.
func label(img *image.RGBA, s string, x, y int, centre bool) {
	if centre {
		x -= 7 * len(s) / 2
	}
	d := font.Drawer{Dst: img, Src: &image.Uniform{black}, Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func fill(img *image.RGBA, x, y, w, h int, c color.RGBA) {
	draw.Draw(img, image.Rect(x, y, x+w, y+h), &image.Uniform{c}, image.Point{}, draw.Src)
}

// line draws from (x0,y0) to (x1,y1), width pixels wide, dashed or solid.
func line(img *image.RGBA, x0, y0, x1, y1 float64, c color.RGBA, width int, dashed bool) {
	n := int(math.Max(math.Abs(x1-x0), math.Abs(y1-y0))) + 1
	for i := 0; i <= n; i++ {
		if dashed && (i/6)%2 == 1 {
			continue
		}
		t := float64(i) / float64(n)
		x, y := int(math.Round(x0+(x1-x0)*t)), int(math.Round(y0+(y1-y0)*t))
		if width <= 1 {
			img.SetRGBA(x, y, c)
			continue
		}
		fill(img, x-width/2, y-width/2, width, width, c)
	}
}
