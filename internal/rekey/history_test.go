package rekey_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/lockadmin"
	"github.com/cairnhq/state/internal/rekey"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// Issue #21: a rekey re-seals history too — every kept version and
// tombstone — keeping each version's id, so that the retired key opens
// none of it and no object reads as put back afterwards.
func TestRun_ResealsHistory_RetiredKeyOpensNone_StampsKept(t *testing.T) {
	for _, b := range []backend.Backend{mem.New(mem.Options{}), mem.New(mem.Options{NoConditionalWrites: true})} {
		ctx := t.Context()
		oldKey, newKey := testkit.Identity(t), testkit.Identity(t)
		want := seededWith(t, b, oldKey, 4, 0, 3)
		// A deleted name: its versions and its tombstone are history too.
		st, err := store.Connect(ctx, b, store.Keys{Identities: []age.Identity{oldKey}}, store.ConnectOptions{Options: store.Options{Logger: quiet()}})
		if err != nil {
			t.Fatal(err)
		}
		l, err := lock.Acquire(ctx, st, lock.Options{InstanceID: "app", Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Fence(st).Delete(ctx, "obj/03", store.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		delete(want, "obj/03")
		before := map[string][]store.Version{}
		for _, n := range []string{"obj/00", "obj/01", "obj/02", "obj/03"} {
			vs, err := st.History(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			before[n] = vs
		}
		writersBefore := writers(t, st)
		if w := writersBefore["obj/00"]; w.Instance != "app" || w.PID == 0 {
			t.Fatalf("obj/00 was written by %+v, want the holder app", w)
		}
		res, err := rekey.Run(ctx, b, rotation(oldKey, newKey))
		if err != nil {
			t.Fatal(err)
		}
		// 3 live objects, the migration-like log, 12 kept versions and a
		// tombstone (no writer records: ADR 0064).
		if res.Resealed != 17 {
			t.Errorf("re-sealed %d objects, want 17 (history included): %+v", res.Resealed, res)
		}
		// The retired key opens nothing under .cairn-state/, history
		// included.
		// Bound to the store: an unbound envelope refuses every object of
		// a store with an id, whatever the key, and would prove nothing.
		m, _ := storeadmin.Manifest(st)
		old, err := envelope.New([]age.Identity{oldKey}, nil, envelope.Options{StoreID: m.ID})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		err = b.List(ctx, store.Prefix, func(o backend.Object) error {
			name := strings.TrimPrefix(o.Key, store.Prefix)
			if lockadmin.Owns(name) {
				return nil
			}
			rc, _, err := b.Get(ctx, o.Key)
			if err != nil {
				return err
			}
			defer rc.Close()
			var sealed []byte
			buf := make([]byte, 32<<10)
			for {
				k, rerr := rc.Read(buf)
				sealed = append(sealed, buf[:k]...)
				if rerr != nil {
					break
				}
			}
			bound := name
			if rest, ok := strings.CutPrefix(name, ".history/"); ok && !strings.HasSuffix(name, ".deleted") && !strings.HasPrefix(rest, ".") {
				bound = rest[:strings.LastIndexByte(rest, '/')]
			}
			if _, err := old.Open(bound, sealed); err == nil {
				t.Errorf("the retired key opens %s after the rekey", name)
			}
			n++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n < 17 {
			t.Errorf("checked %d objects", n)
		}
		// The new key reads every version, with the same ids, and verify
		// finds nothing wrong (no kept version newer than its object).
		after, err := store.Connect(ctx, b, store.Keys{Identities: []age.Identity{newKey}}, store.ConnectOptions{Options: store.Options{Logger: quiet()}})
		if err != nil {
			t.Fatal(err)
		}
		// Every object keeps its writer: a re-seal is not a write of the
		// rekey's (ADR 0064).
		writersAfter := writers(t, after)
		for n, w := range writersBefore {
			if writersAfter[n] != w {
				t.Errorf("%s: written by %+v before the rekey, %+v after", n, w, writersAfter[n])
			}
		}
		for n, vs := range before {
			got, err := after.History(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			ids := func(vs []store.Version) []store.VersionID {
				var out []store.VersionID
				for _, v := range vs {
					out = append(out, v.ID)
				}
				return out
			}
			if !slices.Equal(ids(got), ids(vs)) {
				t.Errorf("%s: ids after the rekey %v, before %v", n, ids(got), ids(vs))
			}
			for _, v := range got {
				if v.Deleted {
					continue
				}
				if _, _, err := after.GetVersion(ctx, n, v.ID); err != nil {
					t.Errorf("%s version %s after the rekey: %v", n, v.ID, err)
				}
			}
		}
		err = storeadmin.Verify(ctx, after, storeadmin.VerifyOptions{}, func(c storeadmin.Check) error {
			if c.Problem() && !lockadmin.Owns(c.Name) {
				t.Errorf("verify after the rekey: %s: err %v, put back %v, outside %v", c.Name, c.Err, c.PutBack, c.OutsideSet)
			}
			return nil
		})

		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Connect(context.Background(), b, store.Keys{Identities: []age.Identity{oldKey}}, store.ConnectOptions{Options: store.Options{Logger: quiet()}}); !errors.Is(err, store.ErrNotMember) {
			t.Errorf("the old key after the rekey: %v", err)
		}
	}
}

// writers returns the writer each of st's objects names in its header,
// by state name (history's entries included, the lock's objects left out).
func writers(t *testing.T, st *store.Store) map[string]envelope.Writer {
	t.Helper()
	in := storeadmin.Internal(st)
	out := map[string]envelope.Writer{}
	err := in.List(t.Context(), "", func(info store.Info) error {
		if lockadmin.Owns(info.Name) || info.Name == storemeta.ManifestName {
			return nil
		}
		obj, err := storeadmin.GetObject(t.Context(), in, info.Name)
		if err != nil {
			return err
		}
		out[info.Name] = obj.Opened.Writer
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
