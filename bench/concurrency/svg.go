package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strconv"
)

// palette colours the bars of each n, in the order of cfg.ns.
var palette = []string{"#4c78a8", "#f58518", "#54a24b", "#b279a2"}

// writeSVG draws the speedup of every concurrent row: one group of bars per
// key count, one bar per n, the goals as dashed marks.
func writeSVG(w io.Writer, cfg config, rows []row) error {
	const (
		width, height            = 760, 420
		left, right, top, bottom = 60, 150, 50, 60
		plotW, plotH             = width - left - right, height - top - bottom
	)
	var bars []row
	for _, r := range rows {
		if r.Keys >= 0 {
			bars = append(bars, r)
		}
	}
	if len(bars) == 0 || len(cfg.ns) == 0 {
		return fmt.Errorf("concurrency: no concurrent rows to draw")
	}
	top10 := 0.0
	for _, r := range bars {
		top10 = max(top10, r.Speedup, r.VsSleeps, r.Goal, float64(r.N))
	}
	top10 = math.Ceil(top10*1.05/10) * 10
	y := func(v float64) float64 { return top + plotH - v/top10*plotH }

	p := &printer{w: w}
	p.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	p.f(`<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	p.f(`<text x="%d" y="22" font-size="15" font-weight="bold">Speedup over one handler: %s events, handler sleeping 0–%v</text>`+"\n",
		left, thousands(cfg.events), cfg.maxSleep)
	for v := 0.0; v <= top10; v += 10 {
		p.f(`<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, left+plotW, y(v), y(v))
		p.f(`<text x="%d" y="%.1f" text-anchor="end">%.0f×</text>`+"\n", left-6, y(v)+4, v)
	}
	groups := groupKeys(bars)
	groupW := float64(plotW) / float64(len(groups))
	barW := groupW * 0.7 / float64(len(cfg.ns))
	for g, keys := range groups {
		x0 := float64(left) + float64(g)*groupW + groupW*0.15
		label := fmt.Sprintf("%d keys", keys)
		switch keys {
		case 0:
			label = "no key"
		case 1:
			label = "1 key"
		}
		p.f(`<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x0+groupW*0.35, top+plotH+18, html.EscapeString(label))
		for i, n := range cfg.ns {
			idx := slices.IndexFunc(bars, func(r row) bool { return r.Keys == keys && r.N == n })
			if idx < 0 {
				continue
			}
			r := bars[idx]
			x := x0 + float64(i)*barW
			p.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>`+"\n",
				x, y(r.Speedup), barW-2, y(0)-y(r.Speedup), palette[i%len(palette)], html.EscapeString(r.label()))
			p.f(`<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11">%.1f</text>`+"\n", x+barW/2-1, y(r.Speedup)-4, r.Speedup)
			p.f(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="black" stroke-width="2"/>`+"\n", x+2, x+barW-4, y(r.VsSleeps), y(r.VsSleeps))
			if r.Goal > 0 {
				p.f(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#d62728" stroke-width="2" stroke-dasharray="4 2"/>`+"\n",
					x-2, x+barW, y(r.Goal), y(r.Goal))
			}
		}
	}
	p.f(`<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, left+plotW, y(0), y(0))
	p.f(`<text x="%d" y="%d" text-anchor="middle">keys (stream.WithOrderKey)</text>`+"\n", left+plotW/2, height-14)
	lx := left + plotW + 20
	for i, n := range cfg.ns {
		p.f(`<rect x="%d" y="%d" width="14" height="14" fill="%s"/>`+"\n", lx, top+i*22, palette[i%len(palette)])
		p.f(`<text x="%d" y="%d">n = %d</text>`+"\n", lx+20, top+i*22+12, n)
	}
	ly := top + len(cfg.ns)*22 + 8
	p.f(`<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#d62728" stroke-width="2" stroke-dasharray="4 2"/>`+"\n", lx, lx+14, ly+7, ly+7)
	p.f(`<text x="%d" y="%d">goal</text>`+"\n", lx+20, ly+12)
	ly += 22
	p.f(`<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="black" stroke-width="2"/>`+"\n", lx, lx+14, ly+7, ly+7)
	p.f(`<text x="%d" y="%d">over the sum</text>`+"\n", lx+20, ly+8)
	p.f(`<text x="%d" y="%d">of the sleeps</text>`+"\n", lx+20, ly+22)
	p.f(`<text x="%d" y="%d" font-size="11">bars: over the</text>`+"\n", lx, ly+48)
	p.f(`<text x="%d" y="%d" font-size="11">measured serial run</text>`+"\n", lx, ly+62)
	p.f("</svg>\n")
	return p.err
}

// groupKeys returns the key counts of rows in their first order.
func groupKeys(rows []row) []int {
	var keys []int
	for _, r := range rows {
		if !slices.Contains(keys, r.Keys) {
			keys = append(keys, r.Keys)
		}
	}
	return keys
}

// printer writes formatted text and keeps the first error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

// thousands writes n with commas between groups of three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
