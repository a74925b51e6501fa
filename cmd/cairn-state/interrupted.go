package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/rekey"
	"github.com/cairnhq/state/store"
)

// interruptedDoc is an interrupted rekey in JSON output.
type interruptedDoc struct {
	// Readable is false when the progress record does not open with the
	// configured keys: only its presence is known.
	Readable bool   `json:"readable"`
	Done     int    `json:"done"`
	Total    int    `json:"total"`
	Resume   string `json:"resume,omitempty"`
	Message  string `json:"message"`
}

func interruptedOf(i *rekey.Interrupted) *interruptedDoc {
	if i == nil {
		return nil
	}
	return &interruptedDoc{Readable: i.Readable, Done: i.Done, Total: i.Total, Resume: i.Resume, Message: rekeyNote(i)}
}

// interruptedRekey reads the progress record an interrupted rekey left in
// st; nil when there is none. A storage error reading it is logged, not
// returned: a missing note is no reason to fail the command.
func (a *app) interruptedRekey(ctx context.Context, st *store.Store) *rekey.Interrupted {
	i, err := rekey.ReadProgress(ctx, st)
	if err != nil {
		a.logger.Warn("cairn-state: could not look for an interrupted rekey", "err", err)
		return nil
	}
	return i
}

// rekeyNote says that a rekey is unfinished and how to finish it.
func rekeyNote(i *rekey.Interrupted) string {
	switch {
	case !i.Readable:
		return fmt.Sprintf("a rekey was interrupted (its progress record %s%s is there, sealed to keys not configured here): resume it with the same cairn-state rekey command, with the new --identity", store.Prefix, rekey.ProgressName)
	case i.Resume == "":
		return fmt.Sprintf("rekey interrupted at %d of %d: resume with the same cairn-state rekey command", i.Done, i.Total)
	}
	return fmt.Sprintf("rekey interrupted at %d of %d: resume with `%s`", i.Done, i.Total, i.Resume)
}

// noteInterruptedRekey says on stderr that a rekey is unfinished, after a
// get of name that failed with getErr (nil: it succeeded): an object the
// run had not reached yet opens only with the old key, which is no wrong
// key but pending work.
func (a *app) noteInterruptedRekey(ctx context.Context, st *store.Store, name string, getErr error) {
	i := a.interruptedRekey(ctx, st)
	if i == nil {
		return
	}
	msg := "cairn-state: note: " + rekeyNote(i)
	if errors.Is(getErr, envelope.ErrNoMatchingIdentity) && i.Pending(name) {
		msg += fmt.Sprintf("; %s is not re-sealed yet: until then it opens with the old key (pass it too, --identity OLD)", shown(name))
	}
	a.say("note", msg, "rekey_done", i.Done, "rekey_total", i.Total, "resume", i.Resume)
}
