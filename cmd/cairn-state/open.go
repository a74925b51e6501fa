package main

import (
	"context"
	"errors"
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

// keys are the parsed --identity and --recipient options.
type keys struct {
	identities []age.Identity
	recipients []age.Recipient
}

// loadKeys parses the configured identity files and recipients. With
// required, having no identity is a usage error.
func (a *app) loadKeys(required bool) (keys, error) {
	var k keys
	if required && len(a.identities) == 0 {
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
	return k, nil
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

// newEnvelope is the envelope of this run for identities and recipients:
// legacy (v1) objects accepted, warnings to the run's logger. With the
// emergency opt-in (--allow-unauthenticated) the identities are given as
// recovery identities instead of writers: they then also read objects no
// writer authenticates (each one logged), and the envelope cannot seal.
func (a *app) newEnvelope(identities []age.Identity, recipients []age.Recipient) (*envelope.Envelope, error) {
	o := &envelope.Options{AcceptLegacy: true, Logger: a.logger}
	if a.allowUnauth {
		o.Recovery = identities
		return envelope.New(nil, recipients, o)
	}
	return envelope.New(identities, recipients, o)
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

// openStore opens the store with the configured keys. With needKey false a
// missing identity is allowed: the store can then list and inspect objects
// but not open them.
func (a *app) openStore(ctx context.Context, needKey bool) (*store.Store, error) {
	k, err := a.loadKeys(needKey)
	if err != nil {
		return nil, err
	}
	var sealer store.Sealer = noKey{}
	if len(k.identities) > 0 {
		env, err := a.newEnvelope(k.identities, k.recipients)
		if err != nil {
			return nil, err
		}
		sealer = env
	}
	return a.openStoreWith(ctx, sealer)
}

func (a *app) openStoreWith(ctx context.Context, sealer store.Sealer) (*store.Store, error) {
	b, root, err := a.openBackend(ctx)
	if err != nil {
		return nil, err
	}
	return store.Open(b, sealer, store.Options{Root: root, Logger: a.logger})
}

// errNoKey means a command without an identity tried to open an object.
var errNoKey = errors.New("no identity configured: pass --identity FILE or set CAIRN_STATE_IDENTITY")

// noKey is the sealer of a store opened without an identity.
type noKey struct{}

func (noKey) Seal(name string, _ []byte) ([]byte, error) {
	return nil, fmt.Errorf("seal %q: %w", name, errNoKey)
}

func (noKey) Open(name string, _ []byte) ([]byte, error) {
	return nil, fmt.Errorf("open %q: %w", name, errNoKey)
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
	l, err := a.acquire(ctx, st)
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
