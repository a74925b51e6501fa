// Package backendtest is the conformance suite that every
// [backend.Backend] runs. A backend's own test calls [Run] with a [Harness]
// that hands out empty backends; the suite then checks the whole contract of
// package backend: round trips, binary-safe keys, listing order and
// pagination, conditional writes and their races, versions, not-found,
// capability honesty, context cancellation, hostile keys, the clock, the
// server-side copy of a [backend.Copier] with its conditions, and the
// multi-object delete (driver.DeleteMany).
//
// Every case asks the harness for a fresh backend, so cases are independent
// and a failure names the behaviour that broke. A backend's whole
// conformance test is a few lines:
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, backendtest.Harness{
//			NewBackend: func(t *testing.T) backend.Backend {
//				b, err := fs.New(t.TempDir(), fs.Options{})
//				if err != nil {
//					t.Fatal(err)
//				}
//				t.Cleanup(func() { b.Close() })
//				return b
//			},
//		})
//	}
//
// Cases that need conditional writes skip when [backend.Capabilities]
// reports none, and the capability-honesty case then checks that
// conditional calls fail with [backend.ErrUnsupported] and change nothing.
// The heavy cases (a 64 MiB object, 2,500 keys, a multi-delete of 1,100)
// run once each; -short skips the 64 MiB one and the multi-delete's.
package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/state/backend"
)

// Harness describes the backend under test.
type Harness struct {
	// NewBackend returns an EMPTY backend (a fresh directory, a fresh
	// bucket) that lives until the test ends; it registers its own cleanup
	// with t.Cleanup. It is called once per case.
	NewBackend func(t *testing.T) backend.Backend

	// MaxClockSkew is how far the backend's Now and object ModTimes may be
	// from the local clock. Zero means 10 seconds, enough for the
	// one-second resolution of S3 dates.
	MaxClockSkew time.Duration

	// ContentAddressedVersions declares that the backend's versions are
	// derived from the bytes (an S3 ETag is the MD5 of a single-part
	// upload), so that two writes of identical bytes may get the same
	// version. Such a backend departs from the contract's "new version on
	// every write" and must say so in its documentation; the suite then
	// only checks that different bytes get different versions. Callers
	// that depend on ABA-free versions (the store) must make every write's
	// bytes differ, which age sealing does.
	ContentAddressedVersions bool

	// ObjectNowUnknown declares that the backend cannot tell the storage's
	// clock per request, so that Object.Now is always zero; the suite then
	// checks that it is. Otherwise every Object from Get, Put and List must
	// carry the time of its response.
	ObjectNowUnknown bool

	// CopyRefusesIfSourceVersion and CopyRefusesIfAbsent declare that the
	// backend, a [backend.Copier], does not enforce that copy condition
	// (the S3 backend on a server that ignores it, or with
	// conditional=off): the suite then checks that a copy with it fails
	// with ErrUnsupported and copies nothing, and otherwise that it is
	// enforced. Backends that are not Copiers skip the copy cases.
	CopyRefusesIfSourceVersion bool
	CopyRefusesIfAbsent        bool
}

// clockResolution is the coarsest clock a backend may report: S3's Date and
// Last-Modified headers have one-second resolution.
const clockResolution = time.Second

