/*
Copyright 2026.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package bench

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// The soak's plot: one panel per series, time in minutes across, the
// series' unit up, the window the slopes are fitted over shaded, and the
// fitted line drawn over it. Plain SVG, written by hand.

// Plot geometry, in SVG user units.
const (
	plotWidth   = 760
	panelHeight = 170
	plotLeft    = 80
	plotRight   = 20
	plotTop     = 34
	plotBottom  = 40
)

// Panel is one series to plot: points (x in minutes, y in unit) and, if
// the fit has two ends, its line.
type Panel struct {
	Title string
	Unit  string
	X, Y  []float64
	// WindowStart and WindowEnd shade the fit's span (minutes); the fit is
	// the line through (WindowStart, FitStart) and (WindowEnd, FitEnd).
	WindowStart, WindowEnd float64
	FitStart, FitEnd       float64
}

// SVG plots the soak's series, one panel each.
func (r SoakReport) SVG() string {
	panels := make([]Panel, 0, len(soakSeries))
	for i, def := range soakSeries {
		p := Panel{Title: def.name, Unit: def.unit, WindowStart: r.WindowStart / 60, WindowEnd: r.WindowEnd / 60}
		for _, s := range r.Samples {
			p.X = append(p.X, s.Seconds/60)
			p.Y = append(p.Y, def.value(s)/def.scale)
		}
		if i < len(r.Series) {
			ser := r.Series[i]
			// The line through the window's mean with the fitted slope.
			mid := (r.WindowStart + r.WindowEnd) / 2 / 3600
			at := func(t float64) float64 { return ser.Level + ser.SlopePerHour*(t/3600-meanTime(r, mid)) }
			p.FitStart, p.FitEnd = at(r.WindowStart), at(r.WindowEnd)
			p.Title = fmt.Sprintf("%s: slope %+.1f %s/h over the window, %+.1f %% of its level per hour",
				def.name, ser.SlopePerHour, def.unit, ser.PercentPerHour)
		}
		panels = append(panels, p)
	}
	return PlotSVG(fmt.Sprintf("soak: %.1f operations/s, TTL %v, retention %v", r.Rate, r.Config["ttl"],
		r.Config["retention"]), panels)
}

// meanTime is the mean time, in hours, of the samples in the window: the
// least-squares line passes through it and the level. mid if none.
func meanTime(r SoakReport, mid float64) float64 {
	var sum float64
	n := 0
	for _, s := range r.Samples {
		if s.Seconds >= r.WindowStart && s.Seconds <= r.WindowEnd {
			sum += s.Seconds / 3600
			n++
		}
	}
	if n == 0 {
		return mid
	}
	return sum / float64(n)
}

// PlotSVG draws panels one above the other under title.
func PlotSVG(title string, panels []Panel) string {
	var b strings.Builder
	height := 30 + len(panels)*panelHeight
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" `+
		`font-family="sans-serif" font-size="11">`+"\n", plotWidth, height, plotWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14" font-weight="bold">%s</text>`+"\n", plotLeft,
		html.EscapeString(title))
	for i, p := range panels {
		drawPanel(&b, p, 30+i*panelHeight)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func drawPanel(b *strings.Builder, p Panel, top int) {
	x0, x1 := float64(plotLeft), float64(plotWidth-plotRight)
	y0, y1 := float64(top+panelHeight-plotBottom), float64(top+plotTop)
	xmax := 1.0
	for _, x := range p.X {
		xmax = math.Max(xmax, x)
	}
	ymin, ymax := 0.0, 0.0
	for _, y := range p.Y {
		ymax = math.Max(ymax, y)
		ymin = math.Min(ymin, y)
	}
	if ymax == ymin {
		ymax = ymin + 1
	}
	ymax += (ymax - ymin) * 0.1
	sx := func(x float64) float64 { return x0 + x/xmax*(x1-x0) }
	sy := func(y float64) float64 { return y0 - (y-ymin)/(ymax-ymin)*(y0-y1) }

	fmt.Fprintf(b, `<text x="%.0f" y="%d" font-size="12">%s</text>`+"\n", x0, top+plotTop-8,
		html.EscapeString(p.Title))
	if p.WindowEnd > p.WindowStart {
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#eef3fb"/>`+"\n",
			sx(p.WindowStart), y1, sx(p.WindowEnd)-sx(p.WindowStart), y0-y1)
	}
	// Axes, ticks and their labels.
	fmt.Fprintf(b, `<path d="M%.1f %.1f V%.1f H%.1f" stroke="black" fill="none"/>`+"\n", x0, y1, y0, x1)
	for _, t := range ticks(0, xmax) {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`, sx(t), y0, sx(t), y0+4)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", sx(t), y0+15, tickLabel(t))
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">minutes since the load began</text>`+"\n",
		(x0+x1)/2, y0+30)
	for _, t := range ticks(ymin, ymax) {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`, x0, sy(t), x1, sy(t))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-5, sy(t)+4, tickLabel(t))
	}
	fmt.Fprintf(b, `<text transform="translate(%.1f %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n",
		x0-55, (y0+y1)/2, html.EscapeString(p.Unit))
	// The series and the fit.
	if len(p.X) > 0 {
		pts := make([]string, 0, len(p.X))
		for i := range p.X {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", sx(p.X[i]), sy(p.Y[i])))
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="#1f5fbf" stroke-width="1.5"/>`+"\n",
			strings.Join(pts, " "))
	}
	if p.WindowEnd > p.WindowStart {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#c0392b" stroke-width="1.5" `+
			`stroke-dasharray="5 3"/>`+"\n", sx(p.WindowStart), sy(p.FitStart), sx(p.WindowEnd), sy(p.FitEnd))
	}
}

// ticks are about five round values between lo and hi.
func ticks(lo, hi float64) []float64 {
	span := hi - lo
	if span <= 0 {
		return []float64{lo}
	}
	step := math.Pow(10, math.Floor(math.Log10(span/5)))
	for _, m := range []float64{1, 2, 5, 10} {
		if span/(step*m) <= 6 {
			step *= m
			break
		}
	}
	var out []float64
	for t := math.Ceil(lo/step) * step; t <= hi+step*1e-9; t += step {
		out = append(out, t)
	}
	return out
}

func tickLabel(t float64) string {
	if math.Abs(t-math.Round(t)) < 1e-9 {
		return fmt.Sprintf("%.0f", t)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", t), "0"), ".")
}
