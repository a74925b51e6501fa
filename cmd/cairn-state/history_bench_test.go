package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// BenchmarkRekeyVerifyHistory is rekey and verify on a local directory of
// 1,000 objects of 1 KiB, each written 5 times under the lock: with
// history (the default: 1,000 objects and 5,000 kept versions) and
// without (1,000 objects). In-process (the CLI's run function), one pass
// per iteration; issue #21's "rekey and verify time on 1,000 objects with
// history":
//
//	go test -run '^$' -bench RekeyVerifyHistory -benchtime 3x -count 3 ./cmd/cairn-state
func BenchmarkRekeyVerifyHistory(b *testing.B) {
	const objects, writes = 1000, store.DefaultHistory
	for _, history := range []int{0, store.NoHistory} {
		tg := fsTarget(b)
		path, id := testkit.IdentityFile(b)
		ctx := context.Background()
		st, err := store.Connect(ctx, tg.raw, store.Keys{Identities: []age.Identity{id}}, store.ConnectOptions{Create: true, Options: store.Options{History: history}})
		if err != nil {
			b.Fatal(err)
		}
		l, err := lock.Acquire(ctx, st, lock.Options{InstanceID: "seed"})
		if err != nil {
			b.Fatal(err)
		}
		fenced := l.Fence(st)
		val := []byte(strings.Repeat("v", 1000))
		for i := range objects {
			for range writes {
				if _, err := fenced.Put(ctx, fmt.Sprintf("obj/%04d", i), val, store.PutOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		u, err := storeadmin.HistoryUsageOf(ctx, st)
		if err != nil {
			b.Fatal(err)
		}
		total := objects + u.Versions
		cli := inProcess(tg, path)
		name := "history=on"
		if history < 0 {
			name = "history=off"
		}
		for _, cmd := range []string{"rekey", "verify"} {
			b.Run(cmd+"/"+name, func(b *testing.B) {
				for b.Loop() {
					args := []string{cmd}
					if cmd == "rekey" {
						args = append(args, "--restart")
					}
					if code := cli(ctx, args...); code != exitOK {
						b.Fatalf("%s exited %d", cmd, code)
					}
				}
				b.ReportMetric(float64(total), "objects")
				b.ReportMetric(float64(total*b.N)/b.Elapsed().Seconds(), "objects/s")
			})
		}
	}
}