// Run runs the conformance suite against the backends h hands out.
func Run(t *testing.T, h Harness) {
	if h.NewBackend == nil {
		t.Fatal("backendtest: Harness.NewBackend is nil")
	}
	if h.MaxClockSkew == 0 {
		h.MaxClockSkew = 10 * time.Second
	}
	cases := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"RoundTrip_EmptyObject", testRoundTripEmpty},
		{"RoundTrip_SmallObject", testRoundTripSmall},
		{"RoundTrip_64MiBObject", testRoundTrip64MiB},
		{"RoundTrip_AllByteValues", testRoundTripAllByteValues},
		{"Put_CopiesCallersBytes", testPutCopiesData},
		{"Put_OverwritesExistingObject", testPutOverwrites},
		{"PutBody_RoundTrip", testPutBodyRoundTrip},
		{"PutBody_FailingBodyWritesNothing", testPutBodyFailingBody},
		{"PutBody_ShortBodyWritesNothing", testPutBodyShortBody},
		{"PutBody_Conditions", testPutBodyConditions},
		{"PutBody_ContextCancelledWritesNothing", testPutBodyContextCancelled},
		{"Keys_BinarySafe", testBinarySafeKeys},
		{"Keys_DeletedPrefixCanBecomeKey", testDeletedPrefixCanBecomeKey},
		{"Keys_HostileRefusedAndNothingWritten", testHostileKeys},
		{"List_LexicalOrder", testListLexicalOrder},
		{"List_PrefixFiltering", testListPrefixFiltering},
		{"List_Pagination2500Keys", testListPagination},
		{"List_StopsAtCallbackError", testListStopsAtCallbackError},
		{"List_ReportsSizeAndVersion", testListReportsObjects},
		{"List_EmptyBackend", testListEmpty},
		{"List_DuringConcurrentWritesAndDeletes", testListDuringChurn},
		{"NotFound_GetAbsentKey", testGetNotFound},
		{"NotFound_DeleteAbsentKey", testDeleteNotFound},
		{"Delete_RemovesOnlyThatKey", testDeleteRemovesOnlyThatKey},
		{"Version_ChangesOnEveryWrite", testVersionChangesOnEveryWrite},
		{"Version_ChangesAfterDeleteAndRecreate", testVersionAfterRecreate},
		{"Conditional_PutIfAbsent", testPutIfAbsent},
		{"Conditional_PutIfVersion", testPutIfVersion},
		{"Conditional_PutBothConditionsRefused", testPutBothConditions},
		{"Conditional_DeleteIfVersion", testDeleteIfVersion},
		{"Conditional_DeleteIfVersionAbsentOK", testDeleteIfVersionAbsentOK},
		{"Conditional_RaceIfAbsent_ExactlyOneWins", testRaceIfAbsent},
		{"Conditional_RaceIfVersion_ExactlyOneWins", testRaceIfVersion},
		{"Capabilities_NoConditionalWrites_UnsupportedAndNothingWritten", testCapabilityHonesty},
		{"Context_CancelledRefusesAndChangesNothing", testContextCancelled},
		{"Context_DeadlineExceeded", testContextDeadline},
		{"Readers_NeverSeeTornObjects", testNoTornReads},
		{"Clock_NowCloseToRealTime", testNowCloseToRealTime},
		{"Clock_ObjectNowIsTheAnsweringRequestsTime", testObjectNow},
		{"Copy_RoundTrip", testCopyRoundTrip},
		{"Copy_OverwritesDestination", testCopyOverwrites},
		{"Copy_IndependentOfLaterSourceWrites", testCopyIndependentOfSource},
		{"Copy_MissingSource_NotFound", testCopyMissingSource},
		{"Copy_OntoItself_Refused", testCopyOntoItself},
		{"Copy_HostileKeysRefusedAndNothingWritten", testCopyHostileKeys},
		{"Copy_BinarySafeKeys", testCopyBinarySafeKeys},
		{"Copy_2MiBObject", testCopyLarge},
		{"Copy_IfSourceVersion", testCopyIfSourceVersion},
		{"Copy_IfAbsent", testCopyIfAbsent},
		{"Copy_BothConditions", testCopyBothConditions},
		{"Copy_RaceIfAbsent_ExactlyOneWins", testCopyRaceIfAbsent},
		{"Copy_WhileSourceChanges_OneWholeVersion", testCopyWhileSourceChanges},
		{"Copy_ContextCancelled", testCopyContextCancelled},
		{"DeleteMany_RemovesExactlyThoseKeys", testDeleteManyRemovesExactlyThoseKeys},
		{"DeleteMany_MoreKeysThanOneRequest", testDeleteManyLargeBatch},
		{"DeleteMany_InvalidKeyFailsOthersDeleted", testDeleteManyInvalidKey},
		{"DeleteMany_ContextCancelled", testDeleteManyContextCancelled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, h) })
	}
}

// ---- helpers ----

func randomBytes(seed uint64, n int) []byte {
	var s [32]byte
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	buf := make([]byte, n)
	_, _ = rand.NewChaCha8(s).Read(buf)
	return buf
}

func mustPut(t *testing.T, b backend.Backend, key string, data []byte, opts backend.PutOptions) backend.Object {
	t.Helper()
	obj, err := b.Put(t.Context(), key, data, opts)
	if err != nil {
		t.Fatalf("Put(%q, %d bytes, %+v): %v", key, len(data), opts, err)
	}
	if obj.Key != key {
		t.Errorf("Put(%q) returned Object.Key %q", key, obj.Key)
	}
	if obj.Size != int64(len(data)) {
		t.Errorf("Put(%q) returned Object.Size %d, want %d", key, obj.Size, len(data))
	}
	if obj.Version == "" {
		t.Errorf("Put(%q) returned an empty Object.Version", key)
	}
	return obj
}

func mustGet(t *testing.T, b backend.Backend, key string) ([]byte, backend.Object) {
	t.Helper()
	rc, obj, err := b.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%q): reading: %v", key, err)
	}
	if err := rc.Close(); err != nil {
		t.Fatalf("Get(%q): Close: %v", key, err)
	}
	if obj.Key != key {
		t.Errorf("Get(%q) returned Object.Key %q", key, obj.Key)
	}
	if obj.Size != int64(len(data)) {
		t.Errorf("Get(%q) returned Object.Size %d, but %d bytes were read", key, obj.Size, len(data))
	}
	return data, obj
}

// assertContent checks that key holds exactly want, with version when it is
// not empty.
func assertContent(t *testing.T, b backend.Backend, key string, want []byte, version string) {
	t.Helper()
	got, obj := mustGet(t, b, key)
	if !bytes.Equal(got, want) {
		t.Errorf("Get(%q) = %d bytes %s, want %d bytes %s", key, len(got), preview(got), len(want), preview(want))
	}
	if version != "" && obj.Version != version {
		t.Errorf("Get(%q) version = %q, want %q", key, obj.Version, version)
	}
}

func assertAbsent(t *testing.T, b backend.Backend, key string) {
	t.Helper()
	rc, _, err := b.Get(t.Context(), key)
	if err == nil {
		rc.Close()
		t.Errorf("Get(%q) succeeded, want the object to be absent", key)
		return
	}
	if !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Get(%q) = %v, want ErrNotFound", key, err)
	}
}

func listAll(t *testing.T, b backend.Backend, prefix string) []backend.Object {
	t.Helper()
	var objs []backend.Object
	err := b.List(t.Context(), prefix, func(o backend.Object) error {
		objs = append(objs, o)
		return nil
	})
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return objs
}

