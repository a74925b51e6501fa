package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"filippo.io/age"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/boot"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/setup"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// keys are the parsed --identity, --recipient and --recovery-identity
// options.
type keys struct {
	identities []age.Identity
	recipients []age.Recipient
	recovery   []age.Identity // --recovery-identity, used for reading only with --allow-unauthenticated
}

// loadKeys parses the configured identity files and recipients. With
// required, having no identity is a usage error.
func (a *app) loadKeys(required bool) (keys, error) {
	var k keys
	if required && len(a.identities) == 0 && !(a.allowUnauth && len(a.recoveryFiles) > 0) {
		return k, usagef("no identity: pass --identity FILE or set CAIRN_STATE_IDENTITY (create one with cairn-state keygen -o FILE)")
	}
	for _, path := range a.identities {
		ids, err := loadIdentityFile(path)
		if err != nil {
			return k, err
		}
		k.identities = append(k.identities, ids...)
	}
	for _, s := range a.recipients {
		// setup refused values that look secret or not public; what is
		// left may be quoted back.
		r, err := envelope.ParseRecipient(s)
		if err != nil {
			return k, usagef("--recipient: %v", err)
		}
		k.recipients = append(k.recipients, r)
	}
	for _, path := range a.recoveryFiles {
		if err := checkIdentityArg("--recovery-identity", path); err != nil {
			return k, err
		}
		ids, err := loadIdentityFile(path)
		if err != nil {
			return k, fmt.Errorf("--recovery-identity: %w", err)
		}
		k.recovery = append(k.recovery, ids...)
	}
	return k, nil
}

// recoveryFlags registers --recovery-identity and, for commands that read
// through it (get, rekey), --allow-unauthenticated.
func (a *app) recoveryFlags(fs *flag.FlagSet, optIn bool) {
	fs.Var(&a.recoveryFiles, "recovery-identity", "a recovery identity `FILE`: the private half of a recovery recipient, kept offline; repeatable")
	if optIn {
		fs.BoolVar(&a.allowUnauth, "allow-unauthenticated", false, "emergency recovery: also open the application's objects that no --identity authenticates through the --recovery-identity keys (they may be forged; reserved objects never open this way)")
	}
}

// checkRecoveryFlags: the opt-in needs a recovery identity, and a recovery
// identity is read through only with the opt-in.
func (a *app) checkRecoveryFlags(cmd string) error {
	switch {
	case a.allowUnauth && len(a.recoveryFiles) == 0:
		return usagef("%s: --allow-unauthenticated reads through the recovery identities given with --recovery-identity FILE; none given", cmd)
	case !a.allowUnauth && len(a.recoveryFiles) > 0:
		return usagef("%s: --recovery-identity is read through only with --allow-unauthenticated (an explicit opt-in: what it opens may be forged)", cmd)
	}
	return nil
}

// loadIdentityFile loads an identity file, refusing — as a usage error —
// one that is missing, is not a regular file, does not parse, or that
// group or others may access: an operator's key file readable by others
// is refused, where an application only warns (ADR 0018). The file is
// opened once and judged as opened (setup.ReadIdentityFile).
func loadIdentityFile(path string) ([]age.Identity, error) {
	f, err := setup.ReadIdentityFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &usageError{msg: fmt.Sprintf("identity file %s does not exist (create one with cairn-state keygen -o FILE)", path), err: err}
	case errors.Is(err, setup.ErrNotRegularFile), errors.Is(err, envelope.ErrInvalidIdentity):
		return nil, &usageError{msg: err.Error(), err: err}
	case err != nil:
		return nil, err
	case f.OpenToOthers():
		return nil, usagef("identity file %s has mode %04o: a secret key must not be accessible by group or others; fix: chmod 600 %s", path, f.Mode, path)
	}
	return f.Identities, nil
}

// openBackend opens the backend named by --url and returns it with the root
// prefix the URL carries.
func (a *app) openBackend(ctx context.Context) (backend.Backend, string, error) {
	if a.url == "" {
		return nil, "", usagef("no store: pass --url URL or set CAIRN_STATE_URL (file:///path or s3://bucket?endpoint=...)")
	}
	// Only init creates a store: no other command makes a directory
	// because of a typo in the URL.
	b, root, err := setup.OpenBackend(ctx, a.url, setup.BackendOptions{Logger: a.logger, MustExist: !a.mayCreate, S3: s3Budget(a.timeout)})
	if err != nil {
		return nil, "", err // it names the URL, credentials hidden
	}
	if c, ok := b.(io.Closer); ok {
		a.closers = append(a.closers, c)
	}
	return b, root, nil
}

