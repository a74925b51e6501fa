package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/store"
	"github.com/cairnhq/state/testutil/versitygw"
)

// BenchmarkRekey re-seals a store of 200 objects of about 1 KiB per
// iteration, in-process (the CLI's run function), and reports objects per
// second. Each iteration holds the lock for the whole pass, like the CLI.
func BenchmarkRekey(b *testing.B) {
	const n = 200
	b.Run("fs", func(b *testing.B) { benchRekey(b, fsTarget(b), n) })
	b.Run("versitygw", func(b *testing.B) {
		srv := versitygw.Start(b)
		setenv(b, srv.Env())
		benchRekey(b, s3Target(b, "versitygw", &srv.S3Server), n)
	})
}

// setenv sets each NAME=VALUE of env for the rest of the benchmark: the
// AWS chain of the in-process CLI reads the process environment.
func setenv(b *testing.B, env []string) {
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		b.Setenv(k, v)
	}
}

// inProcess runs the CLI in this process (its run function) on the
// target's store with the identity file, output discarded, and returns
// its exit code.
func inProcess(tg *target, identity string) func(ctx context.Context, args ...string) int {
	env := map[string]string{"CAIRN_STATE_URL": tg.url, "CAIRN_STATE_IDENTITY": identity}
	streams := stdio{in: strings.NewReader(""), out: io.Discard, err: io.Discard}
	return func(ctx context.Context, args ...string) int {
		return run(ctx, args, streams, func(k string) string { return env[k] })
	}
}

func benchRekey(b *testing.B, tg *target, n int) {
	path, _ := testkit.IdentityFile(b)
	st := tg.store(b, path)
	val := []byte(strings.Repeat("v", 1000))
	for i := range n {
		if _, err := st.Put(context.Background(), fmt.Sprintf("obj/%04d", i), val, store.PutOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	cli := inProcess(tg, path)
	for b.Loop() {
		if code := cli(context.Background(), "rekey"); code != exitOK {
			b.Fatalf("rekey exited %d", code)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "objects/s")
}

// BenchmarkPut is one CLI write on an existing store, in-process (the
// CLI's run function): open the backend, read the manifest (its recorded
// lock mode: no probe), take the lock, seal and write one object, release. Compare
// the servers' medians with benchstat:
//
//	go test -run '^$' -bench 'BenchmarkPut' -benchtime 10x -count 7 ./cmd/cairn-state > put.txt; benchstat -col /server put.txt
func BenchmarkPut(b *testing.B) {
	for _, s := range testkit.S3Servers {
		b.Run("server="+s.Name, func(b *testing.B) {
			srv := s.Start(b)
			tg := s3Target(b, s.Name, srv)
			setenv(b, srv.Env())
			path, _ := testkit.IdentityFile(b)
			value := filepath.Join(tg.dir, "value")
			if err := os.WriteFile(value, []byte(strings.Repeat("v", 1000)), 0o600); err != nil {
				b.Fatal(err)
			}
			cli := inProcess(tg, path)
			if code := cli(context.Background(), "init"); code != exitOK {
				b.Fatalf("init exited %d", code)
			}
			for b.Loop() {
				if code := cli(context.Background(), "put", "app/value", value); code != exitOK {
					b.Fatalf("put exited %d", code)
				}
			}
		})
	}
}
