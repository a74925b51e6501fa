package main

// The store identity scenarios of issue #13, as real processes: the
// example app and the operator's cairn-state on one store.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storemeta"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

func TestStoreIdentity(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		t.Run("Rotation_OldKeyRefusedExitFive_ValueIntact_EpochKeepsGrowing", func(t *testing.T) { testRotation(t, tg) })
		t.Run("UnrelatedKey_RefusedExitFive_LiveInstanceNoticesNothing", func(t *testing.T) { testUnrelatedKey(t, tg) })
		t.Run("ObjectCopiedFromAnotherStore_Rejected", func(t *testing.T) { testCopiedObject(t, tg) })
		t.Run("GarbageManifest_ClearErrorNamingIt_NothingTouched", func(t *testing.T) { testGarbageManifest(t, tg) })
	})
}

// newKey writes a fresh identity file.
func newKey(t *testing.T) string {
	t.Helper()
	p, _ := testkit.IdentityFile(t)
	return p
}

type cliResult struct {
	code           int
	stdout, stderr string
}

// cairnState runs the operator's CLI on the world's store.
func (w *world) cairnState(t *testing.T, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.Env = append(append(cleanEnv(), w.tg.env...), "CAIRN_STATE_URL="+w.url)
	cmd.Dir = t.TempDir()
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r cliResult) must(t *testing.T, code int) cliResult {
	t.Helper()
	if r.code != code {
		t.Fatalf("cairn-state exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// snapshot lists the store's objects with their versions, but for the
// lock's own (a live holder's heartbeat rewrites them).
func (w *world) snapshot(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := w.raw.List(context.Background(), "", func(o backend.Object) error {
		if !strings.Contains(o.Key, store.Prefix+".lock") {
			out[o.Key] = o.Version
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func testRotation(t *testing.T, tg target) {
	w := newWorld(t, tg)
	oldKey, newKeyFile := w.identity, newKey(t)
	a := w.start(t, "", "app", nil)
	epoch1, _ := ready(t, a, "app")
	shutdown(t, a)
	w.cairnState(t, "hunter2", "put", "app/db-password", "--identity", oldKey).must(t, 0)

	// The README's rotation.
	r := w.cairnState(t, "", "rekey", "--identity", newKeyFile, "--old-identity", oldKey).must(t, 0)
	// Generation 2 after the first boot recorded the migration log; the
	// rekey raises it.
	if !strings.Contains(r.stdout, "manifest generation 2 → 3") {
		t.Errorf("rekey does not say the generation moved:\n%s", r.stdout)
	}

	// A put with the old key still configured: refused, exit 5, nothing
	// written.
	before := w.snapshot(t)
	r = w.cairnState(t, "overwritten", "put", "app/db-password", "--identity", oldKey).must(t, 5)
	if !strings.Contains(r.stderr, "does not belong to this store") || !strings.Contains(r.stderr, "--old-identity") {
		t.Errorf("the old key's refusal does not say why and what to do:\n%s", r.stderr)
	}
	if after := w.snapshot(t); !maps.Equal(before, after) {
		t.Errorf("the refused put wrote: %v → %v", before, after)
	}
	if got := w.cairnState(t, "", "get", "app/db-password", "--identity", newKeyFile).must(t, 0).stdout; got != "hunter2" {
		t.Errorf("value after the refused put = %q, want intact", got)
	}

	// The app still on the old key: exit 5, touching nothing.
	old := w.start(t, "", "app", nil)
	if code := old.Wait(t, exitTimeout); code != 5 {
		t.Fatalf("the app on the old key exited %d, want 5\n%s", code, old.Stderr.String())
	}
	if !strings.Contains(old.Stderr.String(), "does not belong to this store") {
		t.Errorf("the app does not say its key does not belong:\n%s", old.Stderr.String())
	}
	if after := w.snapshot(t); !maps.Equal(before, after) {
		t.Errorf("the refused boot wrote: %v → %v", before, after)
	}

	// On the new key it boots, and the epoch keeps growing (rekey's own
	// acquisition counted too).
	w.identity = newKeyFile
	b := w.start(t, "", "app", nil)
	epoch2, boots := ready(t, b, "app")
	if epoch2 <= epoch1+1 || boots != 2 {
		t.Errorf("after the rotation: epoch %d → %d, boots %d; want the epoch past rekey's and boots=2", epoch1, epoch2, boots)
	}
	shutdown(t, b)
	t.Logf("epochs: %d before, %d after the rotation", epoch1, epoch2)
}

func testUnrelatedKey(t *testing.T, tg target) {
	w := newWorld(t, tg)
	live := w.start(t, "", "live", nil, "--heartbeat", "500ms", "--stale-after", "5s")
	ready(t, live, "live")
	before := w.snapshot(t)
	stranger := newKey(t)

	r := w.cairnState(t, "x", "put", "boots", "--identity", stranger).must(t, 5)
	if !strings.Contains(r.stderr, "does not belong to this store") {
		t.Errorf("put with an unrelated key:\n%s", r.stderr)
	}
	w.cairnState(t, "", "rekey", "--identity", stranger).must(t, 5)
	w.cairnState(t, "", "lock", "break", "--force", "--identity", stranger).must(t, 5)
	other := *w
	other.identity = stranger
	intruder := other.start(t, "", "intruder", nil)
	if code := intruder.Wait(t, exitTimeout); code != 5 {
		t.Fatalf("an instance with an unrelated key exited %d, want 5\n%s", code, intruder.Stderr.String())
	}
	if after := w.snapshot(t); !maps.Equal(before, after) {
		t.Errorf("the refused commands wrote: %v → %v", before, after)
	}
	// The live instance noticed nothing: a few heartbeats later it shuts
	// down cleanly, its lock its own.
	time.Sleep(1500 * time.Millisecond)
	shutdown(t, live)
	if saw := strings.ReplaceAll(live.Stderr.String(), `level=WARN msg="store: created a new store`, ""); strings.Contains(saw, "lost") || strings.Contains(saw, "level=WARN") {
		t.Errorf("the live instance saw something:\n%s", live.Stderr.String())
	}
	if v, _ := w.get(t, "boots"); v != "1" {
		t.Errorf("boots = %q, want 1", v)
	}
}

func testCopiedObject(t *testing.T, tg target) {
	prod, staging := newWorld(t, tg), newWorld(t, tg)
	staging.identity = prod.identity // the two stores share a key
	for _, w := range []*world{prod, staging} {
		p := w.start(t, "", "app", nil)
		ready(t, p, "app")
		shutdown(t, p)
	}
	staging.cairnState(t, "staging-admin", "put", "config/admins", "--identity", staging.identity).must(t, 0)
	prod.cairnState(t, "prod-admin", "put", "config/admins", "--identity", prod.identity).must(t, 0)

	// Copy staging's object over prod's, in the raw storage, without the
	// library: minio-go on S3, plain files on fs.
	copyRaw(t, tg, staging, prod, "config/admins")

	r := prod.cairnState(t, "", "get", "config/admins", "--identity", prod.identity).must(t, 1)
	if !strings.Contains(r.stderr, "belongs to another store") || !strings.Contains(r.stderr, "copied here from another store") {
		t.Errorf("get of a copied object does not say it belongs to another store:\n%s", r.stderr)
	}
	r = prod.cairnState(t, "", "verify", "--identity", prod.identity).must(t, 1)
	if !strings.Contains(r.stdout, "FAIL config/admins: another store") {
		t.Errorf("verify does not report the copy:\n%s", r.stdout)
	}
	_, _, err := prod.store(t).Get(context.Background(), "config/admins")
	var fe *envelope.ForeignStoreError
	if !errors.As(err, &fe) {
		t.Errorf("a library read of the copy: %v, want a ForeignStoreError", err)
	}
	// The app's own boot counter, copied from staging, stops its boot.
	copyRaw(t, tg, staging, prod, "boots")
	p := prod.start(t, "", "app", nil)
	if code := p.Wait(t, exitTimeout); code != 1 || !strings.Contains(p.Stderr.String(), "belongs to another store") {
		t.Errorf("boot with a copied boot counter: exit %d\n%s", code, p.Stderr.String())
	}
}

// copyRaw copies a state object's stored bytes from one world's store to
// another's, bypassing the library.
func copyRaw(t *testing.T, tg target, from, to *world, name string) {
	t.Helper()
	ctx := context.Background()
	if tg.srv == nil {
		src := fsPath(t, from, name)
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fsPath(t, to, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	mc := tg.srv.Minio(t)
	fromBucket, fromKey := bucketKey(t, from, name)
	toBucket, toKey := bucketKey(t, to, name)
	obj, err := mc.GetObject(ctx, fromBucket, fromKey, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(obj)
	obj.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mc.PutObject(ctx, toBucket, toKey, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

// fsPath is where the fs backend keeps a state object of a world: folders
// end in a backslash (docs/adr/0002).
func fsPath(t *testing.T, w *world, name string) string {
	t.Helper()
	dir := strings.TrimPrefix(w.url, "file://")
	parts := strings.Split(store.Prefix+name, "/")
	for i := range parts[:len(parts)-1] {
		parts[i] += `\`
	}
	return filepath.Join(append([]string{dir}, parts...)...)
}

func bucketKey(t *testing.T, w *world, name string) (string, string) {
	t.Helper()
	u, err := url.Parse(w.url)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host, w.root + "/" + store.Prefix + name
}

func testGarbageManifest(t *testing.T, tg target) {
	w := newWorld(t, tg)
	p := w.start(t, "", "app", nil)
	ready(t, p, "app")
	shutdown(t, p)
	key := store.Prefix + storemeta.ManifestName
	if w.root != "" {
		key = w.root + "/" + key
	}
	if _, err := w.raw.Put(context.Background(), key, []byte("garbage, not a manifest"), backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	before := w.snapshot(t)
	again := w.start(t, "", "app", nil)
	if code := again.Wait(t, exitTimeout); code != 1 {
		t.Fatalf("boot with a garbage manifest exited %d, want 1\n%s", code, again.Stderr.String())
	}
	if msg := again.Stderr.String(); !strings.Contains(msg, key) || !strings.Contains(msg, "damaged") || !strings.Contains(msg, "neither re-created nor overwritten") {
		t.Errorf("the boot's error does not name the manifest:\n%s", msg)
	}
	r := w.cairnState(t, "v", "put", "x", "--identity", w.identity).must(t, 1)
	if !strings.Contains(r.stderr, key) {
		t.Errorf("put with a garbage manifest:\n%s", r.stderr)
	}
	if after := w.snapshot(t); !maps.Equal(before, after) {
		t.Errorf("a garbage manifest was re-created or taken over: %v → %v", before, after)
	}
}
