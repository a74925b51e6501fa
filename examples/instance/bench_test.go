package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/cairnhq/state/testutil"
	"github.com/cairnhq/state/testutil/garage"
	"github.com/cairnhq/state/testutil/versitygw"
)

// BenchmarkBootToReady measures the example's boot: process start to its
// "ready:" line (open the store, take the lock, run the migrations, bump
// the boot counter), then a SIGTERM release outside the timing:
//
//	go test -run '^$' -bench BootToReady -benchtime 5x -count 7 ./examples/instance > boot.txt; benchstat -col /server boot.txt
func BenchmarkBootToReady(b *testing.B) {
	for _, s := range []struct {
		name  string
		start func(b *testing.B) *testutil.S3Server
	}{
		{"versitygw", func(b *testing.B) *testutil.S3Server { return &versitygw.Start(b).S3Server }},
		{"garage", func(b *testing.B) *testutil.S3Server { return &garage.Start(b).S3Server }},
	} {
		b.Run("server="+s.name, func(b *testing.B) {
			srv := s.start(b)
			url := srv.URL(srv.NewBucket(b), "apps/demo")
			id, err := age.GenerateX25519Identity()
			if err != nil {
				b.Fatal(err)
			}
			idFile := filepath.Join(b.TempDir(), "identity.txt")
			if err := os.WriteFile(idFile, []byte(id.String()+"\n"), 0o600); err != nil {
				b.Fatal(err)
			}
			env := append(cleanEnv(), srv.Env()...)
			b.ResetTimer()
			for b.Loop() {
				bootOnce(b, env, url, idFile)
			}
		})
	}
}

// bootOnce runs the example until ready (timed), then releases it (not
// timed).
func bootOnce(b *testing.B, env []string, url, idFile string) {
	cmd := exec.Command(binary, "--url", url, "--identity", idFile, "--instance-id", "bench")
	cmd.Env, cmd.Dir = env, b.TempDir()
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	readyAt := time.Time{}
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "ready:") {
			readyAt = time.Now()
			break
		}
	}
	b.StopTimer()
	if readyAt.IsZero() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b.Fatal("the example exited before it was ready")
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	for sc.Scan() {
	}
	if err := cmd.Wait(); cmd.ProcessState.ExitCode() != 143 {
		b.Fatalf("after SIGTERM: %v, want exit 143", err)
	}
	b.StartTimer()
}
