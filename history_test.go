package state_test

import (
	"context"
	"errors"
	"testing"

	"filippo.io/age"

	state "github.com/cairnhq/state"
	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

// Issue #21 asks for Config.RejectRollback: an application's own store
// refuses an older genuine object put back under its name. At 4676a0f
// Config had no such field (only store.Options did).
func TestOpen_RejectRollback_StoreRefusesAPutBackObject(t *testing.T) {
	ctx := context.Background()
	_, id := testkit.IdentityFile(t)
	b := mem.New(mem.Options{})
	inst := openT(t, state.Config{Backend: b, Identities: []age.Identity{id}, RejectRollback: true, History: 3})
	st := inst.Store()
	if _, err := st.Put(ctx, "app/key", []byte("old"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	old := testkit.Read(t, b, store.Prefix+"app/key")
	if _, err := st.Put(ctx, "app/key", []byte("new"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// The bucket writer puts the old object back once the new one is
	// kept (a put-back before that is not caught: ADR 0065).
	if err := storeadmin.WaitKeeps(ctx, st); err != nil {
		t.Fatal(err)
	}
	if storeadmin.KeptVersions(st) != 3 {
		t.Errorf("KeptVersions = %d, want Config.History's 3", storeadmin.KeptVersions(st))
	}
	if _, err := b.Put(ctx, store.Prefix+"app/key", old, backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Get(ctx, "app/key"); !errors.Is(err, store.ErrPutBack) {
		t.Errorf("Get of the put-back object = %v, want ErrPutBack", err)
	}
	if _, err := st.GetMany(ctx, []string{"app/key"}, store.ManyOptions{}); !errors.Is(err, store.ErrPutBack) {
		t.Errorf("GetMany of the put-back object = %v, want ErrPutBack", err)
	}
	if _, err := st.Update(ctx, "app/key", func(v []byte, _ bool) ([]byte, error) { return v, nil }); !errors.Is(err, store.ErrPutBack) {
		t.Errorf("Update of the put-back object = %v, want ErrPutBack", err)
	}
}
