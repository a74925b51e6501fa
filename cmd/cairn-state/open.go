package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"time"

	"filippo.io/age"

	state "github.com/cairnhq/state"
	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/envelope"
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

// loadIdentityFile loads an identity file after checking that it exists
// and that only its owner may access it: an operator's key file readable
// by others is refused, where an application only warns (ADR 0018).
func loadIdentityFile(path string) ([]age.Identity, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("identity file %s does not exist (create one with cairn-state keygen -o FILE)", path)
	}
	if mode, open := state.IdentityFileOpenToOthers(path); open {
		return nil, fmt.Errorf("identity file %s has mode %04o: a secret key must not be accessible by group or others; fix: chmod 600 %s", path, mode, path)
	}
	return envelope.LoadIdentityFile(path) // its errors name the path
}

// openBackend opens the backend named by --url and returns it with the root
// prefix the URL carries.
func (a *app) openBackend(ctx context.Context) (backend.Backend, string, error) {
	if a.url == "" {
		return nil, "", usagef("no store: pass --url URL or set CAIRN_STATE_URL (file:///path or s3://bucket?endpoint=...)")
	}
	// A command that only looks at a store must not create one because of
	// a typo in the URL.
	b, root, err := state.OpenBackend(ctx, a.url, state.BackendOptions{Logger: a.logger, MustExist: !a.mayCreate, S3: s3Budget(a.timeout)})
	if err != nil {
		return nil, "", err // it names the URL, credentials hidden
	}
	if c, ok := b.(io.Closer); ok {
		a.closers = append(a.closers, c)
	}
	return b, root, nil
}

// openStore connects to the store with the configured keys: the store's
// manifest is read, and the identities checked, before anything else
// (docs/adr/0021). With needKey false a missing identity is allowed: the
// store can then list and inspect objects but not open them. A command
// that writes (a.write) may create the manifest. A configuration whose
// recipients differ from the store's gets a line on stderr.
func (a *app) openStore(ctx context.Context, needKey bool) (*store.Store, error) {
	k, err := a.loadKeys(needKey)
	if err != nil {
		return nil, err
	}
	return a.connect(ctx, k, a.write)
}

func (a *app) connect(ctx context.Context, k keys, create bool) (*store.Store, error) {
	b, root, err := a.openBackend(ctx)
	if err != nil {
		return nil, err
	}
	sk := store.Keys{Identities: k.identities, Recipients: k.recipients}
	if a.allowUnauth {
		sk.Recovery = k.recovery
	}
	opts := &store.ConnectOptions{Create: create, Options: store.Options{Root: root, Logger: a.logger}}
	st, err := store.Connect(ctx, b, sk, opts)
	if errors.Is(err, store.ErrNotMember) && a.allowUnauth && !create {
		// The emergency read: no identity belongs, a recovery key may.
		fmt.Fprintf(a.err, "cairn-state: %v\ncairn-state: reading through the recovery identities only (--allow-unauthenticated)\n", a.redact(err.Error()))
		st, err = store.Connect(ctx, b, store.Keys{Recovery: k.recovery}, opts)
	}
	if err != nil {
		return nil, err
	}
	a.noteRecipientDiff(st)
	return st, nil
}

