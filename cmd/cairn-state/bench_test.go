package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/cairnhq/state/store"
	"github.com/cairnhq/state/testutil"
	"github.com/cairnhq/state/testutil/garage"
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
		tg := s3Target(b, "versitygw", &srv.S3Server)
		for _, kv := range srv.Env() { // the AWS chain reads the process environment
			k, v, _ := strings.Cut(kv, "=")
			b.Setenv(k, v)
		}
		benchRekey(b, tg, n)
	})
}

func benchRekey(b *testing.B, tg *target, n int) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(tg.dir, "id.txt")
	if err := os.WriteFile(path, []byte(id.String()+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	st := tg.store(b, path)
	val := []byte(strings.Repeat("v", 1000))
	for i := range n {
		if _, err := st.Put(context.Background(), fmt.Sprintf("obj/%04d", i), val, store.PutOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	env := map[string]string{"CAIRN_STATE_URL": tg.url, "CAIRN_STATE_IDENTITY": path}
	getenv := func(k string) string { return env[k] }
	streams := stdio{in: strings.NewReader(""), out: io.Discard, err: io.Discard}
	for b.Loop() {
		if code := run(context.Background(), []string{"rekey"}, streams, getenv); code != exitOK {
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
	for _, s := range []struct {
		name  string
		start func(b *testing.B) *testutil.S3Server
	}{
		{"versitygw", func(b *testing.B) *testutil.S3Server { return &versitygw.Start(b).S3Server }},
		{"garage", func(b *testing.B) *testutil.S3Server { return &garage.Start(b).S3Server }},
	} {
		b.Run("server="+s.name, func(b *testing.B) {
			srv := s.start(b)
			tg := s3Target(b, s.name, srv)
			for _, kv := range srv.Env() { // the AWS chain reads the process environment
				k, v, _ := strings.Cut(kv, "=")
				b.Setenv(k, v)
			}
			id, err := age.GenerateX25519Identity()
			if err != nil {
				b.Fatal(err)
			}
			path := filepath.Join(tg.dir, "id.txt")
			if err := os.WriteFile(path, []byte(id.String()+"\n"), 0o600); err != nil {
				b.Fatal(err)
			}
			value := filepath.Join(tg.dir, "value")
			if err := os.WriteFile(value, []byte(strings.Repeat("v", 1000)), 0o600); err != nil {
				b.Fatal(err)
			}
			env := map[string]string{"CAIRN_STATE_URL": tg.url, "CAIRN_STATE_IDENTITY": path}
			getenv := func(k string) string { return env[k] }
			streams := stdio{in: strings.NewReader(""), out: io.Discard, err: io.Discard}
			if code := run(context.Background(), []string{"init"}, streams, getenv); code != exitOK {
				b.Fatalf("init exited %d", code)
			}
			for b.Loop() {
				if code := run(context.Background(), []string{"put", "app/value", value}, streams, getenv); code != exitOK {
					b.Fatalf("put exited %d", code)
				}
			}
		})
	}
}
