package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"golang.org/x/term"

	"github.com/cairnhq/state/lock"
)

// emit writes v as the one JSON document of this run, with every secret
// the command line carries hidden in its strings.
func (a *app) emit(v any) {
	if a.emitted {
		panic("cairn-state: second JSON document")
	}
	a.emitted = true
	data, err := a.jsonDocument(v, "  ")
	if err != nil {
		fmt.Fprintf(a.err, "cairn-state: writing JSON: %v\n", err)
		return
	}
	if _, err := a.data.Write(data); err != nil {
		fmt.Fprintf(a.err, "cairn-state: writing JSON: %v\n", err)
	}
}

// jsonDocument encodes v, one line when indent is empty, and hides the
// secrets in it. Redacting the encoded text keeps the fields' order; a
// redaction that broke the JSON (a private key without its END line
// swallows the rest) is done again on the decoded strings.
func (a *app) jsonDocument(v any, indent string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // keep secrets in the form %q gives them, for the redactor
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	out := []byte(jsonEscapeUnprintable(a.redact(b.String())))
	if json.Valid(out) {
		return out, nil
	}
	var generic any
	if err := json.Unmarshal(b.Bytes(), &generic); err != nil {
		return nil, err
	}
	b.Reset()
	if err := enc.Encode(a.redactStrings(generic)); err != nil {
		return nil, err
	}
	return []byte(jsonEscapeUnprintable(b.String())), nil
}

// jsonEscapeUnprintable writes, in encoded JSON, every character that is
// not printable and that encoding/json leaves as it is (C1 controls,
// format characters such as U+202E) as a \u escape: the document means
// the same, and a terminal shown it is not driven by a name. Outside its
// strings JSON text holds only ASCII, so every such rune is in a string.
func jsonEscapeUnprintable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r >= 0x80 && !strconv.IsPrint(r) }) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r < 0x80 || strconv.IsPrint(r) {
			b.WriteRune(r)
			continue
		}
		for _, u := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(&b, `\u%04x`, u)
		}
	}
	return b.String()
}

// redactStrings hides the secrets in every string of a decoded JSON value.
func (a *app) redactStrings(v any) any {
	switch v := v.(type) {
	case string:
		return a.redact(v)
	case []any:
		for i := range v {
			v[i] = a.redactStrings(v[i])
		}
	case map[string]any:
		for k, x := range v {
			v[k] = a.redactStrings(x)
		}
	}
	return v
}

// printf writes human output to stdout (never used with --json).
func (a *app) printf(format string, args ...any) {
	fmt.Fprintf(a.out, format, args...)
}

// say writes one line of the CLI's own on stderr — a note, a hint, an
// error, progress — or, with --json, one JSON object {"type": typ,
// "message": text, …} with the key-value pairs of fields, so that stderr
// carries JSON lines only.
func (a *app) say(typ, text string, fields ...any) {
	if !a.json {
		fmt.Fprintln(a.err, text)
		return
	}
	line := map[string]any{"type": typ}
	if text != "" {
		line["message"] = text
	}
	for i := 0; i+1 < len(fields); i += 2 {
		line[fmt.Sprint(fields[i])] = fields[i+1]
	}
	data, err := a.jsonDocument(line, "")
	if err != nil {
		return
	}
	_, _ = a.err.Write(data)
}

// redactingWriter hides the secrets of the command line in everything
// written through it: the CLI's stdout (but get's plaintext) and stderr.
type redactingWriter struct {
	a *app
	w io.Writer
}

func (r redactingWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(r.w, r.a.redact(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// shown is a state name (or an instance id, a holder) as the terminal may
// show it: as it is when every character is printable, else quoted with
// its control characters escaped, as %q does, so that a name from the
// listing cannot move the cursor, clear the screen or retitle the
// terminal.
func shown(name string) string {
	if name != "" && name[0] != '"' && strings.IndexFunc(name, func(r rune) bool { return !strconv.IsPrint(r) }) < 0 {
		return name
	}
	return strconv.Quote(name)
}

// terminalSafe escapes, in a message for the terminal, every character
// that is not printable, but newlines and tabs, as %q would.
func terminalSafe(s string) string {
	if strings.IndexFunc(s, unsafeRune) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unsafeRune(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func unsafeRune(r rune) bool { return r != '\n' && r != '\t' && !strconv.IsPrint(r) }

// isTerminal reports whether w (a writer or reader) is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// errorDoc is the JSON document of a failed run.
type errorDoc struct {
	Error errorBody `json:"error"`
}

type errorBody struct {
	Message string `json:"message"`
	// Kind classifies the failure: a kind of the exit-code table, or a
	// finer one for exit code 1 (exitcodes.go).
	Kind     string `json:"kind"`
	ExitCode int    `json:"exit_code"`
	// Set when the lock is held by a live foreign instance (exit code 3).
	Holder              *holderDoc `json:"holder,omitempty"`
	HeartbeatAgeSeconds *float64   `json:"heartbeat_age_seconds,omitempty"`
	StaleInSeconds      *float64   `json:"stale_in_seconds,omitempty"`
	// Set instead of Holder when the lock refused is one this run could not
	// read (exit code 3): why it could not be read.
	Unreadable string `json:"unreadable,omitempty"`
	// Set when the identity does not belong to the store (exit code 5):
	// what anyone can read of it without the key.
	Store *notMemberDoc `json:"store,omitempty"`
}

// notMemberDoc describes the store an identity was refused from.
type notMemberDoc struct {
	StoreID    string    `json:"store_id,omitempty"`
	Created    time.Time `json:"created,omitzero"`
	Recipients int       `json:"recipients,omitempty"`
	Key        string    `json:"object"`
}

// holderDoc is a lock record in JSON output.
type holderDoc struct {
	InstanceID   string    `json:"instance_id"`
	Hostname     string    `json:"hostname"`
	PID          int       `json:"pid"`
	ProcessStart time.Time `json:"process_start,omitzero"`
	AcquiredAt   time.Time `json:"acquired_at,omitzero"`
	Heartbeat    time.Time `json:"heartbeat,omitzero"`
	Epoch        uint64    `json:"epoch"`
	Mode         string    `json:"mode"`
}

func holderOf(r lock.Record) holderDoc {
	return holderDoc{
		InstanceID:   r.InstanceID,
		Hostname:     r.Hostname,
		PID:          r.PID,
		ProcessStart: r.ProcessStart,
		AcquiredAt:   r.AcquiredAt,
		Heartbeat:    r.Heartbeat,
		Epoch:        r.Epoch,
		Mode:         string(r.Mode),
	}
}

// seconds is d in seconds, rounded to milliseconds, for JSON.
func seconds(d time.Duration) *float64 {
	s := math.Round(d.Seconds()*1000) / 1000
	return &s
}

// ago formats a duration for humans: whole seconds, or milliseconds below one.
func ago(d time.Duration) string {
	if d < time.Second && d > -time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// timestamp formats a time for humans.
func timestamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// plural is "1 object", "2 objects".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
