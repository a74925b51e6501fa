package main

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// progressBar shows the progress of a long command on stderr: a bar redrawn
// in place on a terminal, plain lines (at every tenth and at most every few
// seconds) otherwise, so that logs of a non-interactive run stay readable;
// with --json, those lines as JSON objects ({"type": "progress", …}).
type progressBar struct {
	a       *app
	label   string
	command string // for --json: the command ("rekey")
	step    string // its step, when it has several ("checking"); "" for the main one
	total   int
	n       int
	start   time.Time
	last    time.Time // last draw
	lastPc  int       // last tenth printed, plain mode
	lastN   int       // count last printed, plain mode
	drawn   bool
}

const (
	barWidth    = 30
	redrawEvery = 100 * time.Millisecond
	lineEvery   = 5 * time.Second
)

func newProgressBar(a *app, command, step string, total int) *progressBar {
	label := command
	if step != "" {
		label += " (" + step + ")"
	}
	p := &progressBar{a: a, label: label, command: command, step: step, total: total, start: time.Now(), lastPc: -1, lastN: -1}
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
	if p.a.interactive && !p.a.json && p.drawn {
		fmt.Fprintln(p.a.err)
	}
}

func (p *progressBar) draw(force bool) {
	now := time.Now()
	if p.a.interactive && !p.a.json {
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
	p.a.say("progress", fmt.Sprintf("%s: %d/%d objects", p.label, p.n, p.total),
		"command", p.command, "step", p.step, "done", p.n, "total", p.total, "seconds", math.Round(now.Sub(p.start).Seconds()*10)/10)
}
