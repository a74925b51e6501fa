package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cairnhq/state/internal/boot"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// initDoc is init's --json document: the new store, as verify describes a
// store, and where it is.
type initDoc struct {
	Store storeDoc `json:"store"`
	URL   string   `json:"url"`
}

// runInit creates a store at --url: the only command that does (the
// others fail with exit 6 where there is none). The location must hold
// nothing under .cairn-state/ (the lock's objects aside); a store already
// there, or objects without a manifest, are refused and left alone. It
// prints the new store's id, location and recipients (the identities'
// own and --recipient), and the lock mode the storage's capabilities
// imply, recorded in the store for every later process.
func runInit(ctx context.Context, a *app, args []string) error {
	fs := a.flags("init")
	if _, err := a.parse(fs, args, 0, 0); err != nil {
		return err
	}
	if a.storeID != "" {
		return usagef("init: --store-id (or CAIRN_STATE_STORE_ID) pins an existing store; a new store's id is drawn by init")
	}
	k, err := a.loadKeys(true)
	if err != nil {
		return err
	}
	a.mayCreate = true // a file: store's directory is made here, and only here
	b, root, err := a.openBackend(ctx)
	if err != nil {
		return err
	}
	o, err := a.bootOptions(root)
	if err != nil {
		return err
	}
	if !a.verbose {
		// init says itself what the store's creation warning says.
		o.Store.Logger = slog.New(levelAtLeast{h: a.logger.Handler(), min: slog.LevelError})
	}
	keys := store.Keys{Identities: k.identities, Recipients: k.recipients}
	o.New = true // a store already there is refused, not adopted
	st, err := boot.Connect(ctx, b, keys, o)
	if err == nil && !storeadmin.ManifestWritten(st) {
		// Storage without conditional writes: the manifest is written
		// under the instance lock.
		var l *lock.Lock
		if st, l, err = boot.Lock(ctx, st, keys, o); err == nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), boot.ReleaseTimeout)
			defer cancel()
			if err := l.Release(rctx); err != nil {
				return fmt.Errorf("init: store %s was created; releasing the lock: %w", st.StoreID(), err)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("init: %w", a.refused(err))
	}
	return a.printInit(st, o.Location)
}

func (a *app) printInit(st *store.Store, location string) error {
	m, _ := storeadmin.Manifest(st)
	if a.json {
		a.emit(initDoc{Store: storeOf(m), URL: location})
		return nil
	}
	a.printf("created store %s at %s\n", m.ID, location)
	a.printf("recipients (%d):\n", len(m.Recipients))
	for _, r := range m.Recipients {
		a.printf("  %s\n", r)
	}
	a.printf("lock mode: %s (%s)\n", m.LockMode, m.Storage)
	a.printf("pin it wherever the store is used: --store-id %s, CAIRN_STATE_STORE_ID=%s or state.Config.StoreID\n", m.ID, m.ID)
	return nil
}

// levelAtLeast passes on the records of h at min or above.
type levelAtLeast struct {
	h   slog.Handler
	min slog.Level
}

func (l levelAtLeast) Enabled(ctx context.Context, lv slog.Level) bool {
	return lv >= l.min && l.h.Enabled(ctx, lv)
}
func (l levelAtLeast) Handle(ctx context.Context, r slog.Record) error { return l.h.Handle(ctx, r) }
func (l levelAtLeast) WithAttrs(as []slog.Attr) slog.Handler {
	return levelAtLeast{h: l.h.WithAttrs(as), min: l.min}
}
func (l levelAtLeast) WithGroup(n string) slog.Handler {
	return levelAtLeast{h: l.h.WithGroup(n), min: l.min}
}