func keysOf(objs []backend.Object) []string {
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	return keys
}

func assertKeys(t *testing.T, b backend.Backend, prefix string, want []string) {
	t.Helper()
	got := keysOf(listAll(t, b, prefix))
	if want == nil {
		want = []string{}
	}
	if len(got) == 0 {
		got = []string{}
	}
	if !slices.Equal(got, want) {
		t.Errorf("List(%q) keys =\n  %q\nwant\n  %q", prefix, got, want)
	}
}

func preview(b []byte) string {
	if len(b) > 16 {
		return fmt.Sprintf("%q…", b[:16])
	}
	return fmt.Sprintf("%q", b)
}

func requireConditional(t *testing.T, b backend.Backend) {
	t.Helper()
	if !b.Capabilities().ConditionalWrites {
		t.Skip("backend reports no conditional writes; Capabilities_NoConditionalWrites_UnsupportedAndNothingWritten covers it")
	}
}

func cancelledContext(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}

// ---- round trips ----

func testRoundTripEmpty(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	obj := mustPut(t, b, "empty", []byte{}, backend.PutOptions{})
	assertContent(t, b, "empty", []byte{}, obj.Version)
	objs := listAll(t, b, "")
	if len(objs) != 1 || objs[0].Key != "empty" || objs[0].Size != 0 {
		t.Errorf("List after putting an empty object = %+v, want one object \"empty\" of size 0", objs)
	}
	// A nil slice is an empty object too.
	mustPut(t, b, "nil", nil, backend.PutOptions{})
	assertContent(t, b, "nil", []byte{}, "")
}

func testRoundTripSmall(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	data := []byte("hello, cairn-state\n")
	obj := mustPut(t, b, "dir/small.txt", data, backend.PutOptions{})
	got, gobj := mustGet(t, b, "dir/small.txt")
	if !bytes.Equal(got, data) {
		t.Errorf("Get = %q, want %q", got, data)
	}
	if gobj.Version != obj.Version {
		t.Errorf("Get version %q differs from Put version %q", gobj.Version, obj.Version)
	}
	if gobj.ModTime.IsZero() {
		t.Error("Get returned a zero ModTime")
	}
}

func testRoundTrip64MiB(t *testing.T, h Harness) {
	if testing.Short() {
		t.Skip("64 MiB round trip skipped in -short mode")
	}
	b := h.NewBackend(t)
	data := randomBytes(64, 64<<20)
	obj := mustPut(t, b, "large/blob", data, backend.PutOptions{})
	assertContent(t, b, "large/blob", data, obj.Version)
}

func testRoundTripAllByteValues(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	data := make([]byte, 0, 512)
	for i := range 256 {
		data = append(data, byte(i))
	}
	for i := range 256 {
		data = append(data, byte(255-i))
	}
	obj := mustPut(t, b, "bytes", data, backend.PutOptions{})
	assertContent(t, b, "bytes", data, obj.Version)
}

func testPutCopiesData(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	data := []byte("original")
	mustPut(t, b, "k", data, backend.PutOptions{})
	copy(data, "XXXXXXXX")
	assertContent(t, b, "k", []byte("original"), "")
}

func testPutOverwrites(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	first := mustPut(t, b, "k", []byte("first, longer content"), backend.PutOptions{})
	second := mustPut(t, b, "k", []byte("second"), backend.PutOptions{})
	if first.Version == second.Version {
		t.Errorf("overwrite kept version %q", first.Version)
	}
	assertContent(t, b, "k", []byte("second"), second.Version)
	assertKeys(t, b, "", []string{"k"})
}

// ---- keys ----