// openStore connects to the store with the configured keys: the store's
// manifest is read, and the identities (and --store-id) checked, before
// anything else (docs/adr/0021, 0031). With needKey false a missing
// identity is allowed: the store can then list and inspect objects but
// not open them. Only init creates a store (a.mayCreate); everywhere else
// a location without one fails with exit 6. A configuration whose
// recipients differ from the store's gets a line on stderr.
func (a *app) openStore(ctx context.Context, needKey bool) (*store.Store, error) {
	k, err := a.loadKeys(needKey)
	if err != nil {
		return nil, err
	}
	return a.connect(ctx, k)
}

// bootOptions are the first-open protocol's options for this run.
func (a *app) bootOptions(root string) (boot.Options, error) {
	o := boot.Options{
		Store:    store.Options{Root: root, Logger: a.logger, RejectRollback: a.strict, History: a.history.option()},
		Location: setup.RedactURL(a.url),
		Create:   a.mayCreate,
		Lock: lock.Options{
			InstanceID: instanceID(),
			StaleAfter: a.staleAfter,
			Logger:     a.logger,
		},
		Wait: a.wait,
		OnWait: func(held *lock.HeldError) {
			a.say("progress", fmt.Sprintf("waiting up to %s for the lock held by %s", a.wait, holderName(held)), "command", "wait", "wait_seconds", a.wait.Seconds())
		},
	}
	if a.storeID != "" {
		id, err := envelope.ParseStoreID(a.storeID)
		if err != nil {
			return o, usagef("--store-id (or %s): %v", setup.EnvStoreID, err)
		}
		o.StoreID = id.String()
	}
	return o, nil
}

func (a *app) connect(ctx context.Context, k keys) (*store.Store, error) {
	b, root, err := a.openBackend(ctx)
	if err != nil {
		return nil, err
	}
	o, err := a.bootOptions(root)
	if err != nil {
		return nil, err
	}
	sk := store.Keys{Identities: k.identities, Recipients: k.recipients}
	if a.allowUnauth {
		sk.Recovery = k.recovery
	}
	st, err := boot.Connect(ctx, b, sk, o)
	if errors.Is(err, store.ErrNotMember) && a.allowUnauth && !o.Create {
		// The emergency read: no identity belongs, a recovery key may.
		a.say("note", "cairn-state: "+terminalSafe(err.Error()))
		a.say("note", "cairn-state: reading through the recovery identities only (--allow-unauthenticated)")
		sk = store.Keys{Recovery: k.recovery}
		st, err = boot.Connect(ctx, b, sk, o)
	}
	if err != nil {
		return nil, err
	}
	a.keys, a.boot = sk, o
	a.noteRecipientDiff(st)
	return st, nil
}

// noteRecipientDiff says on stderr how the configured recipients differ
// from the store's, once per run, and what reconciles them: only when
// some configured recipient is not one of the store's. Configured
// recipients that are a subset of the store's (the store also seals to a
// recovery key the operator does not carry) are no difference worth a
// word: every object is still sealed to them.
func (a *app) noteRecipientDiff(st *store.Store) {
	d := storeadmin.RecipientDiff(st)
	if len(d.NotSealedTo) == 0 || a.quietDiff {
		return
	}
	m, _ := storeadmin.Manifest(st)
	a.say("note", fmt.Sprintf("cairn-state: note: the configured recipients differ from the store's (%s); objects are sealed to the store's %s. To change the store's set: cairn-state rekey --identity FILE [--recipient R]... [--old-identity FILE]",
		d, plural(len(m.Recipients), "recipient")))
	a.quietDiff = true
}

// instanceID is the lock holder name of the CLI on this host.
func instanceID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return "cairn-state@" + host
}

