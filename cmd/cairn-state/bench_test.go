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