func testBinarySafeKeys(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	deep := strings.Repeat("d/", 30) + "leaf"
	long := strings.Repeat(strings.Repeat("s", 63)+"/", 15) + strings.Repeat("e", backend.MaxKeyLen-15*64)
	keys := []string{
		"ümlaut/日本語/😀.bin",
		"with spaces/and more spaces",
		"query?hash#percent%plus+amp&eq=",
		"%2F%00%25encoded-looking",
		".hidden/.cairn-state/.lock",
		"tilde~/dollar$/quote'\"/bang!",
		"-leading-dash",
		deep,
		long,
	}
	if len(long) != backend.MaxKeyLen {
		t.Fatalf("test bug: long key is %d bytes", len(long))
	}
	versions := map[string]string{}
	for i, k := range keys {
		versions[k] = mustPut(t, b, k, []byte(fmt.Sprintf("value %d of %q", i, k)), backend.PutOptions{}).Version
	}
	for i, k := range keys {
		assertContent(t, b, k, []byte(fmt.Sprintf("value %d of %q", i, k)), versions[k])
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	assertKeys(t, b, "", want)
	for _, k := range keys {
		if err := b.Delete(t.Context(), k, backend.DeleteOptions{}); err != nil {
			t.Errorf("Delete(%q): %v", k, err)
		}
		assertAbsent(t, b, k)
	}
	assertKeys(t, b, "", nil)
}

// testDeletedPrefixCanBecomeKey pins that a key used as a "directory" by
// other keys, once those are deleted, can itself hold an object.
func testDeletedPrefixCanBecomeKey(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	mustPut(t, b, "a/b/c", []byte("deep"), backend.PutOptions{})
	if err := b.Delete(t.Context(), "a/b/c", backend.DeleteOptions{}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	assertAbsent(t, b, "a/b")
	assertAbsent(t, b, "a")
	obj := mustPut(t, b, "a/b", []byte("now a key"), backend.PutOptions{})
	assertContent(t, b, "a/b", []byte("now a key"), obj.Version)
	assertKeys(t, b, "", []string{"a/b"})
}

func testHostileKeys(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	ctx := t.Context()
	victim := mustPut(t, b, "x", []byte("victim"), backend.PutOptions{})
	for _, key := range []string{
		"../x",
		"../../etc/passwd",
		"a/../../x",
		"/abs",
		"/x",
		"",
		"nul\x00byte",
		"x\x00",
		strings.Repeat("k", backend.MaxKeyLen+1),
		strings.Repeat("a/", backend.MaxKeyLen/2) + "x",
		"./x",
		"a//x",
		"dir/",
		"back\\slash",
		"ctl\nnewline",
		"bad\xffutf8",
	} {
		if _, err := b.Put(ctx, key, []byte("hostile"), backend.PutOptions{}); !errors.Is(err, backend.ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", key, err)
		}
		if b.Capabilities().ConditionalWrites {
			if _, err := b.Put(ctx, key, []byte("hostile"), backend.PutOptions{IfAbsent: true}); !errors.Is(err, backend.ErrInvalidKey) {
				t.Errorf("Put(%q, IfAbsent) = %v, want ErrInvalidKey", key, err)
			}
		}
		if rc, _, err := b.Get(ctx, key); !errors.Is(err, backend.ErrInvalidKey) {
			if err == nil {
				rc.Close()
			}
			t.Errorf("Get(%q) = %v, want ErrInvalidKey", key, err)
		}
		if err := b.Delete(ctx, key, backend.DeleteOptions{}); !errors.Is(err, backend.ErrInvalidKey) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
	for _, prefix := range []string{"../", "/", "a//", "nul\x00"} {
		called := false
		err := b.List(ctx, prefix, func(backend.Object) error { called = true; return nil })
		if !errors.Is(err, backend.ErrInvalidKey) || called {
			t.Errorf("List(%q) = %v (callback called: %v), want ErrInvalidKey and no callback", prefix, err, called)
		}
	}
	// Nothing was written or removed.
	assertKeys(t, b, "", []string{"x"})
	assertContent(t, b, "x", []byte("victim"), victim.Version)
}

// ---- list ----

func testListLexicalOrder(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	// '-' (0x2d) < '.' (0x2e) < '/' (0x2f) < '0' (0x30): a directory walk
	// that visits "p/a/" when it meets the name "a" gets this wrong.
	keys := []string{"p/a0", "p/a/b", "p/a.d", "p/a-c", "p/a/b0/c", "p/B", "p/ä", "p/z", "p/a/a"}
	for _, k := range keys {
		mustPut(t, b, k, []byte(k), backend.PutOptions{})
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	assertKeys(t, b, "", want)
	assertKeys(t, b, "p/", want)
}

func testListPrefixFiltering(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	for _, k := range []string{"app/config", "app/data/1", "app/data/2", "app/database", "apple", "ap", "b/app/x", "app-other"} {
		mustPut(t, b, k, []byte(k), backend.PutOptions{})
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"ap", "app-other", "app/config", "app/data/1", "app/data/2", "app/database", "apple", "b/app/x"}},
		{"app/", []string{"app/config", "app/data/1", "app/data/2", "app/database"}},
		{"app/data", []string{"app/data/1", "app/data/2", "app/database"}},
		{"app/data/", []string{"app/data/1", "app/data/2"}},
		{"app", []string{"app-other", "app/config", "app/data/1", "app/data/2", "app/database", "apple"}},
		{"ap", []string{"ap", "app-other", "app/config", "app/data/1", "app/data/2", "app/database", "apple"}},
		{"app/config", []string{"app/config"}},
		{"nothing/", nil},
		{"app/zzz", nil},
		{"b/", []string{"b/app/x"}},
	} {
		assertKeys(t, b, tc.prefix, tc.want)
	}
}

func testListPagination(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	const n = 2500
	// Names whose lexical order differs from their creation order.
	keys := make([]string, n)
	for i := range n {
		keys[i] = fmt.Sprintf("page/%02d/%04d", (i*7)%100, i)
	}
	versions := make(map[string]string, n)
	var mu sync.Mutex
	// Neighbours just outside the prefix; none is also a "directory" of
	// the others, which POSIX-backed S3 servers (versitygw) cannot hold.
	putAll(t, b, append(slices.Clone(keys), "pag", "pagf", "page-", "pagez"), func(k string, o backend.Object) {
		mu.Lock()
		versions[k] = o.Version
		mu.Unlock()
	})

	objs := listAll(t, b, "page/")
	if len(objs) != n {
		t.Fatalf("List(\"page/\") returned %d objects, want %d", len(objs), n)
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	for i, o := range objs {
		if o.Key != want[i] {
			t.Fatalf("List(\"page/\")[%d] = %q, want %q (order or completeness broken)", i, o.Key, want[i])
		}
		if o.Version != versions[o.Key] {
			t.Errorf("List reports %q with version %q, Put returned %q", o.Key, o.Version, versions[o.Key])
		}
		if o.Size != int64(len(o.Key)) {
			t.Errorf("List reports %q with size %d, want %d", o.Key, o.Size, len(o.Key))
		}
	}
	// A prefix inside the paginated set.
	var sub []string
	for _, k := range want {
		if strings.HasPrefix(k, "page/42/") {
			sub = append(sub, k)
		}
	}
	assertKeys(t, b, "page/42/", sub)
	if got := len(listAll(t, b, "")); got != n+4 {
		t.Errorf("List(\"\") returned %d objects, want %d", got, n+4)
	}
}

// putAll writes every key (its own name as content) with a few workers.
func putAll(t *testing.T, b backend.Backend, keys []string, done func(string, backend.Object)) {
	t.Helper()
	const workers = 16
	ch := make(chan string)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for k := range ch {
				o, err := b.Put(t.Context(), k, []byte(k), backend.PutOptions{})
				if err != nil {
					errs <- fmt.Errorf("Put(%q): %w", k, err)
					for range ch {
					}
					return
				}
				done(k, o)
			}
		})
	}
	for _, k := range keys {
		ch <- k
	}
	close(ch)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func testListStopsAtCallbackError(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	for i := range 10 {
		mustPut(t, b, fmt.Sprintf("k%02d", i), []byte("v"), backend.PutOptions{})
	}
	stop := errors.New("stop here")
	var seen []string
	err := b.List(t.Context(), "", func(o backend.Object) error {
		seen = append(seen, o.Key)
		if len(seen) == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Errorf("List returned %v, want the callback's error", err)
	}
	if !slices.Equal(seen, []string{"k00", "k01", "k02"}) {
		t.Errorf("callback saw %q, want the first three keys and no more", seen)
	}
}

func testListReportsObjects(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	a := mustPut(t, b, "obj/a", []byte("12345"), backend.PutOptions{})
	c := mustPut(t, b, "obj/c", []byte{}, backend.PutOptions{})
	objs := listAll(t, b, "obj/")
	if len(objs) != 2 {
		t.Fatalf("List returned %d objects, want 2", len(objs))
	}
	for i, want := range []backend.Object{a, c} {
		got := objs[i]
		if got.Key != want.Key || got.Size != want.Size || got.Version != want.Version {
			t.Errorf("List()[%d] = {%q size %d version %q}, want {%q size %d version %q}",
				i, got.Key, got.Size, got.Version, want.Key, want.Size, want.Version)
		}
		if got.ModTime.IsZero() {
			t.Errorf("List()[%d] has a zero ModTime", i)
		}
	}
}

func testListEmpty(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	assertKeys(t, b, "", nil)
	assertKeys(t, b, "some/prefix/", nil)
}

// testListDuringChurn lists while another goroutine creates and deletes
// keys in nested "directories": every List succeeds, in order, and always
// reports the keys that nobody touches.
func testListDuringChurn(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	stable := []string{"churn/a", "churn/m/stable", "churn/z"}
	for _, k := range stable {
		mustPut(t, b, k, []byte(k), backend.PutOptions{})
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			k := fmt.Sprintf("churn/m/x%d/y/z", i%3)
			if _, err := b.Put(ctx, k, []byte("x"), backend.PutOptions{}); err != nil {
				if ctx.Err() == nil {
					t.Errorf("churn Put(%q): %v", k, err)
				}
				return
			}
			if err := b.Delete(ctx, k, backend.DeleteOptions{}); err != nil {
				if ctx.Err() == nil {
					t.Errorf("churn Delete(%q): %v", k, err)
				}
				return
			}
		}
	})
	for i := range 100 {
		var got []string
		err := b.List(t.Context(), "churn/", func(o backend.Object) error {
			if !strings.Contains(o.Key, "/x") {
				got = append(got, o.Key)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("List %d during churn: %v", i, err)
		}
		if !slices.Equal(got, stable) {
			t.Fatalf("List %d during churn reports stable keys %q, want %q", i, got, stable)
		}
	}
	cancel()
	wg.Wait()
}

// ---- not found and delete ----

func testGetNotFound(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	assertAbsent(t, b, "never/written")
	mustPut(t, b, "dir/child", []byte("x"), backend.PutOptions{})
	// "dir" is only a prefix of another key, not an object.
	assertAbsent(t, b, "dir")
	_, _, err := b.Get(t.Context(), "never/written")
	if err == nil || !strings.Contains(err.Error(), "never/written") {
		t.Errorf("Get of an absent key: error %v does not name the key", err)
	}
}

func testDeleteNotFound(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	// The contract lets a backend whose storage cannot tell (S3) report
	// success; any other error is a bug.
	if err := b.Delete(t.Context(), "never/written", backend.DeleteOptions{}); err != nil && !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Delete of an absent key = %v, want nil or ErrNotFound", err)
	}
	mustPut(t, b, "dir/child", []byte("x"), backend.PutOptions{})
	if err := b.Delete(t.Context(), "dir", backend.DeleteOptions{}); err != nil && !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Delete of a key that is only a prefix = %v, want nil or ErrNotFound", err)
	}
	assertContent(t, b, "dir/child", []byte("x"), "")
}

