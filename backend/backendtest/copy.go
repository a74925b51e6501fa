package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/driver"
)

// The copy cases check [backend.Copier]. A backend that is not a Copier
// skips them, after checking that driver.Copy refuses it honestly.

// copier returns b as a Copier, or skips the case.
func copier(t *testing.T, b backend.Backend) backend.Copier {
	t.Helper()
	c, ok := b.(backend.Copier)
	if !ok {
		if _, err := driver.Copy(t.Context(), b, "a", "b", backend.CopyOptions{}); !errors.Is(err, backend.ErrUnsupported) {
			t.Errorf("driver.Copy on a backend without Copier = %v, want ErrUnsupported", err)
		}
		t.Skip("backend is not a backend.Copier")
	}
	return c
}

// mustCopy copies and checks the returned description against what dst
// must then hold.
func mustCopy(t *testing.T, c backend.Copier, src, dst string, want []byte, opts backend.CopyOptions) backend.Object {
	t.Helper()
	obj, err := c.Copy(t.Context(), src, dst, opts)
	if err != nil {
		t.Fatalf("Copy(%q → %q, %+v): %v", src, dst, opts, err)
	}
	if obj.Key != dst {
		t.Errorf("Copy(%q → %q) returned Object.Key %q", src, dst, obj.Key)
	}
	if obj.Size != int64(len(want)) && obj.Size != -1 {
		t.Errorf("Copy(%q → %q) returned Object.Size %d, want %d (or -1: not reported)", src, dst, obj.Size, len(want))
	}
	if obj.Version == "" {
		t.Errorf("Copy(%q → %q) returned an empty Object.Version", src, dst)
	}
	return obj
}

func testCopyRoundTrip(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	c := copier(t, b)
	for _, size := range []int{0, 1, 4 << 10} {
		src, dst := fmt.Sprintf("src/%d", size), fmt.Sprintf("dst/%d", size)
		data := randomBytes(uint64(size), size)
		sobj := mustPut(t, b, src, data, backend.PutOptions{})
		before := time.Now()
		obj := mustCopy(t, c, src, dst, data, backend.CopyOptions{})
		assertContent(t, b, dst, data, obj.Version)
		assertContent(t, b, src, data, sobj.Version)
		if !h.ContentAddressedVersions && obj.Version == sobj.Version {
			t.Errorf("the copy of %q got the source's version %q; a copy is a new write", src, obj.Version)
		}
		skew := h.MaxClockSkew
		if obj.ModTime.Before(before.Add(-skew)) || obj.ModTime.After(time.Now().Add(skew)) {
			t.Errorf("Copy returned ModTime %v, not close to the local clock (allowed skew %v)", obj.ModTime, skew)
		}
		if !h.ObjectNowUnknown && obj.Now.IsZero() {
			t.Error("Copy returned a zero Object.Now")
		}
	}
	sizes := map[string]int64{"dst/0": 0, "dst/1": 1, "dst/4096": 4 << 10}
	objs := listAll(t, b, "dst/")
	if len(objs) != len(sizes) {
		t.Fatalf("List(\"dst/\") = %q, want the three copies", keysOf(objs))
	}
	for _, o := range objs {
		if want, ok := sizes[o.Key]; !ok || o.Size != want {
			t.Errorf("List reports %q with size %d, want %d", o.Key, o.Size, want)
		}
	}
}

func testCopyOverwrites(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	c := copier(t, b)
	mustPut(t, b, "src", []byte("the source"), backend.PutOptions{})
	old := mustPut(t, b, "dst", []byte("the destination, longer than the source"), backend.PutOptions{})
	obj := mustCopy(t, c, "src", "dst", []byte("the source"), backend.CopyOptions{})
	if obj.Version == old.Version {
		t.Errorf("copy over %q kept its version %q", "dst", old.Version)
	}
	assertContent(t, b, "dst", []byte("the source"), obj.Version)
	assertKeys(t, b, "", []string{"dst", "src"})
}

