// Command cairn-state is the operator CLI of cairn-state: it lists, reads,
// writes, verifies and re-keys the encrypted state of an instance, and shows
// or breaks its instance lock, without writing Go.
//
// Usage:
//
//	cairn-state [global flags] COMMAND [flags] [args]
//
// Global flags (each may also follow the command):
//
//	--url URL          the store (or CAIRN_STATE_URL): file:///abs/path, file:rel/path,
//	                   s3://BUCKET[/ROOT]?endpoint=URL&region=R&path_style=true&conditional=auto|on|off
//	                   (schemes in any case)
//	--identity FILE    an age identity file or SSH private key, mode 0600, repeatable (or CAIRN_STATE_IDENTITY)
//	--recipient R      an extra recipient (a new store's, or rekey's new set), repeatable (or CAIRN_STATE_RECIPIENTS)
//	--json             print one JSON document on stdout instead of human output
//	--stale-after D    the stale window used to judge the lock (default 5m)
//	--timeout D        how long a command waits on storage that does not answer (default 30s)
//	--verbose          log progress of the layers below on stderr
//	--history N        versions of each name a write keeps in history, 0: off (default 5, or CAIRN_STATE_HISTORY)
//
// Commands (cairn-state COMMAND -h explains each flag and gives an example):
//
//	keygen [-o FILE]                      write a new X25519 identity (0600); print its recipient
//	ls [--all] [PREFIX]                   list state names with sealed size and modification time
//	get [--recovery-identity FILE --allow-unauthenticated] NAME
//	                                      decrypt one object to stdout
//	put [--wait D] NAME [FILE]            seal and write one object (stdin when no FILE); takes the lock
//	rm [--purge] [--wait D] NAME          delete one object (kept in history; --purge removes that too); takes the lock
//	verify [--recovery-identity FILE]     check the store's manifest, open every object, report each one
//	                                      that fails and why; prove a recovery key with stock age
//	rekey [--old-identity FILE]... [--recovery-identity FILE --allow-unauthenticated [--yes]] [--restart] [--wait D]
//	                                      move the store and every object to the current recipients; takes the lock
//	lock status                           holder, PID, heartbeat age, stale horizon, mode, epoch
//	lock break [--holder ID] [--force]    remove a stale lock; a live one only with --force and the matching --holder
//	migrate status                        applied (and unfinished) migrations
//	doctor                                check the store end to end: one line per check, ok/warn/fail
//	version                               module version, VCS revision, Go version, platform
//
// Every command that is given an identity reads the store's manifest
// (.cairn-state/.store) first: an identity that does not belong to the
// store is refused with exit code 5 before anything else is touched.
//
// Exit codes, as `cairn-state help` lists them (exitcodes.go): 0 success;
// 1 failure; 2 usage error (bad flags, a bad URL, a missing identity
// file); 3 the lock is held by a live instance; 4 the lock was lost while
// writing; 5 the identity does not belong to this store; 6 no store at
// this location; 7 a put's condition did not hold; 130 and 143
// interrupted by SIGINT or SIGTERM, after releasing the lock. `lock
// status` exits 0 whether or not the lock is held. Errors go to stderr;
// with --json, stdout carries exactly one JSON document, also when the
// command fails, and stderr JSON lines only. Secrets — identities,
// passphrases, private keys, the credentials of a URL — are never printed,
// wherever they were given; names are shown with control characters
// escaped. Commands that only read never create a missing file: store.
// The decisions behind this are in docs/adr/0011-cli.md,
// docs/adr/0018-identity-file-permissions.md, docs/adr/0035 and 0036.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	os.Exit(runProcess(os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}, os.Getenv))
}

// busy counts the work under way that must end cleanly before the process
// exits on a signal: a lock being taken, held or released (withLock,
// rekey).
var busy atomic.Int32

// After a signal the command's context is cancelled and the process waits
// for it to end: up to unbusyGrace when it holds no lock (a command
// blocked where no context reaches, such as a read of a pipe, is ended
// then), up to busyGrace while a lock is taken or held, so that it is
// released (the release has its own 30 s bound).
const (
	unbusyGrace = 2 * time.Second
	busyGrace   = 45 * time.Second
)

// runProcess runs one command line as the process: SIGINT and SIGTERM
// cancel the command, which releases what it holds and exits 130 or 143
// (docs/adr/0035). A further signal while a lock is held is ignored, so
// that a SIGTERM delivered twice (to the process and to its group, as
// timeout(1) and init systems do) cannot skip the release; one while no
// lock is held ends the process at once.
func runProcess(args []string, io stdio, getenv func(string) string) int {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, io, getenv) }()

	var sig syscall.Signal
	select {
	case code := <-done:
		return code
	case s := <-sigs:
		sig = s.(syscall.Signal)
	}
	cancel(&signalError{sig: sig})
	code := 128 + int(sig)
	gaveUp := func(why string) int {
		msg := fmt.Sprintf("cairn-state: interrupted (%s)%s", sig, why)
		if wantsJSON(args) { // stderr carries JSON lines only
			line, _ := json.Marshal(map[string]any{"type": "error", "message": msg, "kind": kindInterrupted, "exit_code": code})
			msg = string(line)
		}
		fmt.Fprintln(io.err, msg)
		return code
	}
	start := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case c := <-done:
			return c
		case <-sigs:
			if busy.Load() == 0 {
				return gaveUp("")
			}
		case <-tick.C:
			waited := time.Since(start)
			if busy.Load() == 0 && waited >= unbusyGrace || waited >= busyGrace {
				return gaveUp(fmt.Sprintf("; the command did not stop within %s", waited.Round(time.Second)))
			}
		}
	}
}