func testDeleteRemovesOnlyThatKey(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	for _, k := range []string{"d/a", "d/b", "d/b2", "d/b/c"} {
		mustPut(t, b, k, []byte(k), backend.PutOptions{})
	}
	if err := b.Delete(t.Context(), "d/b", backend.DeleteOptions{}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	assertAbsent(t, b, "d/b")
	assertKeys(t, b, "", []string{"d/a", "d/b/c", "d/b2"})
	for _, k := range []string{"d/a", "d/b/c", "d/b2"} {
		assertContent(t, b, k, []byte(k), "")
	}
}

// ---- versions ----

func testVersionChangesOnEveryWrite(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	seen := map[string]int{}
	same := []byte("identical bytes")
	for i := range 5 {
		v := mustPut(t, b, "v", same, backend.PutOptions{}).Version
		if j, dup := seen[v]; dup && !h.ContentAddressedVersions {
			t.Errorf("write %d of identical bytes reused version %q of write %d", i, v, j)
		}
		seen[v] = i
		_, obj := mustGet(t, b, "v")
		if obj.Version != v {
			t.Errorf("after write %d Get reports version %q, Put returned %q", i, obj.Version, v)
		}
	}
	prev := ""
	for i := range 5 {
		v := mustPut(t, b, "v", []byte(fmt.Sprintf("content %d", i)), backend.PutOptions{}).Version
		if v == prev {
			t.Errorf("write of new content %d kept version %q", i, v)
		}
		prev = v
	}
}

func testVersionAfterRecreate(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	data := []byte("same")
	if h.ContentAddressedVersions {
		data = []byte("first")
	}
	v1 := mustPut(t, b, "r", data, backend.PutOptions{}).Version
	if err := b.Delete(t.Context(), "r", backend.DeleteOptions{}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if h.ContentAddressedVersions {
		data = []byte("second")
	}
	v2 := mustPut(t, b, "r", data, backend.PutOptions{}).Version
	if v1 == v2 {
		t.Errorf("recreated object got the deleted object's version %q", v1)
	}
}

// ---- conditional writes ----

func testPutIfAbsent(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	requireConditional(t, b)
	obj := mustPut(t, b, "once", []byte("first"), backend.PutOptions{IfAbsent: true})
	assertContent(t, b, "once", []byte("first"), obj.Version)

	_, err := b.Put(t.Context(), "once", []byte("second"), backend.PutOptions{IfAbsent: true})
	if !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Errorf("Put IfAbsent over an existing object = %v, want ErrPreconditionFailed", err)
	}
	assertContent(t, b, "once", []byte("first"), obj.Version)

	// After a delete the key is absent again.
	if err := b.Delete(t.Context(), "once", backend.DeleteOptions{}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	obj = mustPut(t, b, "once", []byte("third"), backend.PutOptions{IfAbsent: true})
	assertContent(t, b, "once", []byte("third"), obj.Version)
}

func testPutIfVersion(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	requireConditional(t, b)
	v1 := mustPut(t, b, "cas", []byte("one"), backend.PutOptions{}).Version
	v2 := mustPut(t, b, "cas", []byte("two"), backend.PutOptions{IfVersion: v1}).Version
	if v2 == v1 {
		t.Errorf("Put IfVersion kept version %q", v1)
	}
	assertContent(t, b, "cas", []byte("two"), v2)

	// A stale version fails and changes nothing.
	_, err := b.Put(t.Context(), "cas", []byte("stale"), backend.PutOptions{IfVersion: v1})
	if !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Errorf("Put IfVersion with a stale version = %v, want ErrPreconditionFailed", err)
	}
	assertContent(t, b, "cas", []byte("two"), v2)

	// An absent key has no version to match.
	_, err = b.Put(t.Context(), "absent", []byte("x"), backend.PutOptions{IfVersion: v2})
	if !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Errorf("Put IfVersion on an absent key = %v, want ErrPreconditionFailed", err)
	}
	assertAbsent(t, b, "absent")

	// A version of another key does not match.
	other := mustPut(t, b, "other", []byte("two"), backend.PutOptions{}).Version
	if other != v2 {
		_, err = b.Put(t.Context(), "cas", []byte("cross"), backend.PutOptions{IfVersion: other})
		if !errors.Is(err, backend.ErrPreconditionFailed) {
			t.Errorf("Put IfVersion with another key's version = %v, want ErrPreconditionFailed", err)
		}
		assertContent(t, b, "cas", []byte("two"), v2)
	}
}

