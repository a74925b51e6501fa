package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/store"
)

// FuzzValidateName pins the property the store relies on: every name
// ValidateName accepts, below any valid root, is a valid backend key that
// stays under the reserved prefix; every refusal is a *NameError.
//
//	go test -run x -fuzz FuzzValidateName -fuzztime 20s ./store
func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"a", "a/b", "../x", "/abs", "a//b", ".lock", "a/./b", "ü", "a\x00", `a\b`, "x/..", strings.Repeat("n", store.MaxNameLen)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := store.ValidateName(name)
		if err != nil {
			var ne *store.NameError
			if !errors.As(err, &ne) || !errors.Is(err, store.ErrInvalidName) {
				t.Fatalf("ValidateName(%q) = %v, want a *NameError matching ErrInvalidName", name, err)
			}
			return
		}
		for _, root := range []string{"", strings.Repeat("r", store.MaxRootLen)} {
			key := root + "/" + store.Prefix + name
			if root == "" {
				key = store.Prefix + name
			}
			if err := backend.ValidateKey(key); err != nil {
				t.Fatalf("accepted name %q gives invalid key: %v", name, err)
			}
		}
		for seg := range strings.SplitSeq(name, "/") {
			if seg == ".." || seg == "." || seg == "" {
				t.Fatalf("accepted name %q has segment %q", name, seg)
			}
		}
		if strings.HasPrefix(name, ".") {
			t.Fatalf("accepted reserved name %q", name)
		}
	})
}

// statBackend offers the optional Stater side interface over mem.
type statBackend struct {
	backend.Backend
	stats int
}

func (b *statBackend) Stat(ctx context.Context, key string) (backend.Object, error) {
	b.stats++
	var found *backend.Object
	err := b.List(ctx, key, func(o backend.Object) error {
		if o.Key == key {
			found = &o
		}
		return nil
	})
	if err != nil {
		return backend.Object{}, err
	}
	if found == nil {
		return backend.Object{}, fmt.Errorf("stat %q: %w", key, backend.ErrNotFound)
	}
	return *found, nil
}

func TestStat_BackendWithStater_UsesIt(t *testing.T) {
	ctx := t.Context()
	sb := &statBackend{Backend: mem.New(mem.Options{})}
	s, err := store.Open(sb, newSealer(t), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	put, err := s.Put(ctx, "a", []byte("x"), store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Stat(ctx, "a"); err != nil || !sameObject(info, put) {
		t.Errorf("Stat = %+v, %v; want %+v", info, err, put)
	}
	if _, err := s.Stat(ctx, "b"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Stat(missing) = %v, want ErrNotFound", err)
	}
	if sb.stats != 2 {
		t.Errorf("backend Stat called %d times, want 2", sb.stats)
	}
}
