package main

import (
	"context"
	"fmt"

	"filippo.io/age"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// The statuses of a doctor check (ADR 0025). Only fail makes the store
// unusable (exit 1); skip is a check that could not run because an earlier
// one failed.
const (
	statusOK   = "ok"
	statusWarn = "warn"
	statusFail = "fail"
	statusSkip = "skip"
)

// The checks, in the order doctor runs them; --json names them so.
const (
	checkURL             = "url"
	checkDirectory       = "directory"
	checkEndpoint        = "endpoint"
	checkCredentials     = "credentials"
	checkRegion          = "region"
	checkBucket          = "bucket"
	checkConditional     = "conditional-writes"
	checkLockMode        = "lock-mode"
	checkListConsistency = "list-consistency"
	checkClock           = "clock"
	checkIdentity        = "identity"
	checkMembership      = "membership"
	checkStoreMode       = "store-lock-mode"
	checkRekey           = "rekey"
	checkLock            = "lock"
	// checkHistory (doctor_history.go) runs after checkRekey.
)

// doctorChecks are doctor's checks in the order they run and print. Each
// adds its lines (one or more) and may leave, in the doctor, what a later
// check needs: whether the storage answers, the keys, the store.
var doctorChecks = []func(*doctor, context.Context){
	(*doctor).checkStorage, // url, then directory or the S3 checks, conditional writes, lock mode, clock
	(*doctor).checkIdentities,
	(*doctor).checkMembership, // and store-lock-mode
	(*doctor).checkRekey,
	(*doctor).checkHistory,
	(*doctor).checkLock,
}

// runDoctor checks the store end to end and prints one line per check. It
// writes nothing but, on S3, the conditional-write probe's throwaway
// object (removed again); it takes no lock and creates no store.
func runDoctor(ctx context.Context, a *app, args []string) error {
	fs := a.flags("doctor")
	if _, err := a.parse(fs, args, 0, 0); err != nil {
		return err
	}
	if a.url == "" {
		return usagef("no store: pass --url URL or set CAIRN_STATE_URL (file:///path or s3://bucket?endpoint=...)")
	}
	d := &doctor{a: a}
	// Every storage check shares the budget: on storage that stops
	// answering, the S3 timeouts derived from it fire first, naming the
	// endpoint; this deadline is the backstop. Local checks do not wait.
	nctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	for _, check := range doctorChecks {
		check(d, nctx)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("doctor: interrupted: %w", ctx.Err())
	}
	return d.report()
}

// doctor is one run of the checks: their lines so far, and what the
// checks that follow need of what they found.
type doctor struct {
	a     *app
	lines []checkLine

	b        backend.Backend // the store's backend, opened as the other commands open it
	root     string
	s3       *s3Store  // nil for a file: store
	storage  bool      // the storage answered and accepted us: its checks may go on
	why      string    // why the storage checks are skipped, when they are
	lockMode lock.Mode // the storage's lock mode now (probe, URL), then the store's; "" unknown
	keys     []age.Identity
	keysOK   bool         // identities configured, and every file loaded
	store    *store.Store // connected through its manifest
	noStore  bool         // there is no store at the location
}

// s3Store is what doctor knows of an s3:// store from its URL.
type s3Store struct {
	opts      s3.Options // as parsed, with the --timeout derived timeouts
	endpoints []string   // "aws" when none is given
}

// add records one line: a check's status, finding, what to do (may be
// empty) and facts (nil, or the check's own facts struct, not a nil
// pointer to one).
func (d *doctor) add(name, status, finding, hint string, facts any) {
	d.lines = append(d.lines, checkLine{Name: name, Status: status, Finding: finding, Hint: hint, Facts: facts})
}

// skip records a check that cannot run because of an earlier one.
func (d *doctor) skip(name, why string) { d.add(name, statusSkip, "not checked: "+why, "", nil) }

// skipAll records checks that cannot run because of an earlier one.
func (d *doctor) skipAll(why string, names ...string) {
	for _, n := range names {
		d.skip(n, why)
	}
}

// reservedPrefix is the key prefix of a store's objects.
func reservedPrefix(root string) string {
	if root == "" {
		return store.Prefix
	}
	return root + "/" + store.Prefix
}