func testPutBothConditions(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	requireConditional(t, b)
	v := mustPut(t, b, "both", []byte("kept"), backend.PutOptions{}).Version
	_, err := b.Put(t.Context(), "both", []byte("x"), backend.PutOptions{IfAbsent: true, IfVersion: v})
	if err == nil {
		t.Error("Put with IfAbsent and IfVersion both set succeeded, want an error")
	}
	assertContent(t, b, "both", []byte("kept"), v)
	_, err = b.Put(t.Context(), "fresh", []byte("x"), backend.PutOptions{IfAbsent: true, IfVersion: v})
	if err == nil {
		t.Error("Put with IfAbsent and IfVersion both set on an absent key succeeded, want an error")
	}
	assertAbsent(t, b, "fresh")
}

func testDeleteIfVersion(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	requireConditional(t, b)
	v1 := mustPut(t, b, "del", []byte("one"), backend.PutOptions{}).Version
	v2 := mustPut(t, b, "del", []byte("two"), backend.PutOptions{}).Version

	err := b.Delete(t.Context(), "del", backend.DeleteOptions{IfVersion: v1})
	if !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Errorf("Delete IfVersion with a stale version = %v, want ErrPreconditionFailed", err)
	}
	assertContent(t, b, "del", []byte("two"), v2)

	if err := b.Delete(t.Context(), "del", backend.DeleteOptions{IfVersion: v2}); err != nil {
		t.Fatalf("Delete IfVersion with the current version: %v", err)
	}
	assertAbsent(t, b, "del")

	err = b.Delete(t.Context(), "del", backend.DeleteOptions{IfVersion: v2})
	if !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Errorf("Delete IfVersion of an absent key = %v, want ErrPreconditionFailed", err)
	}
	assertAbsent(t, b, "del")
}

