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
//
// Commands (cairn-state COMMAND -h explains each flag and gives an example):
//
//	keygen [-o FILE]                      write a new X25519 identity (0600); print its recipient
//	ls [--all] [PREFIX]                   list state names with sealed size and modification time
//	get [--recovery-identity FILE --allow-unauthenticated] NAME
//	                                      decrypt one object to stdout
//	put [--wait D] NAME [FILE]            seal and write one object (stdin when no FILE); takes the lock
//	rm [--wait D] NAME                    delete one object; takes the lock
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
// Exit codes: 0 success; 1 failure; 2 usage error (an invalid state name
// included); 3 the lock is held by a live foreign instance; 4 is reserved
// for the example application's lost lock; 5 the identity does not belong
// to this store. `lock status` exits 0 whether or not the lock is held.
// Errors go to stderr; with --json, stdout carries exactly one JSON
// document, also when the command fails. Identities, passphrases and the
// credentials of a URL are never printed. Commands that only read never
// create a missing file: store. The decisions behind this are in
// docs/adr/0011-cli.md and docs/adr/0018-identity-file-permissions.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}, os.Getenv)
	stop()
	os.Exit(code)
}
