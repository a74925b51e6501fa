package store_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

func keysOf(ids ...*age.X25519Identity) store.Keys {
	var k store.Keys
	for _, id := range ids {
		k.Identities = append(k.Identities, id)
	}
	return k
}

func connect(t testing.TB, b backend.Backend, k store.Keys, create bool) (*store.Store, error) {
	t.Helper()
	return store.Connect(context.Background(), b, k, store.ConnectOptions{Create: create, Options: store.Options{Logger: quiet()}})
}

func mustConnect(t testing.TB, b backend.Backend, k store.Keys, create bool) *store.Store {
	t.Helper()
	st, err := connect(t, b, k, create)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestConnect_NewStore_WritesOneBoundManifestAndBindsEveryObject(t *testing.T) {
	ctx := t.Context()
	b := mem.New(mem.Options{})
	id := testkit.Identity(t)
	before := time.Now().Add(-time.Second)
	st := mustConnect(t, b, keysOf(id), true)
	m, ok := storeadmin.Manifest(st)
	if !ok || m.LockMode != storemeta.LockModeCAS || m.Storage == "" || m.Generation != 1 || m.MigrationLog || !slices.Equal(m.Recipients, []string{id.Recipient().String()}) {
		t.Fatalf("manifest = %+v, %v", m, ok)
	}
	if created, ok := storeadmin.StoreIDTime(m.ID); !ok || created.Before(before) || !created.Equal(m.Created) {
		t.Errorf("store id time %v (%v), created %v", created, ok, m.Created)
	}
	if _, err := st.Put(ctx, "a", []byte("v"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	hdr, err := envelope.PeekHeader("a", rawGet(t, b, store.Prefix+"a"))
	if err != nil || hdr.StoreID != m.ID || hdr.Stamp.Generation != 1 {
		t.Fatalf("object header %+v, %v; want bound to %s, generation 1", hdr, err, m.ID)
	}
	// A second connection reads the same manifest; nothing is rewritten.
	snap := testkit.Snapshot(t, b)
	again := mustConnect(t, b, keysOf(id), true)
	if m2, _ := storeadmin.Manifest(again); !m2.Equal(m) {
		t.Fatalf("second connection's manifest %+v, want %+v", m2, m)
	}
	if got := testkit.Snapshot(t, b); !maps.Equal(got, snap) {
		t.Errorf("a second connection wrote: %v → %v", snap, got)
	}
	// The manifest cannot be overwritten through the internal view.
	if _, err := storeadmin.Internal(st).Put(ctx, storemeta.ManifestName, []byte("{}"), store.PutOptions{}); err == nil {
		t.Error("Put .store through Internal succeeded")
	}
}

func TestConnect_WrongKey_NotMemberWithTheStoresFacts_NothingWritten(t *testing.T) {
	b := mem.New(mem.Options{})
	owner, recovery := testkit.Identity(t), testkit.Identity(t)
	k := keysOf(owner)
	k.Recipients = []age.Recipient{recovery.Recipient()}
	st := mustConnect(t, b, k, true)
	m, _ := storeadmin.Manifest(st)
	snap := testkit.Snapshot(t, b)

	for _, c := range []struct {
		name string
		keys store.Keys
		want error
	}{
		{"unrelated key", keysOf(testkit.Identity(t)), envelope.ErrNoMatchingIdentity},
		// The recovery key decrypts .store but never wrote it.
		{"recovery key as identity", keysOf(recovery), envelope.ErrUnauthenticated},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, create := range []bool{false, true} {
				_, err := connect(t, b, c.keys, create)
				var nm *storemeta.NotMemberError
				if !errors.Is(err, store.ErrNotMember) || !errors.As(err, &nm) || !errors.Is(err, c.want) {
					t.Fatalf("Connect = %v, want a NotMemberError wrapping %v", err, c.want)
				}
				if nm.StoreID != m.ID || !nm.Created.Equal(m.Created) || nm.Recipients != 2 || nm.Key != store.Prefix+storemeta.ManifestName {
					t.Errorf("facts %+v, want store %s created %v, 2 recipients", nm, m.ID, m.Created)
				}
				msg := err.Error()
				for _, want := range []string{m.ID.String(), "2 recipients", "does not belong to this store", "rekey --identity NEW --old-identity OLD", m.Created.Format(time.RFC3339)} {
					if !strings.Contains(msg, want) {
						t.Errorf("message does not say %q: %s", want, msg)
					}
				}
			}
		})
	}
	if got := testkit.Snapshot(t, b); !maps.Equal(got, snap) {
		t.Errorf("a refused connection wrote: %v → %v", snap, got)
	}
}

func TestConnect_GarbageManifest_ClearErrorNamingIt_NeitherRecreatedNorOverwritten(t *testing.T) {
	ctx := t.Context()
	id := testkit.Identity(t)
	other := mustConnect(t, mem.New(mem.Options{}), keysOf(id), true)
	otherEnvelope := func(plain []byte) []byte { // a genuine envelope bound to the store, wrong content
		m, _ := storeadmin.Manifest(other)
		env, err := envelope.New([]age.Identity{id}, nil, envelope.Options{StoreID: m.ID})
		if err != nil {
			t.Fatal(err)
		}
		sealed, err := env.Seal(storemeta.ManifestName, plain)
		if err != nil {
			t.Fatal(err)
		}
		return sealed
	}
	for _, c := range []struct {
		name  string
		bytes []byte
		want  string
	}{
		{"garbage", []byte("this is not an envelope at all"), "not a cairn-state envelope"},
		{"empty", nil, "truncated"},
		{"not a record", otherEnvelope([]byte("hunter2 is not JSON")), "not a manifest record"},
		{"unknown field", otherEnvelope([]byte(`{"cairn_state_store":1,"secret":"hunter2"}`)), "not a manifest record"},
		{"newer record", otherEnvelope([]byte(`{"cairn_state_store":9}`)), "newer cairn-state"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := mem.New(mem.Options{})
			if _, err := b.Put(ctx, store.Prefix+storemeta.ManifestName, c.bytes, backend.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			snap := testkit.Snapshot(t, b)
			for _, create := range []bool{false, true} {
				_, err := connect(t, b, keysOf(id), create)
				var me *storemeta.ManifestError
				if !errors.Is(err, store.ErrBadManifest) || !errors.As(err, &me) {
					t.Fatalf("Connect = %v, want a ManifestError", err)
				}
				msg := err.Error()
				if !strings.Contains(msg, ".cairn-state/.store") || !strings.Contains(msg, c.want) || strings.Contains(msg, "hunter2") {
					t.Errorf("message %q: want it to name .cairn-state/.store and say %q, quoting nothing", msg, c.want)
				}
			}
			if got := testkit.Snapshot(t, b); !maps.Equal(got, snap) {
				t.Errorf("Connect wrote over a damaged manifest: %v → %v", snap, got)
			}
		})
	}
}

func TestConnect_UnboundObjectInAStore_RefusedAsBelongingToNoStore(t *testing.T) {
	ctx := t.Context()
	b := mem.New(mem.Options{})
	id := testkit.Identity(t)
	st := mustConnect(t, b, keysOf(id), true)
	env, err := envelope.New([]age.Identity{id}, nil, envelope.Options{})
	if err != nil {
		t.Fatal(err)
	}
	unbound, err := env.Seal("put/back", []byte("old"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, store.Prefix+"put/back", unbound, backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Get(ctx, "put/back"); !errors.Is(err, envelope.ErrForeignStore) || !errors.Is(err, store.ErrUnreadable) {
		t.Fatalf("an unbound object in a store: %v, want ErrForeignStore", err)
	}
}

func TestConnect_ObjectCopiedFromAnotherStore_SaysItBelongsToAnotherStore(t *testing.T) {
	ctx := t.Context()
	id := testkit.Identity(t) // prod and staging share a key
	prodB, stagingB := mem.New(mem.Options{}), mem.New(mem.Options{})
	prod, staging := mustConnect(t, prodB, keysOf(id), true), mustConnect(t, stagingB, keysOf(id), true)
	if _, err := staging.Put(ctx, "config/admins", []byte("mallory"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := prodB.Put(ctx, store.Prefix+"config/admins", rawGet(t, stagingB, store.Prefix+"config/admins"), backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	_, _, err := prod.Get(ctx, "config/admins")
	var fe *envelope.ForeignStoreError
	pm, _ := storeadmin.Manifest(prod)
	sm, _ := storeadmin.Manifest(staging)
	if !errors.As(err, &fe) || fe.Object != sm.ID || fe.Envelope != pm.ID || !strings.Contains(err.Error(), "belongs to another store") {
		t.Fatalf("Get of a copied object = %v, want ForeignStoreError naming both stores", err)
	}
}

func TestConnect_RecipientsDiffer_SealsToTheStoresSetAndReportsTheDifference(t *testing.T) {
	ctx := t.Context()
	b := mem.New(mem.Options{})
	owner, recovery, extra := testkit.Identity(t), testkit.Identity(t), testkit.Identity(t)
	k := keysOf(owner)
	k.Recipients = []age.Recipient{recovery.Recipient()}
	mustConnect(t, b, k, true)

	// Another configuration: the recovery key dropped, another one added.
	k2 := keysOf(owner)
	k2.Recipients = []age.Recipient{extra.Recipient()}
	st := mustConnect(t, b, k2, true)
	d := storeadmin.RecipientDiff(st)
	if !slices.Equal(d.NotSealedTo, []string{extra.Recipient().String()}) || !slices.Equal(d.NotConfigured, []string{recovery.Recipient().String()}) {
		t.Fatalf("diff = %+v", d)
	}
	if !strings.Contains(d.String(), "not recipients of the store") {
		t.Errorf("diff text %q", d.String())
	}
	if _, err := st.Put(ctx, "x", []byte("v"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	sealed := rawGet(t, b, store.Prefix+"x")
	if err := envelope.Recover("x", sealed, nil, recovery); err != nil {
		t.Errorf("the store's recovery recipient cannot read a new object: %v", err)
	}
	if err := envelope.Recover("x", sealed, nil, extra); !errors.Is(err, envelope.ErrNoMatchingIdentity) {
		t.Errorf("a recipient outside the store's set can read a new object: %v", err)
	}
	if same := storeadmin.RecipientDiff(mustConnect(t, b, k, false)); !same.Empty() {
		t.Errorf("the store's own configuration differs: %+v", same)
	}
}

func TestConnect_NoConditionalWrites_ManifestCommittedUnderTheLock_RaceDetected(t *testing.T) {
	ctx := t.Context()
	b := mem.New(mem.Options{NoConditionalWrites: true})
	id := testkit.Identity(t)
	a := mustConnect(t, b, keysOf(id), true)
	c := mustConnect(t, b, keysOf(id), true)
	if _, _, err := b.Get(ctx, store.Prefix+storemeta.ManifestName); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Connect wrote the manifest without compare-and-swap: %v", err)
	}
	ma, _ := storeadmin.Manifest(a)
	mc, _ := storeadmin.Manifest(c)
	if ma.ID == mc.ID {
		t.Fatal("two pending stores drew the same id")
	}
	// a holds the lock first and commits; c, next, finds it and must start over.
	if err := storeadmin.CommitManifest(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := storeadmin.CommitManifest(ctx, a); err != nil {
		t.Fatalf("a second commit: %v", err)
	}
	if err := storeadmin.CommitManifest(ctx, c); !errors.Is(err, store.ErrManifestChanged) {
		t.Fatalf("the second commit = %v, want ErrManifestChanged", err)
	}
	again := mustConnect(t, b, keysOf(id), true)
	if m, _ := storeadmin.Manifest(again); m.ID != ma.ID {
		t.Fatalf("reconnected to %s, want %s", m.ID, ma.ID)
	}
}

func TestConnect_RacingFirstOpens_OneManifest(t *testing.T) {
	b := mem.New(mem.Options{})
	id := testkit.Identity(t)
	const n = 8
	ids := make([]envelope.StoreID, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			st, err := connect(t, b, keysOf(id), true)
			if err != nil {
				t.Error(err)
				return
			}
			m, _ := storeadmin.Manifest(st)
			ids[i] = m.ID
		})
	}
	wg.Wait()
	for _, got := range ids {
		if got != ids[0] {
			t.Fatalf("racing first opens saw different stores: %v", ids)
		}
	}
}

func TestConnect_Recovery_OpensApplicationObjectsOnly_NeverReservedOnes(t *testing.T) {
	ctx := t.Context()
	b := mem.New(mem.Options{})
	owner, recovery := testkit.Identity(t), testkit.Identity(t)
	k := keysOf(owner)
	k.Recipients = []age.Recipient{recovery.Recipient()}
	st := mustConnect(t, b, k, true)
	m, _ := storeadmin.Manifest(st)
	// A forger who knows only the public recipient and the store id (both
	// visible) seals to the recovery recipient with a throwaway key.
	forged := map[string]string{}
	for _, name := range []string{"config/admins", ".migrations", ".lock-epoch", ".rekey"} {
		forged[name] = "forged " + name
	}
	testkit.Forge(t, b, store.Prefix, m.ID, recovery.Recipient(), forged)
	withRecovery := k
	withRecovery.Recovery = []age.Identity{recovery}
	for _, r := range []*store.Store{mustConnect(t, b, withRecovery, true), mustConnect(t, b, store.Keys{Recovery: []age.Identity{recovery}}, false)} {
		if got, _, err := r.Get(ctx, "config/admins"); err != nil || string(got) != "forged config/admins" {
			t.Errorf("the recovery opt-in does not read the application's object: %q, %v", got, err)
		}
		for _, name := range []string{".migrations", ".lock-epoch", ".rekey"} {
			if got, _, err := storeadmin.Internal(r).Get(ctx, name); err == nil || !errors.Is(err, store.ErrUnreadable) {
				t.Errorf("reserved %s through the recovery opt-in: %q, %v; want it unreadable", name, got, err)
			}
		}
	}
	// Without the opt-in the forgery is refused everywhere.
	if _, _, err := st.Get(ctx, "config/admins"); err == nil || !errors.Is(err, store.ErrUnreadable) {
		t.Errorf("forgery without the opt-in: %v", err)
	}
	// The recovery-only connection cannot write.
	ro := mustConnect(t, b, store.Keys{Recovery: []age.Identity{recovery}}, false)
	if _, err := ro.Put(ctx, "x", []byte("v"), store.PutOptions{}); !errors.Is(err, store.ErrNoManifest) {
		t.Errorf("recovery-only put = %v, want ErrNoManifest", err)
	}
	if _, err := connect(t, b, store.Keys{Recovery: []age.Identity{recovery}}, true); err == nil {
		t.Error("a write-capable connection with a recovery key only succeeded")
	}
}

func TestConnect_Keyless_ListsButOpensNothing(t *testing.T) {
	ctx := t.Context()
	b := mem.New(mem.Options{})
	owner := mustConnect(t, b, keysOf(testkit.Identity(t)), true)
	if _, err := owner.Put(ctx, "x", []byte("v"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	kl := mustConnect(t, b, store.Keys{}, false)
	var names []string
	if err := kl.List(ctx, "", func(i store.Info) error { names = append(names, i.Name); return nil }); err != nil || !slices.Equal(names, []string{"x"}) {
		t.Fatalf("keyless list = %v, %v", names, err)
	}
	if _, _, err := kl.Get(ctx, "x"); err == nil {
		t.Fatal("a keyless store opened an object")
	}
}

func TestRebind_CommitManifest_MovesTheStoreToANewSet(t *testing.T) {
	ctx := t.Context()
	b := mem.New(mem.Options{})
	oldID, newKey := testkit.Identity(t), testkit.Identity(t)
	st := mustConnect(t, b, keysOf(oldID), true)
	m, _ := storeadmin.Manifest(st)
	other := mustConnect(t, b, keysOf(oldID), true)
	next := m
	next.Recipients = []string{newKey.Recipient().String()}
	next.Generation++
	if _, err := storeadmin.Rebind(st, next, keysOf(oldID)); err == nil {
		t.Fatal("Rebind to a set none of the identities is in succeeded")
	}
	moved, err := storeadmin.Rebind(st, next, keysOf(newKey, oldID))
	if err != nil {
		t.Fatal(err)
	}
	if err := storeadmin.CommitManifest(ctx, moved); err != nil {
		t.Fatal(err)
	}
	if _, err := connect(t, b, keysOf(oldID), false); !errors.Is(err, store.ErrNotMember) {
		t.Fatalf("the old key after the move: %v, want ErrNotMember", err)
	}
	got := mustConnect(t, b, keysOf(newKey), false)
	if gm, _ := storeadmin.Manifest(got); !gm.Equal(next) {
		t.Fatalf("manifest after the move = %+v, want %+v", gm, next)
	}
	// A connection made before the move is stale: its commit is refused.
	_ = other
	otherNext := m
	otherNext.Generation = 7
	stale, err := storeadmin.Rebind(other, otherNext, keysOf(oldID))
	if err != nil {
		t.Fatal(err)
	}
	if err := storeadmin.CommitManifest(ctx, stale); !errors.Is(err, store.ErrManifestChanged) {
		t.Fatalf("a stale commit = %v, want ErrManifestChanged", err)
	}
}

// An embedder names an unusable key with the store's own sentinels: the
// envelope's errors are internal (issue #22).
func TestConnect_UnusableKeys_MatchTheStoresSentinels(t *testing.T) {
	ctx := context.Background()
	id := testkit.Identity(t)
	b := mem.New(mem.Options{})
	_, err := store.Connect(ctx, b, store.Keys{Identities: []age.Identity{id}, Recovery: []age.Identity{id}}, store.ConnectOptions{Create: true})
	if !errors.Is(err, store.ErrInvalidIdentity) || errors.Is(err, store.ErrInvalidRecipient) {
		t.Fatalf("an identity given as a recovery identity too: %v, want store.ErrInvalidIdentity", err)
	}
	_, err = store.Connect(ctx, b, store.Keys{Identities: []age.Identity{id}, Recipients: []age.Recipient{nil}}, store.ConnectOptions{Create: true})
	if !errors.Is(err, store.ErrInvalidRecipient) || errors.Is(err, store.ErrInvalidIdentity) {
		t.Fatalf("a nil recipient: %v, want store.ErrInvalidRecipient", err)
	}
	var names []string
	if err := b.List(ctx, "", func(o backend.Object) error { names = append(names, o.Key); return nil }); err != nil || len(names) != 0 {
		t.Fatalf("refused connections wrote %v (%v)", names, err)
	}
}
