package store_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/cairnhq/state/backend/fs"
	"github.com/cairnhq/state/internal/fault"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
)

// helperEnv names the role a child process of this test binary plays
// (TestMain runs it instead of the tests).
const helperEnv = "CAIRN_STORE_TEST_HELPER"

// runHelper plays role and returns the process's exit code.
func runHelper(role string) int {
	if err := helper(role); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

func helper(role string) error {
	if role != "write-then-hang" {
		return fmt.Errorf("unknown role %q", role)
	}
	// Write app/k twice as instance pod-a, epoch 1, on the fs store at
	// FS_DIR; the second write's keep hangs. Say which version was
	// written, then wait to be killed.
	ctx := context.Background()
	b, err := fs.New(os.Getenv("FS_DIR"), fs.Options{})
	if err != nil {
		return err
	}
	id, err := age.ParseX25519Identity(os.Getenv("IDENTITY"))
	if err != nil {
		return err
	}
	f := fault.New(b)
	st, err := store.Connect(ctx, f, keysOf(id), store.ConnectOptions{Options: store.Options{Logger: quiet()}})
	if err != nil {
		return err
	}
	v := storeadmin.WithFence(st, &holderFence{switchFence: switchFence{epoch: 1}, instance: "pod-a"})
	if _, err := v.Put(ctx, "app/k", []byte("one"), store.PutOptions{}); err != nil {
		return err
	}
	if err := storeadmin.WaitKeeps(ctx, v); err != nil {
		return err
	}
	f.SetHook(func(ctx context.Context, c fault.Call) error {
		if isKeep(c) {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	info, err := v.Put(ctx, "app/k", []byte("two"), store.PutOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("written %s\n", info.ID)
	select {}
}

// ADR 0065: a process killed after a write was answered and before its
// keep (which goes on behind the write) landed leaves a current version
// that history does not hold; the next holder's first write of the name
// keeps it first, so that every acknowledged version is still there,
// named after its writer, with no put-back reported.
func TestKeepBehind_SIGKILLBetweenWriteAndKeep_NextHolderKeepsIt(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	id := testkit.Identity(t)
	b, err := fs.New(dir, fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.(io.Closer).Close() })
	if _, err := store.Connect(ctx, b, keysOf(id), store.ConnectOptions{Create: true, Options: store.Options{Logger: quiet()}}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=write-then-hang", "FS_DIR="+dir, "IDENTITY="+id.String())
	child := testkit.StartProc(t, cmd)
	line := child.WaitStdout(t, "", time.Minute)
	written, ok := strings.CutPrefix(strings.TrimSpace(line), "written ")
	if !ok {
		t.Fatalf("the child said %q", line)
	}
	child.Signal(t, syscall.SIGKILL)
	if code := child.Wait(t, time.Minute); code != -1 {
		t.Fatalf("the child exited on its own (exit %d)", code)
	}
	entry := filepath.Join(dir, `.cairn-state\`, `.history\`, `app\`, `k\`, written)
	if _, err := os.Stat(filepath.Join(filepath.Dir(entry), "1.1")); err != nil {
		t.Fatalf("the first write's keep is not where this test looks: %v", err)
	}
	if _, err := os.Stat(entry); !os.IsNotExist(err) {
		t.Fatalf("the killed write's keep landed (stat %s: %v): the crash came too late to test anything", entry, err)
	}

	next := historyStore(t, b, keysOf(id), 2, "pod-b", 0)
	if data, _, err := next.Get(ctx, "app/k"); err != nil || string(data) != "two" {
		t.Fatalf("Get after the crash = %q, %v; want the killed process's acknowledged write", data, err)
	}
	three := mustPut(t, next, "app/k", "three")
	want := []string{three.ID.String() + " pod-b", written + " pod-a", "1.1 pod-a"}
	if got := versionWriters(t, next, "app/k"); !slices.Equal(got, want) {
		t.Fatalf("History after the next holder's write = %q, want %q", got, want)
	}
	wid, err := store.ParseVersionID(written)
	if err != nil {
		t.Fatal(err)
	}
	if data, info, err := next.GetVersion(ctx, "app/k", wid); err != nil || string(data) != "two" || info.ID != wid {
		t.Errorf("GetVersion(%s) = %q, %v", written, data, err)
	}
	verifyClean(t, next)
}
