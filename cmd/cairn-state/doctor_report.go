package main

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/cairnhq/state/internal/setup"
)

// doctorReport is doctor's --json document.
type doctorReport struct {
	// Usable is true when no check failed (warnings allowed): exit 0.
	Usable   bool        `json:"usable"`
	URL      string      `json:"url"`
	Failed   int         `json:"failed"`
	Warnings int         `json:"warnings"`
	Checks   []checkLine `json:"checks"`
}

// checkLine is one check's result: a line of human output.
type checkLine struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Finding string `json:"finding"`
	Hint    string `json:"hint,omitempty"`
	// Facts are what the check measured or read, for scripts: each check
	// has its own struct (durations in seconds).
	Facts any `json:"facts,omitempty"`
}

// report prints the lines (or the JSON document, whose every string the
// JSON writer redacts) and returns the run's error: nil when the store is
// usable.
func (d *doctor) report() error {
	doc := doctorReport{URL: setup.RedactURL(d.a.url), Checks: d.lines}
	var failed []string
	for i := range doc.Checks {
		c := &doc.Checks[i]
		c.Finding, c.Hint = d.a.redact(c.Finding), d.a.redact(c.Hint)
		switch c.Status {
		case statusFail:
			failed = append(failed, c.Name)
		case statusWarn:
			doc.Warnings++
		}
	}
	doc.Failed, doc.Usable = len(failed), len(failed) == 0
	if d.a.json {
		d.a.emit(doc)
	} else {
		for _, c := range doc.Checks {
			line := fmt.Sprintf("%-4s  %s: %s", c.Status, c.Name, c.Finding)
			if c.Hint != "" {
				line += " — " + c.Hint
			}
			d.a.printf("%s\n", line)
		}
	}
	if len(failed) > 0 {
		return &reportedError{msg: fmt.Sprintf("doctor: the store is not usable: %s failed (%s)",
			plural(len(failed), "check"), strings.Join(dedupe(failed), ", "))}
	}
	if !d.a.json {
		d.a.printf("doctor: the store is usable (%s)\n", plural(doc.Warnings, "warning"))
	}
	return nil
}

func dedupe(names []string) []string {
	var out []string
	for _, n := range names {
		if len(out) == 0 || out[len(out)-1] != n {
			out = append(out, n)
		}
	}
	return out
}

// short formats a short duration for humans: "0.2ms", "3ms", "1.2s".
func short(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// attemptCause is the part of a backend error after "after N attempts: ".
var attemptCause = regexp.MustCompile(`after \d+ attempts?: (.*)$`)

// cause is what a finding quotes of a storage error: the cause, without
// the operation's layers when it got no answer.
func cause(err error) string {
	msg := err.Error()
	if m := attemptCause.FindStringSubmatch(msg); m != nil {
		return m[1]
	}
	return msg
}
