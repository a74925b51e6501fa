package main

import (
	"context"
	"errors"
	"os"
	"syscall"

	state "github.com/cairnhq/state"
	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// Exit codes (docs/adr/0035-exit-codes-and-signals.md). exitTable is the
// one list of them: the help prints it, the tests run one case per row.
const (
	exitOK        = 0
	exitFail      = 1
	exitUsage     = 2
	exitHeld      = 3
	exitLockLost  = 4
	exitNotMember = 5
	exitNoStore   = 6
	exitCondition = 7
	exitSIGINT    = 128 + int(syscall.SIGINT)
	exitSIGTERM   = 128 + int(syscall.SIGTERM)
)

// exitClass is one row of the exit-code table: the code, the error kind a
// --json failure document carries for it, and what it means.
type exitClass struct {
	code    int
	kind    string
	meaning string
}

// exitTable is the exit-code table, in the order `cairn-state help` lists
// it. The example application (examples/instance) shares its numbering.
var exitTable = []exitClass{
	{exitOK, "", "success (lock status: whether or not the lock is held; help)"},
	{exitFail, kindFailure, "failure: storage or I/O, a missing object, an object that does not open, no answer within --timeout, verify or doctor found problems, a rekey left unfinished"},
	{exitUsage, kindUsage, "usage: an unknown command or flag, wrong arguments, an invalid state name (or one that looks like a secret), a bad --url, a missing or unusable identity file, a bad --recipient"},
	{exitHeld, kindHeld, "the lock is held by a live instance: nothing was written (put, rm, rekey, lock break)"},
	{exitLockLost, kindLockLost, "the lock was lost while writing (another instance took over); the example application: it lost its lock while serving"},
	{exitNotMember, kindNotMember, "the identity does not belong to this store (it cannot open .cairn-state/.store), or the store is not the pinned one"},
	{exitNoStore, kindNoStore, "there is no store at --url: nothing was created"},
	{exitCondition, kindCondition, "put --if-absent found the object, or put --if-version found another version: nothing was written"},
	{exitSIGINT, kindInterrupted, "interrupted by SIGINT (Ctrl-C), after releasing the lock it held"},
	{exitSIGTERM, kindInterrupted, "interrupted by SIGTERM, after releasing the lock it held"},
}

// The kinds of a --json failure document (error.kind). Failures of exit
// code 1 carry one of the finer kinds below kindFailure where one applies.
const (
	kindFailure     = "failure"
	kindUsage       = "usage"
	kindHeld        = "lock-held"
	kindLockLost    = "lock-lost"
	kindNotMember   = "not-member"
	kindNoStore     = "no-store"
	kindCondition   = "condition"
	kindInterrupted = "interrupted"

	kindNotFound   = "not-found"  // the object does not exist
	kindUnreadable = "unreadable" // the object does not open (wrong key, tampered, …)
	kindTooLarge   = "too-large"  // the value is over the size limit
	kindTimeout    = "timeout"    // the storage did not answer within --timeout
	kindReported   = "reported"   // verify or doctor printed what failed
	kindPermission = "permission" // the storage refused the credentials
	kindIO         = "io"         // a local file or stream
)

// finerKinds are the kinds below kindFailure, as the help lists them.
var finerKinds = []string{kindNotFound, kindUnreadable, kindTooLarge, kindTimeout, kindReported, kindPermission, kindIO}

// exitCode maps an error to the exit-code table. An error of a run that a
// signal interrupted is that signal's code (interrupted).
func exitCode(ctx context.Context, err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue), errors.Is(err, state.ErrBadURL):
		return exitUsage
	case errors.Is(err, store.ErrNotMember), errors.Is(err, store.ErrWrongStore):
		return exitNotMember
	case errors.Is(err, state.ErrNoStore), errors.Is(err, store.ErrNoStore):
		return exitNoStore
	}
	if sig := interruptedBy(ctx); sig != 0 {
		return 128 + sig
	}
	var ce *conditionError
	switch {
	case errors.Is(err, lock.ErrLost):
		return exitLockLost
	case errors.Is(err, lock.ErrHeld):
		return exitHeld
	case errors.As(err, &ce):
		return exitCondition
	}
	return exitFail
}

// errorKind is the kind a --json failure document carries for err, whose
// exit code is code.
func errorKind(err error, code int) string {
	for _, c := range exitTable {
		if c.code == code && code != exitFail {
			return c.kind
		}
	}
	var re *reportedError
	var timeout interface{ Timeout() bool }
	var pe *os.PathError
	switch {
	case errors.As(err, &re):
		return kindReported
	case errors.Is(err, store.ErrNotFound):
		return kindNotFound
	case errors.Is(err, store.ErrTooLarge):
		return kindTooLarge
	case errors.Is(err, store.ErrUnreadable):
		return kindUnreadable
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &timeout) && timeout.Timeout():
		return kindTimeout
	case errors.Is(err, backend.ErrPermission):
		return kindPermission
	case errors.As(err, &pe):
		return kindIO
	}
	return kindFailure
}

// conditionError is a write whose condition (--if-absent, --if-version)
// did not hold: exit code 7.
type conditionError struct {
	msg string
	err error
}

func (e *conditionError) Error() string { return e.msg }
func (e *conditionError) Unwrap() error { return e.err }

// signalError is the cause of a run's context cancelled by a signal.
type signalError struct{ sig syscall.Signal }

func (e *signalError) Error() string { return "interrupted by " + e.sig.String() }

// interruptedBy returns the number of the signal that cancelled ctx, or 0.
func interruptedBy(ctx context.Context) int {
	var se *signalError
	if ctx != nil && errors.As(context.Cause(ctx), &se) {
		return int(se.sig)
	}
	return 0
}