// withLock takes the instance lock of st — a store openStore returned —
// as cairn-state@HOST for what (the write, named in errors), through the
// first-open protocol that state.Open uses too (internal/boot), runs fn
// with a view of the store fenced by the lock and a context cancelled if
// the lock is lost or ctx is done, and releases the lock. A live holder
// makes it fail with the lock's *HeldError (exit code 3): a foreign
// instance, another cairn-state process on this host (the same instance
// id: a duplicate), or a lock this run cannot read that is not yet stale;
// with --wait, once it has waited that long.
func (a *app) withLock(ctx context.Context, st *store.Store, what string, fn func(ctx context.Context, fenced *store.Store, l *lock.Lock) error) (err error) {
	// Taking, holding, releasing: a signal waits for the release.
	busy.Add(1)
	defer busy.Add(-1)
	st, l, err := boot.Lock(ctx, st, a.keys, a.boot)
	if err != nil {
		return fmt.Errorf("%s: %w", what, a.refused(err))
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), boot.ReleaseTimeout)
		defer cancel()
		if rerr := l.Release(rctx); rerr != nil && err == nil {
			err = fmt.Errorf("after the write: %w", rerr) // "lock: release: …"
		}
	}()
	// The work stops when the lock is lost or when the caller gives up
	// (SIGINT, SIGTERM): the lock's context alone outlives a signal.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(l.Context(), cancel)
	defer stop()
	err = fn(wctx, l.Fence(st), l)
	if lerr := l.Err(); err != nil && lerr != nil && !errors.Is(err, lock.ErrLost) {
		// The lock was lost while we worked: say so rather than only the
		// cancelled operation (exit code 4).
		err = fmt.Errorf("%w (%w)", err, lerr)
	}
	return err
}

// acquire takes the lock of st as cairn-state@HOST, in the store's lock
// mode, waiting under --wait (rekey's Acquire).
func (a *app) acquire(ctx context.Context, st *store.Store) (*lock.Lock, error) {
	l, err := boot.Acquire(ctx, st, a.boot)
	if err != nil {
		return nil, a.refused(err)
	}
	return l, nil
}

// refused says that a write was refused because of a live holder.
func (a *app) refused(err error) error {
	var held *lock.HeldError
	if !errors.As(err, &held) {
		return err
	}
	var waited *boot.WaitedError
	if errors.As(err, &waited) {
		return fmt.Errorf("waited %s for the lock; %s: %w", waited.Wait, refusingToWrite, held)
	}
	return fmt.Errorf("%s: %w", refusingToWrite, err)
}

// holderName names the holder of a refused lock for messages.
func holderName(held *lock.HeldError) string {
	if held.Unreadable != "" {
		return "an instance whose key is not configured here"
	}
	return fmt.Sprintf("%q (pid %d on %s)", held.Holder.InstanceID, held.Holder.PID, held.Holder.Hostname)
}

// refusingToWrite is what a refused CLI write says before the holder.
const refusingToWrite = "refusing to write"

// heldHint says what to do about a refused lock, read from the situation:
// who holds it, from where, and whether it can be read at all.
func heldHint(held *lock.HeldError) string {
	h := held.Holder
	switch {
	case held.Unreadable != "":
		return fmt.Sprintf("it may belong to a live instance whose key is not configured here: pass the identity the lock is sealed to (--identity FILE) to see who holds it, or wait until it is stale (in %s); if its holder is gone for good: cairn-state lock break --force (no --holder: it cannot be read)",
			ago(held.StaleIn))
	case held.Duplicate && h.Hostname == hostname():
		return fmt.Sprintf("another cairn-state process on this host (pid %d) is writing; let it finish, or wait for it with --wait DURATION", h.PID)
	case held.Duplicate:
		return fmt.Sprintf("a cairn-state process on another machine (pid %d on %s) holds it under the same instance id %s: the two machines share the host name %q; let it finish, or wait for it with --wait DURATION",
			h.PID, shown(h.Hostname), shown(h.InstanceID), hostname())
	}
	return fmt.Sprintf("stop %s first, or wait until its lock is stale (in %s); if it is gone for good: cairn-state lock break --force --holder %s",
		strconv.Quote(h.InstanceID), ago(held.StaleIn), shellQuote(h.InstanceID))
}

// hostname is this machine's host name, as the lock records it.
func hostname() string {
	host, err := os.Hostname()
	if err != nil {
		return ""
	}
	return host
}

// shellQuote quotes s for a command line the operator may paste.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./-_", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