// testDeleteIfVersionAbsentOK: with AbsentOK a missing key counts as
// deleted, but another version is still refused and left in place.
func testDeleteIfVersionAbsentOK(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	requireConditional(t, b)
	v1 := mustPut(t, b, "del", []byte("one"), backend.PutOptions{}).Version
	v2 := mustPut(t, b, "del", []byte("two"), backend.PutOptions{}).Version

	err := b.Delete(t.Context(), "del", backend.DeleteOptions{IfVersion: v1, AbsentOK: true})
	if !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Errorf("Delete IfVersion AbsentOK with a stale version = %v, want ErrPreconditionFailed", err)
	}
	assertContent(t, b, "del", []byte("two"), v2)

	if err := b.Delete(t.Context(), "del", backend.DeleteOptions{IfVersion: v2, AbsentOK: true}); err != nil {
		t.Fatalf("Delete IfVersion AbsentOK with the current version: %v", err)
	}
	assertAbsent(t, b, "del")

	if err := b.Delete(t.Context(), "del", backend.DeleteOptions{IfVersion: v2, AbsentOK: true}); err != nil {
		t.Errorf("Delete IfVersion AbsentOK of an absent key = %v, want nil", err)
	}
	assertAbsent(t, b, "del")
}

func testRaceIfAbsent(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	requireConditional(t, b)
	const racers, rounds = 16, 5
	for round := range rounds {
		key := fmt.Sprintf("race/%d", round)
		winners := raceWrites(t, racers, func(i int) (backend.Object, error) {
			return b.Put(t.Context(), key, fmt.Appendf(nil, "racer %d", i), backend.PutOptions{IfAbsent: true})
		})
		if len(winners) != 1 {
			t.Fatalf("round %d: %d racers won an if-absent put, want exactly one", round, len(winners))
		}
		for i, obj := range winners {
			assertContent(t, b, key, fmt.Appendf(nil, "racer %d", i), obj.Version)
		}
	}
}

func testRaceIfVersion(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	requireConditional(t, b)
	const racers, rounds = 16, 5
	v := mustPut(t, b, "counter", []byte("start"), backend.PutOptions{}).Version
	for round := range rounds {
		from := v
		winners := raceWrites(t, racers, func(i int) (backend.Object, error) {
			return b.Put(t.Context(), "counter", fmt.Appendf(nil, "round %d racer %d", round, i), backend.PutOptions{IfVersion: from})
		})
		if len(winners) != 1 {
			t.Fatalf("round %d: %d racers won a put if version %q, want exactly one", round, len(winners), from)
		}
		for i, obj := range winners {
			assertContent(t, b, "counter", fmt.Appendf(nil, "round %d racer %d", round, i), obj.Version)
			v = obj.Version
		}
	}
}

// raceWrites starts n goroutines that call write at once and returns the
// winners by racer index. Losers must fail with ErrPreconditionFailed.
func raceWrites(t *testing.T, n int, write func(i int) (backend.Object, error)) map[int]backend.Object {
	t.Helper()
	var (
		mu      sync.Mutex
		winners = map[int]backend.Object{}
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			obj, err := write(i)
			switch {
			case err == nil:
				mu.Lock()
				winners[i] = obj
				mu.Unlock()
			case !errors.Is(err, backend.ErrPreconditionFailed):
				t.Errorf("racer %d: %v, want success or ErrPreconditionFailed", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	return winners
}

// ---- capability honesty ----

func testCapabilityHonesty(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	if b.Capabilities().ConditionalWrites {
		t.Skip("backend reports conditional writes; the Conditional_ cases check that it enforces them")
	}
	ctx := t.Context()
	_, err := b.Put(ctx, "absent", []byte("x"), backend.PutOptions{IfAbsent: true})
	if !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("Put IfAbsent without conditional writes = %v, want ErrUnsupported", err)
	}
	assertAbsent(t, b, "absent")

	v := mustPut(t, b, "present", []byte("kept"), backend.PutOptions{}).Version
	_, err = b.Put(ctx, "present", []byte("overwritten"), backend.PutOptions{IfVersion: v})
	if !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("Put IfVersion without conditional writes = %v, want ErrUnsupported", err)
	}
	_, err = b.Put(ctx, "present", []byte("overwritten"), backend.PutOptions{IfAbsent: true})
	if !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("Put IfAbsent over an existing object without conditional writes = %v, want ErrUnsupported", err)
	}
	err = b.Delete(ctx, "present", backend.DeleteOptions{IfVersion: v})
	if !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("Delete IfVersion without conditional writes = %v, want ErrUnsupported", err)
	}
	assertContent(t, b, "present", []byte("kept"), v)
	assertKeys(t, b, "", []string{"present"})
}

// ---- context ----

