package main

import (
	"bytes"
	"context"
	"crypto/sha256"
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

	"github.com/cairnhq/state/backend"
)

// largeValue is the size of the memory figure of issue #20: a value of
// 48 MiB through put and get.
const largeValue = 48 << 20

// rssEnv makes the test binary a launcher instead of running tests (see
// init): it runs its arguments as a command, with its own stdin, stdout
// and stderr, writes the command's peak RSS in bytes to the file this
// names and exits with the command's code. The launcher is a small fresh
// process: Linux counts in a child's Maxrss the memory of the process it
// was forked from (os/exec forks with the parent's address space), so a
// child of the test process itself would report the test's own peak.
const rssEnv = "CAIRN_STATE_CLI_TEST_RSS_TO"

func init() {
	out := os.Getenv(rssEnv)
	if out == "" {
		return
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, rssEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
	if err := os.WriteFile(out, []byte(strconv.FormatInt(rss, 10)), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(cmd.ProcessState.ExitCode())
}

// peakRSS runs the built binary as a process, through the launcher (see
// rssEnv), with stdin from the file in (none when empty) and stdout to
// the file out (discarded when empty), and returns its exit code and its
// peak resident set size (rusage Maxrss: its VmHWM), in bytes.
func (tg *target) peakRSS(t *testing.T, in, out string, args ...string) (int, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "rss")
	cmd := exec.CommandContext(ctx, self, append([]string{binPath}, args...)...)
	cmd.Env = tg.environ(rssEnv + "=" + report)
	cmd.Dir = tg.dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if in != "" {
		f, err := os.Open(in)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.Stdin = f
	}
	if out != "" {
		f, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.Stdout = f
	}
	start := time.Now()
	err = cmd.Run()
	t.Logf("cairn-state %s: %v", strings.Join(args[2:], " "), time.Since(start).Round(time.Millisecond))
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("cairn-state %v: %v", args, err)
	}
	if code != exitOK {
		t.Logf("cairn-state %v: exit %d\n%s", args, code, stderr.String())
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("the launcher reported no RSS: %v\n%s", err, stderr.String())
	}
	rss, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return code, rss
}

// The CLI streams a large value: put (from a file and from stdin) and get
// (to stdout) of 48 MiB each peak at no more than 1.5× the value in
// resident memory, on a directory, versitygw and Garage; what get writes
// is what put read. Run against another build with
// CAIRN_STATE_CLI_TEST_BINARY to measure it (a build without init creates
// the store with its first put).
func TestPutGet_LargeValue_PeakRSSAtMostOneAndAHalfTimesTheValue(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		if r := tg.cli(t, nil, "init", "--identity", id); r.code != exitOK {
			if os.Getenv(otherBinaryEnv) == "" {
				t.Fatalf("init: %s", r)
			}
			t.Logf("init failed (%d): an older build, whose put creates the store", r.code)
		}
		in := filepath.Join(tg.dir, "value.bin")
		want := writeRandomFile(t, in, largeValue)
		limit := int64(largeValue) * 3 / 2
		check := func(what string, code int, rss int64) {
			t.Helper()
			t.Logf("%s %s of %d MiB: peak RSS %.1f MiB (%.2f× the value)", tg.name, what, largeValue>>20, float64(rss)/(1<<20), float64(rss)/largeValue)
			if code != exitOK {
				t.Fatalf("%s exited %d", what, code)
			}
			if rss > limit {
				t.Errorf("%s peaked at %d bytes resident, more than 1.5× the %d-byte value (%d)", what, rss, largeValue, limit)
			}
		}
		code, rss := tg.peakRSS(t, in, "", "--identity", id, "--timeout", "5m", "put", "big/stdin")
		check("put from stdin", code, rss)
		code, rss = tg.peakRSS(t, "", "", "--identity", id, "--timeout", "5m", "put", "big/file", in)
		check("put from a file", code, rss)
		for _, name := range []string{"big/stdin", "big/file"} {
			out := filepath.Join(tg.dir, "out.bin")
			code, rss = tg.peakRSS(t, "", out, "--identity", id, "--timeout", "5m", "get", name)
			check("get "+name+" to stdout", code, rss)
			if got := hashFile(t, out); got != want {
				t.Errorf("get %s wrote bytes that are not the value put", name)
			}
		}
	})
}

// writeRandomFile writes n random bytes to path and returns their SHA-256.
func writeRandomFile(t *testing.T, path string, n int64) [sha256.Size]byte {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(rand.NewChaCha8([32]byte{20}), n)); err != nil {
		t.Fatal(err)
	}
	return [sha256.Size]byte(h.Sum(nil))
}

func hashFile(t *testing.T, path string) [sha256.Size]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return [sha256.Size]byte(h.Sum(nil))
}

// get of an object whose late chunk was altered in storage: exit 1 naming
// the tampering, and what reached stdout is the authenticated chunks
// before it — a prefix of the value, never all of it.
func TestGet_TamperedChunk_ExitsNonZeroAfterOnlyAuthenticatedChunks(t *testing.T) {
	eachBackend(t, func(t *testing.T, tg *target) {
		id, _ := tg.keygen(t, "id.txt")
		tg.cli(t, nil, "init", "--identity", id).must(t, exitOK)
		value := make([]byte, 1<<20)
		rand.NewChaCha8([32]byte{7}).Read(value)
		tg.cli(t, value, "--identity", id, "put", "big").must(t, exitOK)
		ctx := t.Context()
		sealed := rawBytes(t, tg, "big")
		sealed[len(sealed)-300<<10] ^= 1
		if _, err := tg.raw.Put(ctx, tg.key("big"), sealed, backend.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		r := tg.cli(t, nil, "--identity", id, "get", "big").must(t, exitFail)
		if !strings.Contains(r.stderr, "tampered") {
			t.Errorf("get of a tampered object does not say so: %s", r.stderr)
		}
		if n := len(r.stdout); n >= len(value)-256<<10 || !bytes.Equal([]byte(r.stdout), value[:n]) {
			t.Errorf("get wrote %d bytes of the %d-byte value before failing, want only the chunks before the tampered one", n, len(value))
		}
	})
}
