package main

import (
	"fmt"
	"strings"
	"time"
)

// progressBar shows the progress of a long command on stderr: a bar redrawn
// in place on a terminal, plain lines (at every tenth and at most every few
// seconds) otherwise, so that logs of a non-interactive run stay readable.
type progressBar struct {
	a      *app
	label  string
	total  int
	n      int
	start  time.Time
	last   time.Time // last draw
	lastPc int       // last tenth printed, plain mode
	lastN  int       // count last printed, plain mode
	drawn  bool
}

const (
	barWidth    = 30
	redrawEvery = 100 * time.Millisecond
	lineEvery   = 5 * time.Second
)

func newProgressBar(a *app, label string, total int) *progressBar {
	p := &progressBar{a: a, label: label, total: total, start: time.Now(), lastPc: -1, lastN: -1}
	p.draw(true)
	return p
}

// set records that n items are done.
func (p *progressBar) set(n int) {
	p.n = n
	p.draw(false)
}

// done draws the final state (also after an interruption: the count shown
// last is the count reached) and ends the bar's line.
func (p *progressBar) done() {
	p.draw(true)
	if p.a.interactive && p.drawn {
		fmt.Fprintln(p.a.err)
	}
}

func (p *progressBar) draw(force bool) {
	now := time.Now()
	if p.a.interactive {
		if !force && now.Sub(p.last) < redrawEvery {
			return
		}
		p.last, p.drawn = now, true
		filled := barWidth
		if p.total > 0 {
			filled = barWidth * p.n / p.total
		}
		fmt.Fprintf(p.a.err, "\r%s [%s%s] %d/%d  %s ", p.label,
			strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled),
			p.n, p.total, now.Sub(p.start).Round(time.Second))
		return
	}
	tenth := 10
	if p.total > 0 {
		tenth = 10 * p.n / p.total
	}
	switch {
	case p.n == p.lastN:
		return // nothing new to say
	case !force && tenth == p.lastPc && now.Sub(p.last) < lineEvery:
		return
	}
	p.last, p.lastPc, p.lastN = now, tenth, p.n
	fmt.Fprintf(p.a.err, "%s: %d/%d objects\n", p.label, p.n, p.total)
}
