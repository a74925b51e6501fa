package main

import (
	"bufio"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/state/internal/testkit"
)

// BenchmarkBootToReady measures the example's boot: process start to its
// "ready:" line (open the store, take the lock, run the migrations, bump
// the boot counter), then a SIGTERM release outside the timing:
//
//	go test -run '^$' -bench BootToReady -benchtime 5x -count 7 ./examples/instance > boot.txt; benchstat -col /server boot.txt
func BenchmarkBootToReady(b *testing.B) {
	for _, s := range testkit.S3Servers {
		b.Run("server="+s.Name, func(b *testing.B) {
			srv := s.Start(b)
			url := srv.URL(srv.NewBucket(b), "apps/demo")
			idFile, _ := testkit.IdentityFile(b)
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
