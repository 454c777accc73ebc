package benchreport

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
)

// Axis is one axis of a Plot.
type Axis struct {
	Label string
	Log   bool // logarithmic (base 10); values <= 0 are not drawn
	// Min and Max bound the axis; both zero means from the data (and the
	// reference lines on this axis).
	Min, Max float64
	// Format formats tick labels; nil means strconv's shortest form.
	Format func(float64) string
}

// Series is one line of a Plot.
type Series struct {
	Name    string
	X, Y    []float64
	Step    bool // draw as a step function (a CDF)
	Markers bool // draw a dot at every point
	Dashed  bool
	Color   string // "" means the next colour of the palette
}

// Ref is a reference line: a goal or a limit.
type Ref struct {
	Label    string
	Value    float64
	Vertical bool // at X = Value; otherwise at Y = Value
}

// Plot is a line chart rendered as a standalone SVG document.
type Plot struct {
	Title         string
	X, Y          Axis
	Series        []Series
	Refs          []Ref
	Width, Height int // 0 means 720 wide, with a plot area 300 high
}

// palette is colour-blind safe (Okabe-Ito).
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"}

const (
	marginLeft   = 72.0
	marginRight  = 24.0
	marginTop    = 44.0
	marginBottom = 56.0
)

// scale maps data values of one axis to pixels.
type scale struct {
	log        bool
	lo, hi     float64 // data range (log10 of it for a log axis)
	pxLo, pxHi float64
	ticks      []float64
	format     func(float64) string
}

func (s scale) valid(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (!s.log || v > 0)
}

func (s scale) px(v float64) float64 {
	if s.log {
		v = math.Log10(v)
	}
	if s.hi == s.lo {
		return (s.pxLo + s.pxHi) / 2
	}
	return s.pxLo + (v-s.lo)/(s.hi-s.lo)*(s.pxHi-s.pxLo)
}

