//go:build unix

package fs_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/fs"
)

// The crash and cross-process tests re-run this test binary as a child
// process; the environment variable names the child's role.
const helperEnv = "CAIRN_FS_TEST_HELPER"

func TestMain(m *testing.M) {
	if role := os.Getenv(helperEnv); role != "" {
		if err := runHelper(role); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func runHelper(role string) error {
	b, err := fs.New(os.Getenv("FS_DIR"), fs.Options{})
	if err != nil {
		return err
	}
	defer b.(io.Closer).Close()
	ctx := context.Background()
	switch role {
	case "put-loop":
		// Overwrite FS_KEY until killed with objects of FS_SIZE identical
		// bytes, 1s and 2s in turn.
		size, _ := strconv.Atoi(os.Getenv("FS_SIZE"))
		objects := [][]byte{bytes.Repeat([]byte{1}, size), bytes.Repeat([]byte{2}, size)}
		fmt.Println("ready")
		for i := 0; ; i++ {
			if _, err := b.Put(ctx, os.Getenv("FS_KEY"), objects[i%2], backend.PutOptions{}); err != nil {
				return err
			}
		}
	case "race-if-absent":
		// After "go" on stdin, try to create race/0 … race/N-1 if absent,
		// printing "R win" or "R lose" for each round R.
		rounds, _ := strconv.Atoi(os.Getenv("FS_ROUNDS"))
		id := os.Getenv("FS_ID")
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return err
		}
		out := bufio.NewWriter(os.Stdout)
		defer out.Flush()
		for r := range rounds {
			_, err := b.Put(ctx, fmt.Sprintf("race/%04d", r), []byte(id), backend.PutOptions{IfAbsent: true})
			switch {
			case err == nil:
				fmt.Fprintf(out, "%d win\n", r)
			case errors.Is(err, backend.ErrPreconditionFailed):
				fmt.Fprintf(out, "%d lose\n", r)
			default:
				return fmt.Errorf("round %d: %w", r, err)
			}
		}
		return nil
	case "read-only":
		// Try every kind of write in FS_DIR, which this process may read
		// but not write, and report each outcome as "OP PERMISSION ERROR".
		report := func(op string, err error) {
			fmt.Printf("%s %v %v\n", op, errors.Is(err, backend.ErrPermission), err)
		}
		rc, _, err := b.Get(ctx, "kept")
		if err == nil {
			rc.Close()
		}
		report("get", err)
		_, err = b.Put(ctx, "new", []byte("x"), backend.PutOptions{})
		report("put", err)
		_, err = b.Put(ctx, "kept", []byte("x"), backend.PutOptions{IfAbsent: true})
		report("put-if-absent", err)
		report("delete", b.Delete(ctx, "kept", backend.DeleteOptions{}))
		_, err = fs.New(filepath.Join(os.Getenv("FS_DIR"), "sub"), fs.Options{})
		report("new", err)
		return nil
	}
	return fmt.Errorf("unknown helper role %q", role)
}

func helper(t *testing.T, role string, env ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{helperEnv + "=" + role}, env...)...)
	cmd.Stderr = &testWriter{t: t, prefix: role + ": "}
	return cmd
}

// TestPut_ChildKilledMidWrite_LeavesOldOrNewObjectAndNoListedTemp kills a
// process that keeps overwriting one large object, at a random moment, many
// times. After each kill the object must be whole — one of the writes,
// never a mix — and List must show nothing but the object.
func TestPut_ChildKilledMidWrite_LeavesOldOrNewObjectAndNoListedTemp(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	const (
		rounds = 30
		size   = 8 << 20
		key    = "crash/object"
	)
	b, dir := newBackend(t, fs.Options{})
	put(t, b, key, bytes.Repeat([]byte{0}, size))
	killedMidWrite := 0
	for round := range rounds {
		cmd := helper(t, "put-loop", "FS_DIR="+dir, "FS_KEY="+key, "FS_SIZE="+strconv.Itoa(size))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || line != "ready\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: child did not start: %q, %v", round, line, err)
		}
		time.Sleep(time.Duration(rand.IntN(60)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: child ended with %v, want killed by SIGKILL", round, err)
		}

		data := get(t, b, key)
		if len(data) != size || bytes.Count(data, data[:1]) != size {
			t.Fatalf("round %d: object torn after SIGKILL: %d bytes, first byte %d, %d bytes equal to it",
				round, len(data), data[0], bytes.Count(data, data[:1]))
		}
		if keys := listKeys(t, b); len(keys) != 1 || keys[0] != key {
			t.Fatalf("round %d: List after SIGKILL = %q, want only %q", round, keys, key)
		}
		// (filepath.Glob would read the backslashes as escapes.)
		entries, err := os.ReadDir(filepath.Join(dir, `crash\`))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), `.tmp\`) {
				killedMidWrite++
				os.Remove(filepath.Join(dir, `crash\`, e.Name()))
			}
		}
	}
	t.Logf("%d of %d kills landed in the middle of a write (a temp file was left)", killedMidWrite, rounds)
	if killedMidWrite == 0 {
		t.Errorf("no kill landed in the middle of a write; the test did not exercise a torn write")
	}
}

// TestPutIfAbsent_TwoProcessesRacing_ExactlyOneWinsEachRound starts two
// processes that race to create the same keys, round after round.
func TestPutIfAbsent_TwoProcessesRacing_ExactlyOneWinsEachRound(t *testing.T) {
	const rounds = 300
	b, dir := newBackend(t, fs.Options{})
	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   bytes.Buffer
	}
	children := make([]*child, 2)
	for i := range children {
		c := &child{cmd: helper(t, "race-if-absent", "FS_DIR="+dir, "FS_ROUNDS="+strconv.Itoa(rounds), "FS_ID=p"+strconv.Itoa(i))}
		c.cmd.Stdout = &c.out
		var err error
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.cmd.Process.Kill(); c.cmd.Wait() })
		children[i] = c
	}
	for _, c := range children {
		io.WriteString(c.stdin, "go\n")
		c.stdin.Close()
	}
	results := make([][]string, 2)
	for i, c := range children {
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("child p%d: %v", i, err)
		}
		results[i] = strings.Split(strings.TrimSpace(c.out.String()), "\n")
		if len(results[i]) != rounds {
			t.Fatalf("child p%d reported %d rounds, want %d", i, len(results[i]), rounds)
		}
	}
	wins := [2]int{}
	for r := range rounds {
		var winners []int
		for i := range children {
			switch results[i][r] {
			case fmt.Sprintf("%d win", r):
				winners = append(winners, i)
				wins[i]++
			case fmt.Sprintf("%d lose", r):
			default:
				t.Fatalf("child p%d round %d: unexpected line %q", i, r, results[i][r])
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d processes won the if-absent put, want exactly one", r, len(winners))
		}
		if got := get(t, b, fmt.Sprintf("race/%04d", r)); string(got) != fmt.Sprintf("p%d", winners[0]) {
			t.Errorf("round %d: object holds %q, but p%d won", r, got, winners[0])
		}
	}
	t.Logf("wins: p0 %d, p1 %d of %d rounds", wins[0], wins[1], rounds)
}

type testWriter struct {
	t      *testing.T
	prefix string
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Log(w.prefix + strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
