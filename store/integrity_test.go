package store_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

// Issue #24, finding 1: with the manifest deleted (and junk objects added
// in front of the real ones), 0ac0f30 re-created the store in format 1 on
// the next write, and read-only connections did no check at all. Now a
// location with objects but no manifest is refused on every path, and
// nothing is written.
func TestConnect_ManifestDeleted_RefusedOnEveryPath_NothingCreated(t *testing.T) {
	for _, padding := range []int{0, 16} {
		t.Run(fmt.Sprintf("padding=%d", padding), func(t *testing.T) {
			testkit.Local(t, func(t *testing.T, b backend.Backend) {
				ctx := t.Context()
				owner, recovery := testkit.Identity(t), testkit.Identity(t)
				k := keysOf(owner)
				k.Recipients = []age.Recipient{recovery.Recipient()}
				st := mustConnect(t, b, k, true)
				for _, n := range []string{"app/a", "app/b"} {
					if _, err := st.Put(ctx, n, []byte("genuine "+n), store.PutOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				if err := b.Delete(ctx, store.Prefix+storemeta.ManifestName, backend.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				for i := range padding {
					// Listed before the genuine objects: garbage, and a
					// bare age file.
					junk := []byte("junk")
					if i%2 == 1 {
						junk = []byte("age-encryption.org/v1\n-> X25519 junk\n")
					}
					if _, err := b.Put(ctx, fmt.Sprintf("%s0pad/%02d", store.Prefix, i), junk, backend.PutOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				snap := testkit.Snapshot(t, b)
				withRecovery := k
				withRecovery.Recovery = []age.Identity{recovery}
				for _, c := range []struct {
					name   string
					keys   store.Keys
					create bool
				}{
					{"read-only", k, false},
					{"write-capable", k, true},
					{"keyless", store.Keys{}, false},
					{"recovery only", store.Keys{Recovery: []age.Identity{recovery}}, false},
					{"with recovery", withRecovery, true},
					{"unrelated key", keysOf(testkit.Identity(t)), true},
				} {
					t.Run(c.name, func(t *testing.T) {
						_, err := connect(t, b, c.keys, c.create)
						var me *storemeta.ManifestError
						if !errors.Is(err, store.ErrManifestMissing) || !errors.As(err, &me) || !me.Missing {
							t.Fatalf("Connect = %v, want a ManifestError saying it is missing", err)
						}
						if errors.Is(err, store.ErrBadManifest) || errors.Is(err, store.ErrNoStore) {
							t.Errorf("the missing manifest is not its own error: %v", err)
						}
						for _, want := range []string{"the store's manifest is missing: restore it from a backup", ".cairn-state/.store", "no new store was made"} {
							if !strings.Contains(err.Error(), want) {
								t.Errorf("message does not say %q: %v", want, err)
							}
						}
					})
				}
				if got := testkit.Snapshot(t, b); !maps.Equal(got, snap) {
					t.Errorf("a refused connection wrote: %v → %v", snap, got)
				}
			})
		})
	}
}

// A store is created only where .cairn-state/ is empty (the lock's own
// objects aside): objects of any kind, and no manifest, are never made a
// store of.
func TestConnect_NeverCreatesWhereObjectsAre(t *testing.T) {
	testkit.Local(t, func(t *testing.T, b backend.Backend) {
		ctx := t.Context()
		id := testkit.Identity(t)
		for _, name := range []string{"app/x", ".migrations", ".rekey", "zz"} {
			t.Run(name, func(t *testing.T) {
				if _, err := b.Put(ctx, store.Prefix+name, []byte("something"), backend.PutOptions{}); err != nil {
					t.Fatal(err)
				}
				defer b.Delete(ctx, store.Prefix+name, backend.DeleteOptions{})
				if _, err := connect(t, b, keysOf(id), true); !errors.Is(err, store.ErrManifestMissing) {
					t.Fatalf("Connect where %s is = %v, want ErrManifestMissing", name, err)
				}
				if _, _, err := b.Get(ctx, store.Prefix+storemeta.ManifestName); !errors.Is(err, backend.ErrNotFound) {
					t.Fatalf("a manifest was made: %v", err)
				}
			})
		}
		// The lock's objects alone say nothing (a crashed first holder on
		// storage without compare-and-swap leaves them): created there.
		if _, err := b.Put(ctx, store.Prefix+".lock.d/epoch-00000000000000000001", []byte(`{"epoch":1}`), backend.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := connect(t, b, keysOf(id), true); err != nil {
			t.Fatalf("Connect where only the lock's objects are: %v", err)
		}
	})
}

func TestConnect_EmptyLocation_NoStoreUnlessCreating(t *testing.T) {
	testkit.Local(t, func(t *testing.T, b backend.Backend) {
		for _, k := range []store.Keys{keysOf(testkit.Identity(t)), {}} {
			_, err := store.Connect(t.Context(), b, k, store.ConnectOptions{Location: "file:///srv/state", Options: store.Options{Logger: quiet()}})
			var ns *storemeta.NoStoreError
			if !errors.Is(err, store.ErrNoStore) || !errors.As(err, &ns) || !strings.Contains(err.Error(), "file:///srv/state") || !strings.Contains(err.Error(), "cairn-state init") {
				t.Fatalf("Connect on an empty location = %v, want a NoStoreError naming it and init", err)
			}
		}
		if keys := rawKeys(t, b); len(keys) != 0 {
			t.Fatalf("a connection that may not create wrote %v", keys)
		}
	})
}

// Issue #24, finding 3: a whole store copied over another (staging's
// objects and manifest into prod's place, one key for both) is served as
// prod. With the store id pinned it is refused before anything is opened
// or written; without, the copy is what the caller gets — which is what
// the pin is for.
func TestConnect_StoreSwappedForAnother_PinnedIdRefusesIt(t *testing.T) {
	testkit.Local(t, func(t *testing.T, b backend.Backend) {
		ctx := t.Context()
		id := testkit.Identity(t)
		prodB := b
		stagingB := mem.New(mem.Options{})
		prod := mustConnect(t, prodB, keysOf(id), true)
		staging := mustConnect(t, stagingB, keysOf(id), true)
		pm, _ := storeadmin.Manifest(prod)
		sm, _ := storeadmin.Manifest(staging)
		if _, err := prod.Put(ctx, "config/admins", []byte("alice"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := staging.Put(ctx, "config/admins", []byte("mallory"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		// The bucket writer swaps the whole store.
		for _, key := range rawKeys(t, stagingB) {
			if _, err := prodB.Put(ctx, key, rawGet(t, stagingB, key), backend.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		snap := testkit.Snapshot(t, prodB)
		for _, create := range []bool{false, true} {
			_, err := store.Connect(ctx, prodB, keysOf(id), store.ConnectOptions{Create: create, StoreID: pm.ID.String(), Options: store.Options{Logger: quiet()}})
			var ws *storemeta.WrongStoreError
			if !errors.Is(err, store.ErrWrongStore) || !errors.As(err, &ws) || ws.Pinned != pm.ID || ws.Found != sm.ID {
				t.Fatalf("pinned Connect to the swapped store = %v, want a WrongStoreError naming %s and %s", err, pm.ID, sm.ID)
			}
			for _, want := range []string{pm.ID.String(), sm.ID.String(), "pinned", "nothing was read or written"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message does not say %q: %v", want, err)
				}
			}
		}
		if got := testkit.Snapshot(t, prodB); !maps.Equal(got, snap) {
			t.Errorf("a refused connection wrote: %v → %v", snap, got)
		}
		// Unpinned, the copy is served: the residual the pin closes.
		unpinned := mustConnect(t, prodB, keysOf(id), false)
		if m, _ := storeadmin.Manifest(unpinned); m.ID != sm.ID {
			t.Fatalf("unpinned: store %s", m.ID)
		}
		// Pinned to the right store, it opens; an empty location does not
		// become the pinned store.
		if _, err := store.Connect(ctx, stagingB, keysOf(id), store.ConnectOptions{StoreID: sm.ID.String()}); err != nil {
			t.Fatalf("pinned to its own store: %v", err)
		}
		empty := mem.New(mem.Options{})
		if _, err := store.Connect(ctx, empty, keysOf(id), store.ConnectOptions{Create: true, StoreID: pm.ID.String()}); !errors.Is(err, store.ErrNoStore) {
			t.Fatalf("pinned Connect with Create on an empty location = %v, want ErrNoStore", err)
		}
		if keys := rawKeys(t, empty); len(keys) != 0 {
			t.Fatalf("a pinned connection created %v", keys)
		}
	})
}

// Every object's authenticated header carries the manifest's generation
// and, when written through a fenced view, the fence's epoch and a write
// sequence that grows across every view of the fence; Put, Update, Get,
// GetMany, GetObject and Verify report the version id they make.
func TestPut_StampsGenerationEpochAndSequence_ReportedOnEveryReadPath(t *testing.T) {
	testkit.Local(t, func(t *testing.T, b backend.Backend) {
		ctx := t.Context()
		st := mustConnect(t, b, keysOf(testkit.Identity(t)), true)
		f := &switchFence{epoch: 9}
		fenced, alsoFenced := storeadmin.WithFence(st, f), storeadmin.Internal(storeadmin.WithFence(st, f))
		var last uint64
		for i, v := range []*store.Store{fenced, alsoFenced, fenced} {
			info, err := v.Put(ctx, fmt.Sprintf("n%d", i), []byte("v"), store.PutOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if info.ID.Epoch != 9 || info.ID.Sequence <= last {
				t.Fatalf("write %d is version %s, want epoch 9, sequence above %d", i, info.ID, last)
			}
			last = info.ID.Sequence
			hdr, err := envelope.PeekHeader(fmt.Sprintf("n%d", i), rawGet(t, b, store.Prefix+fmt.Sprintf("n%d", i)))
			if want := (envelope.Stamp{Generation: 1, Epoch: 9, Sequence: info.ID.Sequence}); err != nil || hdr.Stamp != want {
				t.Fatalf("header stamp %+v, %v; want %+v (Put said version %s)", hdr.Stamp, err, want, info.ID)
			}
		}
		written, err := fenced.Update(ctx, "n0", func([]byte, bool) ([]byte, error) { return []byte("w"), nil })
		if err != nil || written.ID.Epoch != 9 || written.ID.Sequence <= last {
			t.Fatalf("Update made version %s, %v", written.ID, err)
		}
		if _, got, err := st.Get(ctx, "n0"); err != nil || got.ID != written.ID {
			t.Errorf("Get's version %s, %v; want %s", got.ID, err, written.ID)
		}
		want := envelope.Stamp{Generation: 1, Epoch: written.ID.Epoch, Sequence: written.ID.Sequence}
		if obj, err := storeadmin.GetObject(ctx, st, "n0"); err != nil || obj.Info.ID != written.ID || obj.Opened.Stamp != want {
			t.Errorf("GetObject's version %s, stamp %+v, %v", obj.Info.ID, obj.Opened.Stamp, err)
		}
		if items, err := st.GetMany(ctx, []string{"n0"}, store.ManyOptions{}); err != nil || items[0].Info.ID != written.ID {
			t.Errorf("GetMany's version %s, %v", items[0].Info.ID, err)
		}
		// Unfenced writes carry epoch and sequence 0.
		unfenced, err := st.Put(ctx, "plain", []byte("v"), store.PutOptions{})
		if err != nil || !unfenced.ID.IsZero() {
			t.Errorf("an unfenced write made version %s, %v", unfenced.ID, err)
		}
		if hdr, err := envelope.PeekHeader("plain", rawGet(t, b, store.Prefix+"plain")); err != nil || hdr.Stamp != (envelope.Stamp{Generation: 1}) {
			t.Errorf("an unfenced write stamped %+v, %v", hdr.Stamp, err)
		}
		if err := storeadmin.Verify(ctx, st, storeadmin.VerifyOptions{}, func(c storeadmin.Check) error {
			if c.Err != nil || c.Opened.Stamp.Generation != 1 || c.Info.ID != (store.VersionID{Epoch: c.Opened.Stamp.Epoch, Sequence: c.Opened.Stamp.Sequence}) {
				return fmt.Errorf("verify of %s: %+v", c.Name, c)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	})
}

// An object of a newer generation than the manifest read is refused, on
// every read path, naming both generations.
func TestGet_ObjectNewerThanTheManifest_RefusedAsRolledBack(t *testing.T) {
	testkit.Local(t, func(t *testing.T, b backend.Backend) {
		ctx := t.Context()
		id := testkit.Identity(t)
		st := mustConnect(t, b, keysOf(id), true)
		m, _ := storeadmin.Manifest(st)
		old := rawGet(t, b, store.Prefix+storemeta.ManifestName)
		next := m
		next.Generation = 4
		moved, err := storeadmin.Rebind(st, next, keysOf(id))
		if err != nil {
			t.Fatal(err)
		}
		if err := storeadmin.CommitManifest(ctx, moved); err != nil {
			t.Fatal(err)
		}
		if _, err := moved.Put(ctx, "token", []byte("after"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		// The old manifest put back.
		if _, err := b.Put(ctx, store.Prefix+storemeta.ManifestName, old, backend.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		back := mustConnect(t, b, keysOf(id), false)
		check := func(what string, err error) {
			t.Helper()
			var rb *storemeta.RolledBackError
			if !errors.Is(err, store.ErrRolledBack) || !errors.As(err, &rb) || rb.Object != 4 || rb.Manifest != 1 || rb.Name != "token" {
				t.Fatalf("%s = %v, want a RolledBackError (object 4, manifest 1)", what, err)
			}
			for _, want := range []string{"generation 4", "generation 1", "rolled back"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: message does not say %q: %v", what, want, err)
				}
			}
		}
		_, _, err = back.Get(ctx, "token")
		check("Get", err)
		_, err = storeadmin.GetObject(ctx, back, "token")
		check("GetObject", err)
		items, _ := back.GetMany(ctx, []string{"token"}, store.ManyOptions{})
		check("GetMany", items[0].Err)
		found := false
		if err := storeadmin.Verify(ctx, back, storeadmin.VerifyOptions{}, func(c storeadmin.Check) error {
			if c.Name == "token" {
				found = true
				check("Verify", c.Err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !found {
			t.Fatal("verify did not report the object")
		}
	})
}

// A manifest whose header's generation disagrees with its record is not
// one the store wrote.
func TestConnect_ManifestGenerationHeaderAndRecordDisagree_BadManifest(t *testing.T) {
	ctx := t.Context()
	b := mem.New(mem.Options{})
	id := testkit.Identity(t)
	st := mustConnect(t, b, keysOf(id), true)
	m, _ := storeadmin.Manifest(st)
	env, err := envelope.New([]age.Identity{id}, nil, envelope.Options{StoreID: m.ID})
	if err != nil {
		t.Fatal(err)
	}
	plain, _, err := mustConnectEnvelope(t, b, env)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := env.SealStamped(storemeta.ManifestName, plain, envelope.Stamp{Generation: 7}, envelope.Writer{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, store.Prefix+storemeta.ManifestName, sealed, backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := connect(t, b, keysOf(id), false); !errors.Is(err, store.ErrBadManifest) || !strings.Contains(err.Error(), "generation 7") {
		t.Fatalf("Connect = %v, want ErrBadManifest naming the header's generation", err)
	}
}

// mustConnectEnvelope reads the manifest's plaintext with env.
func mustConnectEnvelope(t *testing.T, b backend.Backend, env *envelope.Envelope) ([]byte, envelope.Opened, error) {
	t.Helper()
	return env.OpenWithInfo(storemeta.ManifestName, rawGet(t, b, store.Prefix+storemeta.ManifestName))
}

// RequireConfiguredRecipients refuses a store sealed to a recipient the
// configuration does not list, before anything else is read.
func TestConnect_RequireConfiguredRecipients_RefusesAnUnlistedRecipient(t *testing.T) {
	b := mem.New(mem.Options{})
	owner, leaked := testkit.Identity(t), testkit.Identity(t)
	k := keysOf(owner)
	k.Recipients = []age.Recipient{leaked.Recipient()}
	mustConnect(t, b, k, true)
	_, err := store.Connect(t.Context(), b, keysOf(owner), store.ConnectOptions{RequireConfiguredRecipients: true, Options: store.Options{Logger: quiet()}})
	if !errors.Is(err, store.ErrUnlistedRecipient) || !strings.Contains(err.Error(), leaked.Recipient().String()[:16]) {
		t.Fatalf("Connect = %v, want ErrUnlistedRecipient naming the recipient", err)
	}
	if _, err := store.Connect(t.Context(), b, k, store.ConnectOptions{RequireConfiguredRecipients: true}); err != nil {
		t.Fatalf("the configuration that lists it: %v", err)
	}
	// Without the option the store's set is only reported.
	if st := mustConnect(t, b, keysOf(owner), false); storeadmin.RecipientDiff(st).Empty() {
		t.Fatal("no difference reported")
	}
}

// The store's lock mode is decided at its creation and recorded; later
// connections adopt it without asking the storage, and one whose backend
// cannot give it is refused.
func TestConnect_LockModeRecordedAtCreation_AdoptedLater(t *testing.T) {
	ctx := t.Context()
	id := testkit.Identity(t)
	claims := mem.New(mem.Options{NoConditionalWrites: true})
	st := mustConnect(t, claims, keysOf(id), true)
	if err := storeadmin.CommitManifest(ctx, st); err != nil {
		t.Fatal(err)
	}
	if m, _ := storeadmin.Manifest(st); m.LockMode != storemeta.LockModeClaims || m.CopySourceConditions || !strings.Contains(m.Storage, "conditional writes: false") {
		t.Fatalf("manifest on storage without conditional writes = %+v", m)
	}
	cas := mem.New(mem.Options{})
	st = mustConnect(t, cas, keysOf(id), true)
	m, _ := storeadmin.Manifest(st)
	if m.LockMode != storemeta.LockModeCAS || !m.CopySourceConditions {
		t.Fatalf("manifest on storage with conditional writes (and conditional copies) = %+v", m)
	}
	// The same objects on storage without conditional writes: the
	// compare-and-swap lock could not keep a second instance out there.
	moved := mem.New(mem.Options{NoConditionalWrites: true})
	for _, key := range rawKeys(t, cas) {
		if _, err := moved.Put(ctx, key, rawGet(t, cas, key), backend.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := connect(t, moved, keysOf(id), false); !errors.Is(err, backend.ErrCapabilityMismatch) || !strings.Contains(err.Error(), "compare-and-swap") {
		t.Fatalf("Connect of a compare-and-swap store on storage without it = %v, want ErrCapabilityMismatch", err)
	}
}

// Recording the migration log in the manifest raises its generation, for
// every view of the connection, and is written once.
func TestRecordMigrationLog_OneGenerationUp_OnceForEveryView(t *testing.T) {
	testkit.Local(t, func(t *testing.T, b backend.Backend) {
		ctx := t.Context()
		id := testkit.Identity(t)
		st := mustConnect(t, b, keysOf(id), true)
		fenced := storeadmin.WithFence(st, &switchFence{epoch: 1})
		if err := storeadmin.RecordMigrationLog(ctx, fenced); err != nil {
			t.Fatal(err)
		}
		snap := testkit.Snapshot(t, b)
		if err := storeadmin.RecordMigrationLog(ctx, st); err != nil {
			t.Fatal(err)
		}
		if got := testkit.Snapshot(t, b); !maps.Equal(got, snap) {
			t.Error("a second record rewrote the manifest")
		}
		for _, v := range []*store.Store{st, fenced, storeadmin.Internal(st)} {
			if m, _ := storeadmin.Manifest(v); !m.MigrationLog || m.Generation != 2 {
				t.Errorf("a view's manifest = %+v, want the log recorded at generation 2", m)
			}
		}
		if _, err := st.Put(ctx, "x", []byte("v"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if hdr, err := envelope.PeekHeader("x", rawGet(t, b, store.Prefix+"x")); err != nil || hdr.Stamp.Generation != 2 {
			t.Errorf("a write after the record is stamped %+v, %v", hdr.Stamp, err)
		}
		if m, _ := storeadmin.Manifest(mustConnect(t, b, keysOf(id), false)); !m.MigrationLog || m.Generation != 2 {
			t.Errorf("a new connection reads %+v", m)
		}
	})
}

// The creation of a store is logged at warning level, with its id, where
// it is and how to pin it.
func TestConnect_Creation_WarnsWithIDLocationAndHowToPin(t *testing.T) {
	var log testkit.SyncBuffer
	st, err := store.Connect(context.Background(), mem.New(mem.Options{}), keysOf(testkit.Identity(t)),
		store.ConnectOptions{Create: true, Location: "s3://bucket/apps/one", Options: store.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))}})

	if err != nil {
		t.Fatal(err)
	}
	m, _ := storeadmin.Manifest(st)
	got := log.String()
	for _, want := range []string{"level=WARN", "created a new store", "store_id=" + m.ID.String(), "location=s3://bucket/apps/one", "StoreID", "--store-id", "CAIRN_STATE_STORE_ID"} {
		if !strings.Contains(got, want) {
			t.Errorf("creation log lacks %q:\n%s", want, got)
		}
	}
}
