package state_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"filippo.io/age"

	state "github.com/cairnhq/state"
	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/fault"
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

// ADR 0065: a write's keep goes on behind it, admitted by the lock, so
// that Close (the lock's Release) waits for it: Close does not return
// while a keep is held, and once it returned the keep has landed. (Here,
// not in the store's tests: the lock numbers the writes of a whole
// process, and the store's examples print version ids.)
func TestClose_WaitsForTheKeepsBehindWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		_, id := testkit.IdentityFile(t)
		f := fault.New(mem.New(mem.Options{}))
		inst, err := state.Open(ctx, state.Config{Backend: f, Identities: []age.Identity{id}, InstanceID: "pod-a", Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		open := make(chan struct{})
		f.SetHook(func(ctx context.Context, c fault.Call) error {
			if (c.Op == fault.OpPut || c.Op == fault.OpCopy) && strings.Contains(c.Key, ".history/") {
				select {
				case <-open:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
		info, err := inst.Store().Put(ctx, "app/k", []byte("v"), store.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		closed := make(chan error, 1)
		go func() { closed <- inst.Close(ctx) }()
		synctest.Wait()
		select {
		case err := <-closed:
			t.Fatalf("Close returned (%v) with a keep in flight", err)
		default:
		}
		close(open)
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		entry := store.Prefix + ".history/app/k/" + info.ID.String()
		rc, _, err := f.Get(ctx, entry)
		if err != nil {
			t.Fatalf("%s after Close: %v", entry, err)
		}
		rc.Close()
	})
}
