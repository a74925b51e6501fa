package store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

func TestPutGet_RoundTrip_ReturnsPlaintextAndInfo(t *testing.T) {
	ctx := t.Context()
	s, _ := newStore(t, store.Options{})
	for _, data := range [][]byte{{}, []byte("hello"), bytes.Repeat([]byte{0, 1, 2, 255}, 4096)} {
		put, err := s.Put(ctx, "keys/signing.pem", data, store.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, info, err := s.Get(ctx, "keys/signing.pem")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("Get returned %d bytes, want the %d written", len(got), len(data))
		}
		if !sameObject(info, put) {
			t.Errorf("Get info %+v, Put info %+v: want equal", info, put)
		}
		if info.Name != "keys/signing.pem" || info.Version == "" || info.ModTime.IsZero() || info.Size <= int64(len(data)) {
			t.Errorf("info %+v: want name, version, modtime and a sealed size above the plaintext's", info)
		}
	}
}

func TestPut_StoredBytesAreSealedUnderReservedPrefix(t *testing.T) {
	ctx := t.Context()
	for _, root := range []string{"", "apps/one", "apps/two/"} {
		s, b := newStore(t, store.Options{Root: root})
		secret := []byte("correct horse battery staple")
		for _, name := range []string{"token", "db/users.sqlite", "ünïcode name"} {
			if _, err := s.Put(ctx, name, secret, store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		want := strings.TrimSuffix(root, "/")
		if want != "" {
			want += "/"
		}
		want += ".cairn-state/"
		if storeadmin.KeyPrefix(s) != want {
			t.Errorf("root %q: KeyPrefix %q, want %q", root, storeadmin.KeyPrefix(s), want)
		}
		keys := rawKeys(t, b)
		if len(keys) != 3 {
			t.Fatalf("root %q: stored keys %q, want 3", root, keys)
		}
		for _, k := range keys {
			if !strings.HasPrefix(k, want) {
				t.Errorf("root %q: key %q is not under %q", root, k, want)
			}
			if bytes.Contains(rawGet(t, b, k), secret) {
				t.Errorf("root %q: stored object %q contains the plaintext", root, k)
			}
		}
	}
}

func TestValidateName_RefusesHostileNames(t *testing.T) {
	cases := []struct {
		name, why string
	}{
		{"", "empty"},
		{"../x", "'..' path segment"},
		{"a/../../x", "'..' path segment"},
		{"a/./b", "'.' path segment"},
		{"/etc/passwd", "absolute"},
		{"a//b", "empty path segment"},
		{"a/", "empty path segment"},
		{"a\x00b", "control character"},
		{"line\nbreak", "control character"},
		{"del\x7f", "control character"},
		{"c1\u0085", "control character"},
		{`a\b`, "backslash"},
		{"\xff\xfe", "UTF-8"},
		{strings.Repeat("n", store.MaxNameLen+1), "longer than"},
	}
	for _, c := range cases {
		err := storeadmin.ValidateName(c.name)
		if !errors.Is(err, store.ErrInvalidName) || errors.Is(err, store.ErrReservedName) {
			t.Errorf("ValidateName(%q) = %v, want ErrInvalidName (not reserved)", c.name, err)
			continue
		}
		if !strings.Contains(err.Error(), c.why) {
			t.Errorf("ValidateName(%q) = %q, want it to say %q", c.name, err, c.why)
		}
	}
	for _, ok := range []string{"a", "a/b/c", "ünïcode/ name with spaces", "x?#%+&=", "a.b", "a/.b", strings.Repeat("n", store.MaxNameLen)} {
		if err := storeadmin.ValidateName(ok); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", ok, err)
		}
	}
}

func TestOperations_InvalidName_RefusedBeforeStorage(t *testing.T) {
	ctx := t.Context()
	s, b := newStore(t, store.Options{})
	for _, name := range []string{"../escape", "/abs", "", "a\x00"} {
		if _, err := s.Put(ctx, name, []byte("x"), store.PutOptions{}); !errors.Is(err, store.ErrInvalidName) {
			t.Errorf("Put(%q) = %v, want ErrInvalidName", name, err)
		}
		if _, _, err := s.Get(ctx, name); !errors.Is(err, store.ErrInvalidName) {
			t.Errorf("Get(%q) = %v, want ErrInvalidName", name, err)
		}
		if err := s.Delete(ctx, name, store.DeleteOptions{}); !errors.Is(err, store.ErrInvalidName) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidName", name, err)
		}
		if _, err := s.Stat(ctx, name); !errors.Is(err, store.ErrInvalidName) {
			t.Errorf("Stat(%q) = %v, want ErrInvalidName", name, err)
		}
		if _, err := s.Update(ctx, name, func([]byte, bool) ([]byte, error) { return nil, nil }); !errors.Is(err, store.ErrInvalidName) {
			t.Errorf("Update(%q) = %v, want ErrInvalidName", name, err)
		}
	}
	if err := s.List(ctx, "../", func(store.Info) error { return nil }); !errors.Is(err, store.ErrInvalidName) {
		t.Errorf("List(../) = %v, want ErrInvalidName", err)
	}
	if keys := rawKeys(t, b); len(keys) != 0 {
		t.Errorf("stored keys %q after refused writes, want none", keys)
	}
}