// A copy is a write of its own: writing the source afterwards leaves the
// copy as it was.
func testCopyIndependentOfSource(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	c := copier(t, b)
	mustPut(t, b, "src", []byte("version one"), backend.PutOptions{})
	obj := mustCopy(t, c, "src", "kept", []byte("version one"), backend.CopyOptions{})
	mustPut(t, b, "src", []byte("version two"), backend.PutOptions{})
	if err := b.Delete(t.Context(), "src", backend.DeleteOptions{}); err != nil {
		t.Fatalf("Delete(src): %v", err)
	}
	assertContent(t, b, "kept", []byte("version one"), obj.Version)
}

func testCopyMissingSource(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	c := copier(t, b)
	old := mustPut(t, b, "dst", []byte("untouched"), backend.PutOptions{})
	for _, dst := range []string{"dst", "fresh"} {
		if _, err := c.Copy(t.Context(), "absent", dst, backend.CopyOptions{}); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("Copy(absent → %q) = %v, want ErrNotFound", dst, err)
		}
	}
	assertContent(t, b, "dst", []byte("untouched"), old.Version)
	assertKeys(t, b, "", []string{"dst"})
}

func testCopyOntoItself(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	c := copier(t, b)
	old := mustPut(t, b, "self", []byte("kept"), backend.PutOptions{})
	if _, err := c.Copy(t.Context(), "self", "self", backend.CopyOptions{}); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("Copy(self → self) = %v, want ErrUnsupported", err)
	}
	assertContent(t, b, "self", []byte("kept"), old.Version)
}

func testCopyHostileKeys(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	c := copier(t, b)
	victim := mustPut(t, b, "x", []byte("victim"), backend.PutOptions{})
	for _, key := range []string{"../x", "/x", "", "nul\x00byte", "a//x", "back\\slash", "bad\xffutf8", strings.Repeat("k", backend.MaxKeyLen+1)} {
		if _, err := c.Copy(t.Context(), key, "dst", backend.CopyOptions{}); !errors.Is(err, backend.ErrInvalidKey) {
			t.Errorf("Copy(%q → dst) = %v, want ErrInvalidKey", key, err)
		}
		if _, err := c.Copy(t.Context(), "x", key, backend.CopyOptions{}); !errors.Is(err, backend.ErrInvalidKey) {
			t.Errorf("Copy(x → %q) = %v, want ErrInvalidKey", key, err)
		}
	}
	assertKeys(t, b, "", []string{"x"})
	assertContent(t, b, "x", []byte("victim"), victim.Version)
}

// Keys that need escaping in a URL, as source and as destination (the
// source of an S3 copy travels in a header: '+' there must not become a
// space).
func testCopyBinarySafeKeys(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	c := copier(t, b)
	keys := []string{
		"ümlaut/日本語/😀.bin",
		"with spaces/and more",
		"query?hash#percent%plus+amp&eq=",
		"%2F%25encoded-looking+",
		"tilde~/dollar$/quote'\"/bang!",
	}
	for i, k := range keys {
		data := []byte(fmt.Sprintf("value %d", i))
		mustPut(t, b, k, data, backend.PutOptions{})
		dst := "copies/" + k
		obj := mustCopy(t, c, k, dst, data, backend.CopyOptions{})
		assertContent(t, b, dst, data, obj.Version)
	}
}

// testCopyLarge copies an object of more than one Garage block (1 MiB),
// small enough for a debug-build server on a loaded machine to answer
// within the S3 backend's response timeout (RoundTrip_64MiBObject is the
// large-object case).
func testCopyLarge(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	c := copier(t, b)
	data := randomBytes(8, 2<<20+17)
	mustPut(t, b, "large/src", data, backend.PutOptions{})
	obj := mustCopy(t, c, "large/src", "large/dst", data, backend.CopyOptions{})
	assertContent(t, b, "large/dst", data, obj.Version)
}

// refused checks that a conditional copy the harness declares unenforced is
// refused with ErrUnsupported, copying nothing.
func refused(t *testing.T, b backend.Backend, c backend.Copier, opts backend.CopyOptions) {
	t.Helper()
	mustPut(t, b, "src", []byte("source"), backend.PutOptions{})
	kept := mustPut(t, b, "dst", []byte("destination"), backend.PutOptions{})
	for _, dst := range []string{"dst", "fresh"} {
		o := opts
		if o.IfSourceVersion == "current" {
			_, sobj := mustGet(t, b, "src")
			o.IfSourceVersion = sobj.Version
		}
		if _, err := c.Copy(t.Context(), "src", dst, o); !errors.Is(err, backend.ErrUnsupported) {
			t.Errorf("Copy(src → %q, %+v) on a backend that does not enforce it = %v, want ErrUnsupported", dst, o, err)
		}
	}
	assertContent(t, b, "dst", []byte("destination"), kept.Version)
	assertKeys(t, b, "", []string{"dst", "src"})
}