func testContextCancelled(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	v := mustPut(t, b, "kept", []byte("original"), backend.PutOptions{}).Version
	ctx := cancelledContext(t)

	if _, err := b.Put(ctx, "new", []byte("x"), backend.PutOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a cancelled context = %v, want context.Canceled", err)
	}
	if _, err := b.Put(ctx, "kept", []byte("changed"), backend.PutOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Put over an object with a cancelled context = %v, want context.Canceled", err)
	}
	if b.Capabilities().ConditionalWrites {
		if _, err := b.Put(ctx, "kept", []byte("changed"), backend.PutOptions{IfVersion: v}); !errors.Is(err, context.Canceled) {
			t.Errorf("Put IfVersion with a cancelled context = %v, want context.Canceled", err)
		}
	}
	if rc, _, err := b.Get(ctx, "kept"); !errors.Is(err, context.Canceled) {
		if err == nil {
			rc.Close()
		}
		t.Errorf("Get with a cancelled context = %v, want context.Canceled", err)
	}
	if err := b.Delete(ctx, "kept", backend.DeleteOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Delete with a cancelled context = %v, want context.Canceled", err)
	}
	called := false
	if err := b.List(ctx, "", func(backend.Object) error { called = true; return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("List with a cancelled context = %v, want context.Canceled", err)
	}
	if called {
		t.Error("List with a cancelled context called its callback")
	}
	if _, err := b.Now(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Now with a cancelled context = %v, want context.Canceled", err)
	}
	assertAbsent(t, b, "new")
	assertContent(t, b, "kept", []byte("original"), v)
	assertKeys(t, b, "", []string{"kept"})
}

func testContextDeadline(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := b.Put(ctx, "late", []byte("x"), backend.PutOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Put past its deadline = %v, want context.DeadlineExceeded", err)
	}
	assertAbsent(t, b, "late")
}

// ---- atomicity ----

func testNoTornReads(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	const size = 1 << 20
	versions := [][]byte{bytes.Repeat([]byte{'A'}, size), bytes.Repeat([]byte{'B'}, size)}
	mustPut(t, b, "flip", versions[0], backend.PutOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)
	for r := range 3 {
		wg.Go(func() {
			for ctx.Err() == nil {
				rc, _, err := b.Get(ctx, "flip")
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("reader %d: Get: %v", r, err)
					}
					return
				}
				data, err := io.ReadAll(rc)
				rc.Close()
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("reader %d: read: %v", r, err)
					}
					return
				}
				if !bytes.Equal(data, versions[0]) && !bytes.Equal(data, versions[1]) {
					t.Errorf("reader %d saw a torn object: %d bytes starting %s", r, len(data), preview(data))
					return
				}
			}
		})
	}
	for i := range 20 {
		mustPut(t, b, "flip", versions[(i+1)%2], backend.PutOptions{})
	}
	cancel()
	wg.Wait()
}

// ---- clock ----

func testNowCloseToRealTime(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	before := time.Now()
	now, err := b.Now(t.Context())
	after := time.Now()
	if err != nil {
		t.Fatalf("Now: %v", err)
	}
	skew := h.MaxClockSkew
	if now.Before(before.Add(-skew)) || now.After(after.Add(skew)) {
		t.Errorf("Now() = %v, local clock between %v and %v (allowed skew %v)", now, before, after, skew)
	}
	obj := mustPut(t, b, "clock", []byte("x"), backend.PutOptions{})
	_, got := mustGet(t, b, "clock")
	for op, mt := range map[string]time.Time{"Put": obj.ModTime, "Get": got.ModTime} {
		if mt.Before(before.Add(-skew)) || mt.After(time.Now().Add(skew)) {
			t.Errorf("%s returned ModTime %v, not close to the local clock (allowed skew %v)", op, mt, skew)
		}
	}
}

// testObjectNow checks Object.Now on Put, Get and List: the storage's clock
// when it answered, so between Backend.Now readings taken before and after
// the request (give or take the clock's resolution), and never before the
// object's own ModTime.
func testObjectNow(t *testing.T, h Harness) {
	b := h.NewBackend(t)
	ctx := t.Context()
	storageNow := func() time.Time {
		t.Helper()
		now, err := b.Now(ctx)
		if err != nil {
			t.Fatalf("Now: %v", err)
		}
		return now
	}
	check := func(op string, o backend.Object, before, after time.Time) {
		t.Helper()
		if h.ObjectNowUnknown {
			if !o.Now.IsZero() {
				t.Errorf("%s returned Object.Now %v, but the harness declares ObjectNowUnknown", op, o.Now)
			}
			return
		}
		switch {
		case o.Now.IsZero():
			t.Errorf("%s returned a zero Object.Now", op)
		case o.Now.Before(before.Add(-clockResolution)) || o.Now.After(after.Add(clockResolution)):
			t.Errorf("%s returned Object.Now %v, outside the storage clock's %v … %v (resolution %v)", op, o.Now, before, after, clockResolution)
		case o.Now.Before(o.ModTime.Add(-clockResolution)):
			t.Errorf("%s returned Object.Now %v, before the object's ModTime %v", op, o.Now, o.ModTime)
		}
	}
	before := storageNow()
	obj := mustPut(t, b, "now/a", []byte("a"), backend.PutOptions{})
	after := storageNow()
	check("Put", obj, before, after)

	before = storageNow()
	_, got := mustGet(t, b, "now/a")
	after = storageNow()
	check("Get", got, before, after)

	mustPut(t, b, "now/b", []byte("b"), backend.PutOptions{})
	before = storageNow()
	objs := listAll(t, b, "now/")
	after = storageNow()
	if len(objs) != 2 {
		t.Fatalf("List(\"now/\") returned %d objects, want 2", len(objs))
	}
	for _, o := range objs {
		check(fmt.Sprintf("List (%q)", o.Key), o, before, after)
	}
}
