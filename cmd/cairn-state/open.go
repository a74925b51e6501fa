package main

import (
	"context"
	"errors"
	"fmt"
	"io"
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
		ids, err := envelope.LoadIdentityFile(path)
		if err != nil {
			return k, fmt.Errorf("identity file %s: %w", path, err)
		}
		k.identities = append(k.identities, ids...)
	}
	for _, s := range a.recipients {
		r, err := envelope.ParseRecipient(s)
		if err != nil {
			return k, usagef("recipient %q: %v", s, err)
		}
		k.recipients = append(k.recipients, r)
	}
	return k, nil
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
	b, root, err := state.OpenBackend(ctx, a.url, a.logger)
	if err != nil {
		return nil, "", fmt.Errorf("open %s: %w", a.url, err)
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
// lock. A live foreign holder makes it fail with the lock's *HeldError (exit
// code 3), and so does a lock this run cannot read (no identity, or the
// wrong one) that is not yet stale: unlike a booting application, which
// takes an unreadable lock over so as never to brick a boot, an operator's
// write must not break a live instance's lock because the operator passed
// the wrong key.
func (a *app) withLock(ctx context.Context, st *store.Store, what string, fn func(ctx context.Context, fenced *store.Store, l *lock.Lock) error) (err error) {
	id := instanceID()
	if err := a.refuseSiblingWriter(ctx, st, id); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	l, err := lock.Acquire(ctx, st, lock.Options{
		InstanceID:       id,
		StaleAfter:       a.staleAfter,
		RefuseUnreadable: true,
		Refusal:          refusingToWrite,
		Logger:           a.logger,
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if rerr := l.Release(rctx); rerr != nil && err == nil {
			err = fmt.Errorf("release lock: %w", rerr)
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

// refuseSiblingWriter refuses to write while another cairn-state process on
// this host holds the lock. Every CLI process on a host shares the instance
// id cairn-state@HOST, and the lock lets the same instance id take over at
// once (a restarted container keeps its hostname): without this check a
// `put` would silently take the lock from a running `rekey`. A holder whose
// process is gone (killed mid-rekey) is taken over as usual, which is what
// makes an interrupted rekey resumable at once.
func (a *app) refuseSiblingWriter(ctx context.Context, st *store.Store, id string) error {
	s, err := lock.Inspect(ctx, st, a.staleAfter)
	if err != nil || !s.Readable || s.Stale {
		return nil // Acquire judges these cases itself
	}
	host, _ := os.Hostname()
	r := s.Record
	if r.InstanceID != id || r.Hostname != host || r.PID == os.Getpid() || !processAlive(r.PID) {
		return nil
	}
	return fmt.Errorf("another cairn-state process (pid %d) on this host is writing: %w", r.PID,
		&lock.HeldError{Holder: r, HeartbeatAge: s.HeartbeatAge, StaleAfter: s.StaleAfter, StaleIn: s.StaleIn, Refusal: refusingToWrite})
}

// refusingToWrite ends the refusal of a CLI write.
const refusingToWrite = "refusing to write"