func testCopyIfSourceVersion(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	c := copier(t, b)
	if h.CopyRefusesIfSourceVersion {
		refused(t, b, c, backend.CopyOptions{IfSourceVersion: "current"})
		return
	}
	v1 := mustPut(t, b, "src", []byte("one"), backend.PutOptions{}).Version
	obj := mustCopy(t, c, "src", "dst", []byte("one"), backend.CopyOptions{IfSourceVersion: v1})
	assertContent(t, b, "dst", []byte("one"), obj.Version)

	// The source moved on: a copy of the old version fails, copying
	// nothing, over an existing destination and to a fresh one.
	v2 := mustPut(t, b, "src", []byte("two"), backend.PutOptions{}).Version
	for _, dst := range []string{"dst", "fresh"} {
		if _, err := c.Copy(t.Context(), "src", dst, backend.CopyOptions{IfSourceVersion: v1}); !errors.Is(err, backend.ErrPreconditionFailed) {
			t.Errorf("Copy(src → %q) if the source has its old version = %v, want ErrPreconditionFailed", dst, err)
		}
	}
	assertContent(t, b, "dst", []byte("one"), obj.Version)
	assertAbsent(t, b, "fresh")

	obj = mustCopy(t, c, "src", "dst", []byte("two"), backend.CopyOptions{IfSourceVersion: v2})
	assertContent(t, b, "dst", []byte("two"), obj.Version)

	// A missing source has no version to match.
	if err := b.Delete(t.Context(), "src", backend.DeleteOptions{}); err != nil {
		t.Fatalf("Delete(src): %v", err)
	}
	if _, err := c.Copy(t.Context(), "src", "fresh", backend.CopyOptions{IfSourceVersion: v2}); !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Errorf("Copy(absent → fresh) if version %q = %v, want ErrPreconditionFailed", v2, err)
	}
	assertAbsent(t, b, "fresh")
	assertKeys(t, b, "", []string{"dst"})
}

func testCopyIfAbsent(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	c := copier(t, b)
	if h.CopyRefusesIfAbsent {
		refused(t, b, c, backend.CopyOptions{IfAbsent: true})
		return
	}
	mustPut(t, b, "src", []byte("source"), backend.PutOptions{})
	obj := mustCopy(t, c, "src", "dst", []byte("source"), backend.CopyOptions{IfAbsent: true})
	assertContent(t, b, "dst", []byte("source"), obj.Version)

	mustPut(t, b, "src", []byte("changed source"), backend.PutOptions{})
	if _, err := c.Copy(t.Context(), "src", "dst", backend.CopyOptions{IfAbsent: true}); !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Errorf("Copy(src → dst) if absent over an existing dst = %v, want ErrPreconditionFailed", err)
	}
	assertContent(t, b, "dst", []byte("source"), obj.Version)

	// Absent again once deleted.
	if err := b.Delete(t.Context(), "dst", backend.DeleteOptions{}); err != nil {
		t.Fatalf("Delete(dst): %v", err)
	}
	obj = mustCopy(t, c, "src", "dst", []byte("changed source"), backend.CopyOptions{IfAbsent: true})
	assertContent(t, b, "dst", []byte("changed source"), obj.Version)
}

func testCopyBothConditions(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	c := copier(t, b)
	if h.CopyRefusesIfSourceVersion || h.CopyRefusesIfAbsent {
		refused(t, b, c, backend.CopyOptions{IfSourceVersion: "current", IfAbsent: true})
		return
	}
	v := mustPut(t, b, "src", []byte("source"), backend.PutOptions{}).Version
	kept := mustPut(t, b, "taken", []byte("taken"), backend.PutOptions{})
	if _, err := c.Copy(t.Context(), "src", "taken", backend.CopyOptions{IfSourceVersion: v, IfAbsent: true}); !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Errorf("Copy with a true source condition onto an existing dst = %v, want ErrPreconditionFailed", err)
	}
	assertContent(t, b, "taken", []byte("taken"), kept.Version)
	obj := mustCopy(t, c, "src", "fresh", []byte("source"), backend.CopyOptions{IfSourceVersion: v, IfAbsent: true})
	assertContent(t, b, "fresh", []byte("source"), obj.Version)
}

