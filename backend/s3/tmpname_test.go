package s3_test

import (
	"sync"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/testutil/versitygw"
)

// versitygw's posix backend overwrites an object by linking the new data
// at ".<name>.sgwtmp.<nanoseconds>" and renaming it over the old: a
// listing made in between shows that name. A store that lists
// .cairn-state/ while another process overwrites its probe object took
// the temporary name for a foreign object and refused as "manifest
// missing" (TestInit_EightRacingProcesses_OneStore, under load). List
// never shows such a name.
func TestList_Versitygw_OverwriteInFlight_ListsNoTemporaryName(t *testing.T) {
	srv := versitygw.Start(t)
	b := newBackend(t, srv, srv.NewBucket(t), s3.ConditionalAuto)
	ctx := t.Context()
	keys := []string{"d/a", "d/b", "d/c", "d/e"}
	for _, k := range keys {
		if _, err := b.Put(ctx, k, []byte("0"), backend.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 150 {
				if _, err := b.Put(ctx, k, []byte{byte(i)}, backend.PutOptions{}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	lists := 0
	for {
		select {
		case <-done:
			t.Logf("%d listings during %d overwrites: only the objects' own names", lists, 150*len(keys))
			return
		default:
		}
		lists++
		err := b.List(ctx, "d/", func(o backend.Object) error {
			switch o.Key {
			case "d/a", "d/b", "d/c", "d/e":
			default:
				t.Errorf("listing %d shows %q, not an object anyone wrote", lists, o.Key)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestIsServerTempName(t *testing.T) {
	for key, want := range map[string]bool{
		"d/.a.sgwtmp.1796197641172775744":           true,
		".cairn-state/..probe-x.sgwtmp.17961976411": true,
		".cairn-state/..store.sgwtmp.1":             true,
		"d/a":                                       false,
		"d/.a.sgwtmp.":                              false,
		"d/.a.sgwtmp.12x":                           false,
		"d/a.sgwtmp.123":                            false, // not hidden
		"d/..sgwtmp.123":                            false, // no name before it
		".sgwtmp/multipart/x":                       false,
		"d/.a.sgwtmp.123/b":                         false, // a folder of that name holds b
		"app/.config.sgwtmp.backup":                 false,
	} {
		if got := s3.IsServerTempName(key); got != want {
			t.Errorf("IsServerTempName(%q) = %v, want %v", key, got, want)
		}
	}
}