// newScale fits an axis to values.
func newScale(a Axis, values []float64, pxLo, pxHi float64) scale {
	s := scale{log: a.Log, pxLo: pxLo, pxHi: pxHi, format: a.Format}
	if s.format == nil {
		s.format = func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }
	}
	lo, hi := a.Min, a.Max
	if lo == 0 && hi == 0 {
		lo, hi = math.Inf(1), math.Inf(-1)
		for _, v := range values {
			if s.valid(v) {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
		if math.IsInf(lo, 1) { // no data
			lo, hi = 1, 10
		}
		if !a.Log && lo > 0 && lo < hi/3 {
			lo = 0 // a linear axis starts at zero unless the data is far from it
		}
	}
	if a.Log {
		lo, hi = math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		if hi == lo {
			hi = lo + 1
		}
		for e := lo; e <= hi; e++ {
			s.ticks = append(s.ticks, math.Pow(10, e))
		}
	} else {
		if hi == lo {
			hi = lo + 1
		}
		step := niceStep((hi - lo) / 6)
		lo, hi = math.Floor(lo/step)*step, math.Ceil(hi/step)*step
		for v := lo; v <= hi+step/2; v += step {
			s.ticks = append(s.ticks, math.Round(v/step)*step)
		}
	}
	s.lo, s.hi = lo, hi
	return s
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// canvas is a Plot's layout: the document's size and the plot area's
// scales.
type canvas struct {
	w, h   float64 // the document
	bottom float64 // the plot area's lower edge
	sx, sy scale
}

// layout sizes the document and fits the axes to the data and the
// reference lines. The legend goes below the plot, one line per series.
func (p Plot) layout() canvas {
	legend := 18 * float64(len(p.Series))
	w, h := float64(p.Width), float64(p.Height)
	if w == 0 || h == 0 {
		w, h = 720, marginTop+300+marginBottom+legend
	}
	bottom := h - marginBottom - legend
	if bottom < marginTop+40 {
		bottom = marginTop + 40
		h = bottom + marginBottom + legend
	}
	var xs, ys []float64
	for _, s := range p.Series {
		xs, ys = append(xs, s.X...), append(ys, s.Y...)
	}
	for _, r := range p.Refs {
		if r.Vertical {
			xs = append(xs, r.Value)
		} else {
			ys = append(ys, r.Value)
		}
	}
	return canvas{w: w, h: h, bottom: bottom,
		sx: newScale(p.X, xs, marginLeft, w-marginRight), sy: newScale(p.Y, ys, bottom, marginTop)}
}

// SVG renders the plot as a standalone SVG document.
func (p Plot) SVG() []byte {
	c := p.layout()
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="12">`+"\n", c.w, c.h, c.w, c.h)
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%g" height="%g" fill="#ffffff"/>`+"\n", c.w, c.h)
	text(&b, c.w/2, 24, "middle", "font-size=\"15\" font-weight=\"bold\"", p.Title)
	p.axes(&b, c)
	for _, r := range p.Refs {
		r.draw(&b, c)
	}
	for i, s := range p.Series {
		s.draw(&b, c, i)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// axes draws the grid, the ticks, the frame and the axis labels.
func (p Plot) axes(b *bytes.Buffer, c canvas) {
	for _, t := range c.sx.ticks {
		x := c.sx.px(t)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e0e0e0"/>`+"\n", x, marginTop, x, c.bottom)
		text(b, x, c.bottom+16, "middle", "", c.sx.format(t))
	}
	for _, t := range c.sy.ticks {
		y := c.sy.px(t)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e0e0e0"/>`+"\n", marginLeft, y, c.w-marginRight, y)
		text(b, marginLeft-6, y+4, "end", "", c.sy.format(t))
	}
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#404040"/>`+"\n",
		marginLeft, marginTop, c.w-marginLeft-marginRight, c.bottom-marginTop)
	text(b, (marginLeft+c.w-marginRight)/2, c.bottom+36, "middle", "", p.X.Label)
	text(b, 16, (marginTop+c.bottom)/2, "middle",
		fmt.Sprintf(`transform="rotate(-90 16 %.1f)"`, (marginTop+c.bottom)/2), p.Y.Label)
}

// draw draws a reference line, labelled along the line.
func (r Ref) draw(b *bytes.Buffer, c canvas) {
	if r.Vertical {
		if !c.sx.valid(r.Value) {
			return
		}
		x := c.sx.px(r.Value)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#808080" stroke-dasharray="2 3"/>`+"\n", x, marginTop, x, c.bottom)
		y := c.bottom - 6 // labels run upwards from the bottom
		text(b, x-4, y, "start", fmt.Sprintf(`fill="#606060" transform="rotate(-90 %.1f %.1f)"`, x-4, y), r.Label)
		return
	}
	if !c.sy.valid(r.Value) {
		return
	}
	y := c.sy.px(r.Value)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#808080" stroke-dasharray="2 3"/>`+"\n", marginLeft, y, c.w-marginRight, y)
	text(b, c.w-marginRight-4, y-4, "end", `fill="#606060"`, r.Label)
}

// draw draws the i-th series, and its line of the legend below the axis
// label.
func (s Series) draw(b *bytes.Buffer, c canvas, i int) {
	color := palette[i%len(palette)]
	if s.Color != "" {
		color = s.Color
	}
	pts := s.points(b, c, color)
	dash := ""
	if s.Dashed {
		dash = ` stroke-dasharray="6 4"`
	}
	if len(pts) > 0 {
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", color, dash, pts)
	}
	ly := c.bottom + marginBottom + 8 + float64(i)*18
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n",
		marginLeft, ly-4, marginLeft+24, ly-4, color, dash)
	if s.Markers {
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", marginLeft+12, ly-4, color)
	}
	text(b, marginLeft+32, ly, "start", "", s.Name)
}

// points returns the series' polyline points, drawing its markers into b
// as it goes; points off the scales are left out.
func (s Series) points(b *bytes.Buffer, c canvas, color string) []byte {
	var pts bytes.Buffer
	prevY := math.NaN()
	for j := range min(len(s.X), len(s.Y)) {
		if !c.sx.valid(s.X[j]) || !c.sy.valid(s.Y[j]) {
			continue
		}
		x, y := c.sx.px(s.X[j]), c.sy.px(s.Y[j])
		if s.Step && !math.IsNaN(prevY) {
			fmt.Fprintf(&pts, "%.1f,%.1f ", x, prevY)
		}
		fmt.Fprintf(&pts, "%.1f,%.1f ", x, y)
		prevY = y
		if s.Markers {
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", x, y, color)
		}
	}
	return bytes.TrimSpace(pts.Bytes())
}

// text writes an escaped <text> element; attrs are extra attributes.
func text(b *bytes.Buffer, x, y float64, anchor, attrs, s string) {
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="%s"`, x, y, anchor)
	if attrs != "" {
		b.WriteString(" " + attrs)
	}
	b.WriteString(">")
	_ = xml.EscapeText(b, []byte(s)) // a bytes.Buffer does not fail
	b.WriteString("</text>\n")
}
