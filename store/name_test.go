package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/secret"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

func TestValidateName_ASecret_RefusedWithoutRepeatingIt(t *testing.T) {
	x, pq := testkit.Identity(t), testkit.HybridIdentity(t)
	for _, name := range []string{
		x.String(), "app/" + x.String(), strings.ToLower(x.String()),
		pq.String(), "keys/" + pq.String(),
		"AGE-PLUGIN-YUBIKEY-1QQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQ",
		"b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB",
		"app/release-response-bright-wrist-olive-fever-thumb-glow-myth-copy",
	} {
		err := storeadmin.ValidateName(name)
		var ne *storemeta.NameError
		if !errors.As(err, &ne) || !errors.Is(err, store.ErrInvalidName) {
			t.Fatalf("ValidateName(secret) = %v, want a *NameError", err)
		}
		core := name[len(name)-20:]
		if strings.Contains(err.Error(), core) || strings.Contains(ne.Name, core) {
			t.Errorf("the refusal repeats the secret: %v (Name %q)", err, ne.Name)
		}
		if !strings.Contains(err.Error(), "looks like") {
			t.Errorf("the refusal does not say why: %v", err)
		}
	}
	// A store refuses to write one.
	st, _ := newStore(t, store.Options{})
	if _, err := st.Put(context.Background(), "app/"+x.String(), []byte("v"), store.PutOptions{}); !errors.Is(err, store.ErrInvalidName) {
		t.Errorf("Put with a secret name: %v, want ErrInvalidName", err)
	}
}

// FuzzValidateName pins the property the store relies on: every name
// ValidateName accepts, below any valid root, is a valid backend key that
// stays under the reserved prefix; every refusal is a *NameError.
//
//	go test -run x -fuzz FuzzValidateName -fuzztime 20s ./store
func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"a", "a/b", "../x", "/abs", "a//b", ".lock", "a/./b", "ü", "a\x00", `a\b`, "x/..", strings.Repeat("n", store.MaxNameLen),
		"a\x1b[2J", "app/AGE-SECRET-KEY-PQ-1QQQQQQQQQQQQQQQQQQQQQQQQ", "a/one-two-six-ten-cat-dog-owl-pig-cow-elk"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := storeadmin.ValidateName(name)
		if err != nil {
			var ne *storemeta.NameError
			if !errors.As(err, &ne) || !errors.Is(err, store.ErrInvalidName) {
				t.Fatalf("ValidateName(%q) = %v, want a *NameError matching ErrInvalidName", name, err)
			}
			if secret.Detect(name) != "" && len(name) > 8 && strings.Contains(err.Error(), name) {
				t.Fatalf("ValidateName(%q) repeats a secret-looking name: %v", name, err)
			}
			return
		}
		if k := secret.Detect(name); k != "" {
			t.Fatalf("accepted name %q, which looks like %s", name, k)
		}
		for _, r := range name {
			if unicode.IsControl(r) {
				t.Fatalf("accepted name %q with a control character", name)
			}
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
	s := testkit.Store(t, sb, store.Options{})
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