// noteRecipientDiff says on stderr how the configured recipients differ
// from the store's, once per run, and what reconciles them.
func (a *app) noteRecipientDiff(st *store.Store) {
	d := st.RecipientDiff()
	if d.Empty() || a.quietDiff {
		return
	}
	m, _ := st.Manifest()
	fmt.Fprintf(a.err, "cairn-state: note: the configured recipients differ from the store's (%s); objects are sealed to the store's %s. To change the store's set: cairn-state rekey --identity FILE [--recipient R]... [--old-identity FILE]\n",
		d, plural(len(m.Recipients), "recipient"))
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

// withLock takes the instance lock on st as cairn-state@HOST for what (the
// write, named in errors), runs fn with a view of st fenced by the lock and
// a context cancelled if the lock is lost or ctx is done, and releases the
// lock. A live holder makes it fail with the lock's *HeldError (exit code
// 3): a foreign instance, another cairn-state process on this host (the
// same instance id: a duplicate), or a lock this run cannot read that is
// not yet stale.
func (a *app) withLock(ctx context.Context, st *store.Store, what string, fn func(ctx context.Context, fenced *store.Store, l *lock.Lock) error) (err error) {
	l, st, err := a.lockStore(ctx, st)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
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
	err = fn(wctx, st.WithFence(l), l)
	if err != nil && l.Err() != nil {
		// The lock was lost while we worked: say so rather than only the
		// cancelled operation.
		err = fmt.Errorf("%w (%v)", err, l.Err())
	}
	return err
}

// lockStore takes the lock on st and, for a new store on a backend without
// compare-and-swap, writes its manifest under it. When another process
// created the store meanwhile, it lets the lock go, connects again and
// starts over (at most a few times). It returns the lock and the store it
// holds it on.
func (a *app) lockStore(ctx context.Context, st *store.Store) (*lock.Lock, *store.Store, error) {
	for attempt := 1; ; attempt++ {
		l, err := a.acquire(ctx, st)
		if err != nil {
			if !st.ManifestWritten() && attempt < 3 {
				// The lock's objects may be another new store's: look again.
				if again, cerr := a.openStore(ctx, true); cerr == nil && again.ManifestWritten() {
					st = again
					continue
				}
			}
			return nil, nil, err
		}
		err = st.WithFence(l).CommitManifest(ctx)
		if err == nil {
			return l, st, nil
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		_ = l.Release(rctx)
		cancel()
		if !errors.Is(err, store.ErrManifestChanged) || attempt >= 3 {
			return nil, nil, err
		}
		if st, err = a.openStore(ctx, true); err != nil {
			return nil, nil, err
		}
	}
}

// Polling for a held lock under --wait: the first look comes after
// waitPollMin, each next one up to 1.5× later, at most waitPollMax apart,
// each jittered by ±50% so that waiters do not poll in step.
const (
	waitPollMin = 500 * time.Millisecond
	waitPollMax = 5 * time.Second
)

// acquire takes the lock as cairn-state@HOST. A live holder — a foreign
// instance, another cairn-state process on this host (the same instance
// id: a duplicate), a lock this run cannot read — makes it fail with the
// lock's *HeldError at once, or, with --wait, after polling for up to that
// long. The CLI polls itself, from half a second on, rather than through
// lock.Options.WaitForStale, whose looks follow the holder's heartbeat
// (every 5 s at most): a --wait of a few seconds still sees a release
// within a second (ADR 0011).
func (a *app) acquire(ctx context.Context, st *store.Store) (*lock.Lock, error) {
	deadline := time.Now().Add(a.wait)
	poll := waitPollMin
	for said := false; ; said = true {
		l, err := lock.Acquire(ctx, st, lock.Options{
			InstanceID: instanceID(),
			StaleAfter: a.staleAfter,
			Logger:     a.logger,
		})
		if err == nil {
			return l, nil
		}
		var held *lock.HeldError
		if !errors.As(err, &held) {
			return nil, err
		}
		if a.wait == 0 {
			return nil, fmt.Errorf("%s: %w", refusingToWrite, err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, fmt.Errorf("waited %s for the lock; %s: %w", a.wait, refusingToWrite, err)
		}
		if !said {
			fmt.Fprintf(a.err, "waiting up to %s for the lock held by %s\n", a.wait, holderName(held))
		}
		d := min(time.Duration(float64(poll)*(0.5+rand.Float64())), left)
		poll = min(poll*3/2, waitPollMax)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("interrupted while waiting for the lock held by %s: %w", holderName(held), ctx.Err())
		case <-t.C:
		}
	}
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