// Racing if-absent copies of different sources to one key: exactly one
// wins, and the key holds its source's bytes.
func testCopyRaceIfAbsent(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	c := copier(t, b)
	if h.CopyRefusesIfAbsent {
		t.Skip("the harness declares that the backend refuses if-absent copies; Copy_IfAbsent checks the refusal")
	}
	const racers, rounds = 8, 3
	for i := range racers {
		mustPut(t, b, fmt.Sprintf("racer/%d", i), fmt.Appendf(nil, "racer %d", i), backend.PutOptions{})
	}
	for round := range rounds {
		dst := fmt.Sprintf("won/%d", round)
		winners := raceWrites(t, racers, func(i int) (backend.Object, error) {
			return c.Copy(t.Context(), fmt.Sprintf("racer/%d", i), dst, backend.CopyOptions{IfAbsent: true})
		})
		if len(winners) != 1 {
			t.Fatalf("round %d: %d racers won an if-absent copy, want exactly one", round, len(winners))
		}
		for i, obj := range winners {
			assertContent(t, b, dst, fmt.Appendf(nil, "racer %d", i), obj.Version)
		}
	}
}

// Copies taken while the source is being rewritten hold one whole version
// of it, never a mix; a copy conditional on a version holds exactly that
// version's bytes.
func testCopyWhileSourceChanges(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	c := copier(t, b)
	const size = 1 << 20
	versions := [][]byte{bytes.Repeat([]byte{'A'}, size), bytes.Repeat([]byte{'B'}, size)}
	mustPut(t, b, "flip", versions[0], backend.PutOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)
	wg.Go(func() {
		for i := 0; ctx.Err() == nil && i < 40; i++ {
			if _, err := b.Put(ctx, "flip", versions[(i+1)%2], backend.PutOptions{}); err != nil {
				if ctx.Err() == nil {
					t.Errorf("writer: Put: %v", err)
				}
				return
			}
		}
	})
	conditional := !h.CopyRefusesIfSourceVersion
	for i := range 10 {
		dst := fmt.Sprintf("copy/%d", i)
		var opts backend.CopyOptions
		var want []byte // the bytes of the version the copy is conditional on
		if conditional && i%2 == 1 {
			var obj backend.Object
			want, obj = mustGet(t, b, "flip")
			opts.IfSourceVersion = obj.Version
		}
		obj, err := c.Copy(t.Context(), "flip", dst, opts)
		if errors.Is(err, backend.ErrPreconditionFailed) && opts.IfSourceVersion != "" {
			assertAbsent(t, b, dst) // the writer moved on first: nothing copied
			continue
		}
		if err != nil {
			t.Fatalf("Copy(flip → %q, %+v): %v", dst, opts, err)
		}
		got, gobj := mustGet(t, b, dst)
		if gobj.Version != obj.Version {
			t.Errorf("%q has version %q, Copy returned %q", dst, gobj.Version, obj.Version)
		}
		if !bytes.Equal(got, versions[0]) && !bytes.Equal(got, versions[1]) {
			t.Errorf("copy %q holds a torn object: %d bytes starting %s", dst, len(got), preview(got))
		}
		if want != nil && !bytes.Equal(got, want) {
			t.Errorf("copy %q conditional on version %q holds other bytes (%s, want %s)", dst, opts.IfSourceVersion, preview(got), preview(want))
		}
	}
	cancel()
	wg.Wait()
}

func testCopyContextCancelled(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	c := copier(t, b)
	mustPut(t, b, "src", []byte("source"), backend.PutOptions{})
	ctx := cancelledContext(t)
	if _, err := c.Copy(ctx, "src", "dst", backend.CopyOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Copy with a cancelled context = %v, want context.Canceled", err)
	}
	assertAbsent(t, b, "dst")
	assertKeys(t, b, "", []string{"src"})
}
