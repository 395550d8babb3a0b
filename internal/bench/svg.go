package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// WriteSVG writes a bar chart of esjet's latency percentiles (p50, p90,
// p99, p99.9) per phase on a logarithmic axis. Phases without latencies
// (the drains) are left out. Hand-written SVG, no dependency.
func (r *Report) WriteSVG(w io.Writer) error {
	type row struct {
		name string
		v    [4]float64
	}
	var rows []row
	lo, hi := math.Inf(1), 0.0
	for _, p := range r.Phases {
		l := p.Esjet.Latency
		if l == nil {
			continue
		}
		v := [4]float64{l.P50MS, l.P90MS, l.P99MS, l.P999MS}
		for _, x := range v {
			if x > 0 {
				lo, hi = min(lo, x), max(hi, x)
			}
		}
		rows = append(rows, row{p.Name, v})
	}
	const (
		left, top, plotH, barW, gap = 70, 40, 300, 14, 24
	)
	colors := [4]string{"#4e79a7", "#59a14f", "#f28e2b", "#e15759"}
	labels := [4]string{"p50", "p90", "p99", "p99.9"}
	groupW := 4*barW + gap
	width := max(left+max(len(rows), 1)*groupW+40, 560)
	height := top + plotH + 60
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	title := fmt.Sprintf("esjet bench: latency percentiles per phase (ms, log scale; sync %s)", r.Server.Sync)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="13">%s</text>`+"\n", left, html.EscapeString(title))
	if len(rows) == 0 {
		b.WriteString(`<text x="70" y="60">no phase measured latencies</text></svg>` + "\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	// Decades from below the smallest to above the largest value.
	dLo, dHi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dHi <= dLo {
		dHi = dLo + 1
	}
	y := func(v float64) float64 {
		if v <= 0 {
			return top + plotH
		}
		f := (math.Log10(v) - dLo) / (dHi - dLo)
		return top + plotH - f*plotH
	}
	for d := dLo; d <= dHi; d++ {
		yy := y(math.Pow(10, d))
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", left, yy, width-20, yy)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, yy+4, dur(math.Pow(10, d)))
	}
	for i, rw := range rows {
		x0 := left + i*groupW + gap/2
		for k, v := range rw.v {
			yy := y(v)
			fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"><title>%s %s %s</title></rect>`+"\n",
				x0+k*barW, yy, barW-2, float64(top+plotH)-yy, colors[k], html.EscapeString(rw.name), labels[k], dur(v))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", x0+2*barW, top+plotH+16, html.EscapeString(rw.name))
	}
	for k, l := range labels {
		x := left + k*70
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", x, height-22, colors[k], x+14, height-13, l)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