func TestOpen_InvalidRoot_Refused(t *testing.T) {
	for _, root := range []string{"/abs", "a//b", "../up", "a/../b", "x\x00", "apps/.cairn-state/x", "apps/.CAIRN-STATE", strings.Repeat("r", store.MaxRootLen+1)} {
		_, err := storeadmin.Open(mem.New(mem.Options{}), testkit.Envelope(t), store.Options{Root: root})
		if !errors.Is(err, store.ErrInvalidRoot) {
			t.Errorf("Open(root %q) = %v, want ErrInvalidRoot", root, err)
		}
	}
	if _, err := storeadmin.Open(nil, testkit.Envelope(t), store.Options{}); err == nil {
		t.Error("Open(nil backend) succeeded")
	}
	if _, err := storeadmin.Open(mem.New(mem.Options{}), nil, store.Options{}); err == nil {
		t.Error("Open(nil sealer) succeeded")
	}
}

func TestReservedNames_OnlyInternalViewAcceptsAndListsThem(t *testing.T) {
	ctx := t.Context()
	s, _ := newStore(t, store.Options{})
	if _, err := s.Put(ctx, ".lock", []byte("x"), store.PutOptions{}); !errors.Is(err, store.ErrReservedName) || !errors.Is(err, store.ErrInvalidName) {
		t.Fatalf("public Put(.lock) = %v, want ErrReservedName and ErrInvalidName", err)
	}
	in := storeadmin.Internal(s)
	if _, err := in.Put(ctx, ".lock", []byte("holder"), store.PutOptions{}); err != nil {
		t.Fatalf("internal Put(.lock): %v", err)
	}
	if _, err := s.Put(ctx, "app", []byte("y"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, ".lock"); !errors.Is(err, store.ErrReservedName) {
		t.Errorf("public Get(.lock) = %v, want ErrReservedName", err)
	}
	got, _, err := in.Get(ctx, ".lock")
	if err != nil || string(got) != "holder" {
		t.Fatalf("internal Get(.lock) = %q, %v", got, err)
	}
	if names := listNames(t, s, ""); strings.Join(names, ",") != "app" {
		t.Errorf("public List = %q, want only [app]", names)
	}
	if names := listNames(t, in, ""); strings.Join(names, ",") != ".lock,app" {
		t.Errorf("internal List = %q, want [.lock app]", names)
	}
}

func listNames(t testing.TB, s *store.Store, prefix string) []string {
	t.Helper()
	var names []string
	if err := s.List(t.Context(), prefix, func(i store.Info) error {
		names = append(names, i.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return names
}

func TestGet_Missing_ErrNotFoundNamingObject(t *testing.T) {
	s, _ := newStore(t, store.Options{})
	_, _, err := s.Get(t.Context(), "nothing/here")
	if !errors.Is(err, store.ErrNotFound) || !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Get missing = %v, want ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), `"nothing/here"`) {
		t.Errorf("error %q does not name the object", err)
	}
}

func TestGet_RootMoved_StillOpens(t *testing.T) {
	ctx := t.Context()
	b := mem.New(mem.Options{})
	sealer := testkit.Envelope(t)
	old, _ := storeadmin.Open(b, sealer, store.Options{Root: "old/place"})
	if _, err := old.Put(ctx, "config/key", []byte("k3y"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// An operator moves the whole root to another prefix.
	raw := rawGet(t, b, "old/place/.cairn-state/config/key")
	if _, err := b.Put(ctx, "new/place/.cairn-state/config/key", raw, backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	moved, _ := storeadmin.Open(b, sealer, store.Options{Root: "new/place"})
	got, _, err := moved.Get(ctx, "config/key")
	if err != nil || string(got) != "k3y" {
		t.Fatalf("Get after moving the root = %q, %v; want the value", got, err)
	}
}

func TestGet_CopiedToAnotherName_FailsToOpen(t *testing.T) {
	ctx := t.Context()
	s, b := newStore(t, store.Options{})
	if _, err := s.Put(ctx, "admin-token", []byte("secret"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	raw := rawGet(t, b, ".cairn-state/admin-token")
	if _, err := b.Put(ctx, ".cairn-state/guest-token", raw, backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.Get(ctx, "guest-token")
	if !errors.Is(err, envelope.ErrNameMismatch) {
		t.Fatalf("Get of an object copied to another name = %v, want envelope.ErrNameMismatch", err)
	}
	if !strings.Contains(err.Error(), `"guest-token"`) {
		t.Errorf("error %q does not name the object", err)
	}
}

func TestGet_WrongKeyOrTampered_EnvelopeErrorNamingObject(t *testing.T) {
	ctx := t.Context()
	b := mem.New(mem.Options{})
	s := testkit.Store(t, b, store.Options{})
	if _, err := s.Put(ctx, "token", []byte("secret"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	stranger := testkit.Store(t, b, store.Options{})
	if _, _, err := stranger.Get(ctx, "token"); !errors.Is(err, envelope.ErrNoMatchingIdentity) || !strings.Contains(err.Error(), `"token"`) {
		t.Errorf("Get with another identity = %v, want envelope.ErrNoMatchingIdentity naming the object", err)
	}
	raw := rawGet(t, b, ".cairn-state/token")
	raw[len(raw)-1] ^= 1
	if _, err := b.Put(ctx, ".cairn-state/token", raw, backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "token"); !errors.Is(err, envelope.ErrTampered) {
		t.Errorf("Get of a tampered object = %v, want envelope.ErrTampered", err)
	}
}

func TestContextCancelled_PassesThrough(t *testing.T) {
	s, _ := newStore(t, store.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Put(ctx, "a", []byte("x"), store.PutOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Put = %v, want context.Canceled", err)
	}
	if _, _, err := s.Get(ctx, "a"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get = %v, want context.Canceled", err)
	}
	if err := s.List(ctx, "", func(store.Info) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("List = %v, want context.Canceled", err)
	}
}

// sizedBackend serves one object whose declared size and real length are
// chosen by the test, and counts the bytes read from it.
type sizedBackend struct {
	backend.Backend
	declared int64
	body     io.Reader
	read     int64
}

func (b *sizedBackend) Get(ctx context.Context, key string) (io.ReadCloser, backend.Object, error) {
	return io.NopCloser(readCounter{b}), backend.Object{Key: key, Size: b.declared, Version: "1"}, nil
}

type readCounter struct{ b *sizedBackend }

func (r readCounter) Read(p []byte) (int, error) {
	n, err := r.b.body.Read(p)
	r.b.read += int64(n)
	return n, err
}

// endless is an io.Reader that never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestGet_DeclaredOversize_RefusedWithoutReading(t *testing.T) {
	sb := &sizedBackend{Backend: mem.New(mem.Options{}), declared: 1 << 40, body: endless{}}
	s := testkit.Store(t, sb, store.Options{MaxObjectSize: 1 << 20})
	_, _, err := s.Get(t.Context(), "huge")
	if !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("Get = %v, want ErrTooLarge", err)
	}
	if want := "1048576 MiB stored, over the 1 MiB limit"; !strings.Contains(err.Error(), want) {
		t.Errorf("Get = %q, want it to say %q", err, want)
	}
	if sb.read != 0 {
		t.Errorf("read %d bytes of an object declared too large, want 0", sb.read)
	}
}

func TestGet_SizeLies_ReadStopsJustPastLimit(t *testing.T) {
	const limit = 1 << 20
	sb := &sizedBackend{Backend: mem.New(mem.Options{}), declared: 100, body: endless{}}
	s := testkit.Store(t, sb, store.Options{MaxObjectSize: limit})
	_, _, err := s.Get(t.Context(), "liar")
	if !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("Get = %v, want ErrTooLarge", err)
	}
	if want := "more than 1 MiB read (declared 100 bytes)"; !strings.Contains(err.Error(), want) {
		t.Errorf("Get = %q, want it to say %q", err, want)
	}
	if sb.read > limit+1 {
		t.Errorf("read %d bytes of an endless object, want at most limit+1 = %d", sb.read, limit+1)
	}
}

func TestPut_SealedOverMax_RefusedAndNothingWritten(t *testing.T) {
	s, b := newStore(t, store.Options{MaxObjectSize: 4096})
	_, err := s.Put(t.Context(), "big", make([]byte, 4096), store.PutOptions{})
	if !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("Put = %v, want ErrTooLarge", err)
	}
	if want := "sealed, over the 4096 bytes limit"; !strings.Contains(err.Error(), want) {
		t.Errorf("Put = %q, want it to say %q", err, want)
	}
	if keys := rawKeys(t, b); len(keys) != 0 {
		t.Errorf("stored %q, want nothing", keys)
	}
	if _, err := s.Put(t.Context(), "small", make([]byte, 1024), store.PutOptions{}); err != nil {
		t.Errorf("Put under the limit: %v", err)
	}
}

func TestPut_Conditions_CompareAndSwap(t *testing.T) {
	ctx := t.Context()
	s, _ := newStore(t, store.Options{})
	first, err := s.Put(ctx, "c", []byte("1"), store.PutOptions{IfAbsent: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "c", []byte("2"), store.PutOptions{IfAbsent: true}); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Errorf("second IfAbsent Put = %v, want ErrPreconditionFailed", err)
	}
	second, err := s.Put(ctx, "c", []byte("2"), store.PutOptions{IfVersion: first.Version})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "c", []byte("3"), store.PutOptions{IfVersion: first.Version}); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Errorf("Put with a stale version = %v, want ErrPreconditionFailed", err)
	}
	if err := s.Delete(ctx, "c", store.DeleteOptions{IfVersion: first.Version}); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Errorf("Delete with a stale version = %v, want ErrPreconditionFailed", err)
	}
	if err := s.Delete(ctx, "c", store.DeleteOptions{IfVersion: second.Version}); err != nil {
		t.Errorf("Delete with the current version = %v", err)
	}
	if err := s.Delete(ctx, "c", store.DeleteOptions{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Delete of a deleted object = %v, want ErrNotFound", err)
	}
}

func TestPut_ConditionWithoutCAS_UnsupportedAndNothingWritten(t *testing.T) {
	ctx := t.Context()
	b := mem.New(mem.Options{NoConditionalWrites: true})
	s := testkit.Store(t, b, store.Options{})
	if storeadmin.ConditionalWrites(s) {
		t.Fatal("ConditionalWrites() = true on a backend without them")
	}
	if _, err := s.Put(ctx, "c", []byte("1"), store.PutOptions{IfAbsent: true}); !errors.Is(err, store.ErrUnsupported) {
		t.Errorf("Put IfAbsent = %v, want ErrUnsupported", err)
	}
	if keys := rawKeys(t, b); len(keys) != 0 {
		t.Fatalf("stored %q after an unsupported conditional put, want nothing", keys)
	}
	info, err := s.Put(ctx, "c", []byte("1"), store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "c", store.DeleteOptions{IfVersion: info.Version}); !errors.Is(err, store.ErrUnsupported) {
		t.Errorf("Delete IfVersion = %v, want ErrUnsupported", err)
	}
	if _, err := s.Stat(ctx, "c"); err != nil {
		t.Errorf("object gone after an unsupported conditional delete: %v", err)
	}
}

func TestStat_DescribesWithoutOpening(t *testing.T) {
	ctx := t.Context()
	b := mem.New(mem.Options{})
	writer := testkit.Store(t, b, store.Options{})
	put, err := writer.Put(ctx, "a", []byte("value"), store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sibling := range []string{"a/b", "ab", "a0"} {
		if _, err := writer.Put(ctx, sibling, []byte("x"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A store with another key cannot open the object but can describe it.
	stranger := testkit.Store(t, b, store.Options{})
	info, err := stranger.Stat(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if !sameObject(info, put) {
		t.Errorf("Stat = %+v, want %+v", info, put)
	}
	if err := writer.Delete(ctx, "a", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := stranger.Stat(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Stat of a deleted object beside its siblings = %v, want ErrNotFound", err)
	}
}

func TestList_NamesSizesTimesInOrder(t *testing.T) {
	ctx := t.Context()
	s, b := newStore(t, store.Options{Root: "r"})
	want := []string{"a", "b/1", "b/2", "c"}
	for _, n := range []string{"c", "b/2", "a", "b/1"} {
		if _, err := s.Put(ctx, n, []byte(n), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Objects outside the store are not listed.
	if _, err := b.Put(ctx, "r/app-data", []byte("x"), backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	var infos []store.Info
	if err := s.List(ctx, "", func(i store.Info) error { infos = append(infos, i); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(infos) != len(want) {
		t.Fatalf("listed %d objects, want %d", len(infos), len(want))
	}
	for i, info := range infos {
		if info.Name != want[i] || info.Size == 0 || info.Version == "" || info.ModTime.IsZero() {
			t.Errorf("listed %+v, want name %q with size, version and time", info, want[i])
		}
	}
	if got := listNames(t, s, "b/"); strings.Join(got, ",") != "b/1,b/2" {
		t.Errorf("List(b/) = %q", got)
	}
	stop := errors.New("enough")
	calls := 0
	err := s.List(ctx, "", func(store.Info) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Errorf("List with a failing callback = %v after %d calls, want the callback's error unchanged after 1", err, calls)
	}
}
