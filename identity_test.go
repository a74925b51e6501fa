package state_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"

	state "github.com/cairnhq/state"
	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/fs"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
	"github.com/cairnhq/state/testutil/garage"
	"github.com/cairnhq/state/testutil/versitygw"
)

func TestOpen_IdentityNotOfThisStore_RefusedAtTheStoreStage_NothingWrittenLockUntouched(t *testing.T) {
	ctx := context.Background()
	_, owner := testkit.IdentityFile(t)
	_, stranger := testkit.IdentityFile(t)
	b := mem.New(mem.Options{})
	live := openT(t, state.Config{Backend: b, Identities: []age.Identity{owner}, InstanceID: "pod-a",
		HeartbeatInterval: 50 * time.Millisecond, StaleAfter: time.Second})
	m, _ := storeadmin.Manifest(live.Store())
	before := testkit.Snapshot(t, b)

	_, err := state.Open(ctx, state.Config{Backend: b, Identities: []age.Identity{stranger}, InstanceID: "pod-b", Logger: quiet()})
	var oe *state.OpenError
	var nm *storemeta.NotMemberError
	if !errors.As(err, &oe) || oe.Stage != state.StageStore || !errors.Is(err, store.ErrNotMember) || !errors.As(err, &nm) {
		t.Fatalf("Open with a stranger's key = %v, want a NotMemberError at the store stage", err)
	}
	if nm.StoreID != m.ID || nm.Recipients != 1 {
		t.Errorf("NotMemberError facts %+v, want store %s and 1 recipient", nm, m.ID)
	}
	// The live instance's lock record and every object are as they were:
	// compare everything but the lock object itself, which its heartbeat
	// rewrites.
	after := testkit.Snapshot(t, b)
	delete(before, store.Prefix+storemeta.LockName)
	delete(after, store.Prefix+storemeta.LockName)
	if !maps.Equal(before, after) {
		t.Errorf("a refused open changed the store: %v → %v", before, after)
	}
	time.Sleep(150 * time.Millisecond) // a few heartbeats
	if err := live.Lock().Err(); err != nil {
		t.Fatalf("the live instance noticed something: %v", err)
	}
	if err := live.Close(ctx); err != nil {
		t.Fatalf("the live instance's close: %v", err)
	}
}

