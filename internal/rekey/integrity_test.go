package rekey_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/rekey"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// Issue #24, finding 2: store {A, R}, rekeyed to {A} because R leaked,
// then the old manifest put back by someone who can write the bucket. On
// 0ac0f30 A opened it and writers sealed to {A, R} again. Now every object
// the rekey re-sealed names the newer generation: reading one refuses the
// old manifest naming both generations, and a configuration that requires
// its recipients refuses the store at once.
func TestRun_OldManifestPutBackAfterTheRekey_Refused(t *testing.T) {
	testkit.Local(t, func(t *testing.T, b backend.Backend) {
		ctx := t.Context()
		a, r := testkit.Identity(t), testkit.Identity(t)
		st, err := store.Connect(ctx, b, store.Keys{Identities: []age.Identity{a}, Recipients: []age.Recipient{r.Recipient()}},
			store.ConnectOptions{Create: true, Options: store.Options{Logger: quiet()}})

		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put(ctx, "db-password", []byte("hunter2"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		old := testkit.Read(t, b, store.Prefix+storemeta.ManifestName)
		res, err := rekey.Run(ctx, b, rekey.Options{Identities: []age.Identity{a}, Lock: lock.Options{InstanceID: "rekey"}, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		if res.PreviousGeneration != 1 || res.Manifest.Generation != 2 || len(res.Manifest.Recipients) != 1 {
			t.Fatalf("rekey result = %+v", res)
		}
		if _, err := b.Put(ctx, store.Prefix+storemeta.ManifestName, old, backend.PutOptions{}); err != nil {
			t.Fatal(err)
		}

		back, err := connect(t, b, a)
		if err != nil {
			t.Fatal(err)
		}
		if m, _ := storeadmin.Manifest(back); m.Generation != 1 || len(m.Recipients) != 2 {
			t.Fatalf("the old manifest = %+v", m)
		}
		_, _, err = back.Get(ctx, "db-password")
		var rb *storemeta.RolledBackError
		if !errors.As(err, &rb) || rb.Object != 2 || rb.Manifest != 1 {
			t.Fatalf("Get under the old manifest = %v, want a RolledBackError naming generations 2 and 1", err)
		}
		var reported []string
		if err := storeadmin.Verify(ctx, back, storeadmin.VerifyOptions{}, func(c storeadmin.Check) error {
			if errors.Is(c.Err, store.ErrRolledBack) {
				reported = append(reported, c.Name)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(reported, "db-password") {
			t.Errorf("verify reported %v as rolled back, want db-password among them", reported)
		}
		_, err = store.Connect(ctx, b, store.Keys{Identities: []age.Identity{a}}, store.ConnectOptions{RequireConfiguredRecipients: true})
		if !errors.Is(err, store.ErrUnlistedRecipient) {
			t.Fatalf("Connect requiring the configured recipients = %v, want ErrUnlistedRecipient", err)
		}
	})
}

// Every rekey that writes raises the manifest's generation; one with
// nothing to change (the store's set, every object sealed to it under its
// generation) writes nothing and keeps it; a run that continues an
// interrupted one does not raise it again.
func TestRun_EveryRekeyRaisesTheGeneration_ANoOpOrAResumedOneDoesNot(t *testing.T) {
	testkit.Local(t, func(t *testing.T, b backend.Backend) {
		ctx := t.Context()
		key, extra := testkit.Identity(t), testkit.Identity(t)
		seeded(t, b, key, 5)
		opts := rekey.Options{Identities: []age.Identity{key}, Lock: lock.Options{InstanceID: "rekey"}, Logger: quiet()}
		res, err := rekey.Run(ctx, b, opts)
		if err != nil || !res.NothingToChange || res.Manifest.Generation != 1 {
			t.Fatalf("a rekey to the store's own set: %+v, %v; want nothing to change at generation 1", res, err)
		}
		restart := opts
		restart.Restart = true
		for want := uint64(2); want <= 3; want++ {
			res, err := rekey.Run(ctx, b, restart)
			if err != nil {
				t.Fatal(err)
			}
			if res.Manifest.Generation != want || res.PreviousGeneration != want-1 || res.Resealed != res.Total {
				t.Fatalf("rekey --restart: generation %d → %d, %d of %d re-sealed; want %d → %d, all", res.PreviousGeneration, res.Manifest.Generation, res.Resealed, res.Total, want-1, want)
			}
		}
		// To a new set, interrupted after two objects: the progress record
		// names the committed manifest, so the next run continues at 4.
		grown := opts
		grown.Recipients = []age.Recipient{extra.Recipient()}
		stopAt := errors.New("stopped")
		interrupted := grown
		interrupted.CheckpointEvery = 1
		interrupted.Progress = func(p rekey.Progress) {
			if p.Resealed == 2 {
				panic(stopAt)
			}
		}
		func() {
			defer func() {
				if p := recover(); p != stopAt {
					panic(p)
				}
			}()
			_, _ = rekey.Run(ctx, b, interrupted)
		}()
		res, err = rekey.Run(ctx, b, grown)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Resumed || res.Manifest.Generation != 4 || res.PreviousGeneration != 4 {
			t.Fatalf("the resumed run = resumed %v, generation %d → %d; want resumed at 4", res.Resumed, res.PreviousGeneration, res.Manifest.Generation)
		}
		// Afterwards every object names generation 4: a rekey to the same
		// set has nothing to change.
		if res, err := rekey.Run(ctx, b, grown); err != nil || !res.NothingToChange || res.Manifest.Generation != 4 {
			t.Fatalf("after the rotation: %+v, %v; want nothing to change at generation 4", res, err)
		}
	})
}

// Issue #24, finding 5: a rekey away from a leaked key re-authenticates
// what the key forged, and on 0ac0f30 said nothing. Inherent to rotation;
// the result now names every object only the retired key authenticated.
func TestRun_ObjectsOnlyTheRetiredKeyAuthenticated_Named(t *testing.T) {
	testkit.Local(t, func(t *testing.T, b backend.Backend) {
		ctx := t.Context()
		leaked, operator := testkit.Identity(t), testkit.Identity(t)
		// The store belongs to both keys; the application writes with the
		// leaked one, the operator with theirs.
		if _, err := store.Connect(ctx, b, store.Keys{Identities: []age.Identity{operator, leaked}},
			store.ConnectOptions{Create: true, Options: store.Options{Logger: quiet()}}); err != nil {
			t.Fatal(err)
		}
		st, err := connect(t, b, operator)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put(ctx, "by-operator", []byte("fine"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		app, err := connect(t, b, leaked)
		if err != nil {
			t.Fatal(err)
		}
		// The forger holds the leaked key: its object is genuinely
		// authenticated by it.
		if _, err := app.Put(ctx, "config/admins", []byte("mallory"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		// Before the rotation, the operator's key alone sees which
		// objects it did not write.
		opOnly, err := connect(t, b, operator)
		if err != nil {
			t.Fatal(err)
		}
		if obj, err := storeadmin.GetObject(ctx, opOnly, "config/admins"); err == nil {
			t.Fatalf("the operator's key alone authenticates the leaked key's object: %+v", obj.Opened)
		}
		res, err := rekey.Run(ctx, b, rekey.Options{Identities: []age.Identity{operator}, OldIdentities: []age.Identity{leaked},
			Lock: lock.Options{InstanceID: "rekey"}, Logger: quiet()})

		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Reauthenticated, []string{"config/admins"}) {
			t.Fatalf("Reauthenticated = %v, want the leaked key's object only", res.Reauthenticated)
		}
		// Afterwards it verifies as genuine: what the result warns about.
		after, err := connect(t, b, operator)
		if err != nil {
			t.Fatal(err)
		}
		if got, _, err := after.Get(ctx, "config/admins"); err != nil || string(got) != "mallory" {
			t.Fatalf("after the rotation: %q, %v", got, err)
		}
		if _, err := connect(t, b, leaked); !errors.Is(err, store.ErrNotMember) {
			t.Errorf("the leaked key after the rotation: %v, want ErrNotMember", err)
		}
	})
}

// A pinned rekey refuses another store before anything is read or locked.
func TestRun_PinnedToAnotherStore_Refused(t *testing.T) {
	b := mem.New(mem.Options{})
	key := testkit.Identity(t)
	seeded(t, b, key, 1)
	_, err := rekey.Run(t.Context(), b, rekey.Options{Identities: []age.Identity{key}, StoreID: "", Logger: quiet()})
	if err != nil {
		t.Fatalf("unpinned (no id): %v", err)
	}
	st, _ := connect(t, b, key)
	m, _ := storeadmin.Manifest(st)
	pin := m.ID
	pin[15] ^= 1
	_, err = rekey.Run(t.Context(), b, rekey.Options{Identities: []age.Identity{key}, StoreID: pin.String(), Logger: quiet()})
	if !errors.Is(err, store.ErrWrongStore) || !strings.Contains(err.Error(), pin.String()) {
		t.Fatalf("pinned to another store: %v, want ErrWrongStore", err)
	}
}