func TestOpen_GarbageManifest_ClearErrorNamingIt(t *testing.T) {
	_, id := testkit.IdentityFile(t)
	b := mem.New(mem.Options{})
	if _, err := b.Put(context.Background(), "apps/x/"+store.Prefix+storemeta.ManifestName, []byte("{}garbage"), backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	before := testkit.Snapshot(t, b)
	_, err := state.Open(context.Background(), state.Config{Backend: b, Root: "apps/x", Identities: []age.Identity{id}, Logger: quiet()})
	if !errors.Is(err, store.ErrBadManifest) || !strings.Contains(err.Error(), "apps/x/.cairn-state/.store") {
		t.Fatalf("Open = %v, want ErrBadManifest naming apps/x/.cairn-state/.store", err)
	}
	if !maps.Equal(before, testkit.Snapshot(t, b)) {
		t.Error("Open wrote to a store with a damaged manifest")
	}
}

func TestOpen_RecipientsDiffer_WarnsWithTheDifferenceAndSealsToTheStoresSet(t *testing.T) {
	ctx := context.Background()
	_, id := testkit.IdentityFile(t)
	_, added := testkit.IdentityFile(t)
	b := mem.New(mem.Options{})
	first := openT(t, state.Config{Backend: b, Identities: []age.Identity{id}, InstanceID: "a"})
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	inst := openT(t, state.Config{Backend: b, Identities: []age.Identity{id}, InstanceID: "a",
		Recipients: []string{added.Recipient().String()}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	out := logs.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "differ from the store's") ||
		!strings.Contains(out, "cairn-state rekey") || !strings.Contains(out, added.Recipient().String()[:16]) {
		t.Fatalf("no warning naming the difference and the command:\n%s", out)
	}
	if _, err := inst.Store().Put(ctx, "x", []byte("v"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	rc, _, err := b.Get(ctx, store.Prefix+"x")
	if err != nil {
		t.Fatal(err)
	}
	var sealed bytes.Buffer
	_, _ = sealed.ReadFrom(rc)
	rc.Close()
	if err := envelope.Recover("x", sealed.Bytes(), nil, added); !errors.Is(err, envelope.ErrNoMatchingIdentity) {
		t.Errorf("a recipient outside the store's set was sealed to: %v", err)
	}
}

// TestOpen_RacingFirstOpens_OneManifest boots 8 instances at once on a
// store that does not exist yet; each retries while another holds the
// lock. All of them end up in one store.
func TestOpen_RacingFirstOpens_OneManifest(t *testing.T) {
	for _, c := range []struct {
		name string
		b    func(t *testing.T) backend.Backend
	}{
		{"mem-cas", func(t *testing.T) backend.Backend { return mem.New(mem.Options{}) }},
		{"mem-claims", func(t *testing.T) backend.Backend { return mem.New(mem.Options{NoConditionalWrites: true}) }},
		{"fs", func(t *testing.T) backend.Backend {
			b, err := fs.New(filepath.Join(t.TempDir(), "state"), fs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return b
		}},
		{"versitygw", func(t *testing.T) backend.Backend {
			srv := versitygw.Start(t)
			return srv.Backend(t, srv.NewBucket(t))
		}},
		{"garage", func(t *testing.T) backend.Backend {
			srv := garage.Start(t)
			return srv.Backend(t, srv.NewBucket(t))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := c.b(t)
			_, id := testkit.IdentityFile(t)
			const n = 8
			ids := make([]envelope.StoreID, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					for ctx.Err() == nil {
						inst, err := state.Open(ctx, state.Config{Backend: b, Identities: []age.Identity{id},
							InstanceID: "racer-" + string(rune('a'+i)), StaleAfter: 30 * time.Second, Logger: quiet()})
						if errors.Is(err, lock.ErrHeld) {
							time.Sleep(20 * time.Millisecond)
							continue
						}
						if err != nil {
							t.Errorf("racer %d: %v", i, err)
							return
						}
						m, _ := storeadmin.Manifest(inst.Store())
						ids[i] = m.ID
						if err := inst.Close(context.Background()); err != nil {
							t.Errorf("racer %d: close: %v", i, err)
						}
						return
					}
					t.Errorf("racer %d never booted", i)
				})
			}
			wg.Wait()
			for i, got := range ids {
				if got != ids[0] || got.IsZero() {
					t.Fatalf("racer %d booted in store %s, racer 0 in %s", i, got, ids[0])
				}
			}
			// One manifest, and every object left is this store's.
			var manifests int
			if err := b.List(context.Background(), store.Prefix, func(o backend.Object) error {
				if o.Key == store.Prefix+storemeta.ManifestName {
					manifests++
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if manifests != 1 {
				t.Fatalf("%d manifests", manifests)
			}
			st := connectT(t, b, id)
			if err := storeadmin.Internal(st).List(context.Background(), "", func(i store.Info) error {
				if _, _, err := storeadmin.Internal(st).Get(context.Background(), i.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
					t.Errorf("%s: %v", i.Name, err)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestOpen_RecipientsASubsetOfTheStores_NoWarning_ARealDifferenceWarns(t *testing.T) {
	ctx := context.Background()
	_, writer := testkit.IdentityFile(t)
	recovery, other := newRecipient(t), newRecipient(t)
	b := mem.New(mem.Options{})
	// The store seals to the writer and a recovery key, as the README
	// recommends.
	first := openT(t, state.Config{Backend: b, Identities: []age.Identity{writer}, Recipients: []string{recovery}})
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		recipients []string
		warn       bool
	}{
		{"the writer alone (the recovery key not carried)", nil, false},
		{"the same set", []string{recovery}, false},
		{"a recipient the store does not seal to", []string{other}, true},
	} {
		var logs bytes.Buffer
		inst := openT(t, state.Config{Backend: b, Identities: []age.Identity{writer}, Recipients: c.recipients,
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err := inst.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if warned := strings.Contains(logs.String(), "recipients differ"); warned != c.warn {
			t.Errorf("%s: warned %v, want %v:\n%s", c.name, warned, c.warn, logs.String())
		}
	}
}

func newRecipient(t *testing.T) string {
	t.Helper()
	id := testkit.Identity(t)
	return id.Recipient().String()
}
