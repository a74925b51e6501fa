package state_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"

	state "github.com/cairnhq/state"
	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/migrate"
	"github.com/cairnhq/state/store"
	"github.com/cairnhq/state/testutil"
	"github.com/cairnhq/state/testutil/garage"
	"github.com/cairnhq/state/testutil/versitygw"
)

func TestOpen_S3URLWithRoot_Versitygw_KeepsEverythingUnderTheRootWithCAS(t *testing.T) {
	srv := versitygw.Start(t)
	testS3Boot(t, &srv.S3Server, "compare-and-swap")
}

func TestOpen_S3URLWithRoot_Garage_KeepsEverythingUnderTheRootAdvisory(t *testing.T) {
	srv := garage.Start(t)
	testS3Boot(t, &srv.S3Server, "advisory")
}

// testS3Boot boots through an s3:// URL with a root prefix, credentials from
// the environment as in production, and checks where the objects landed
// and which lock mode the probe chose.
func testS3Boot(t *testing.T, srv *testutil.S3Server, wantMode lock.Mode) {
	bucket := srv.NewBucket(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	_, id := identityFile(t)
	ctx := context.Background()
	inst := openT(t, state.Config{
		URL:        srv.URL(bucket, "apps/one"),
		Identities: []age.Identity{id},
		InstanceID: "pod-a",
		Migrations: []migrate.Migration{{ID: "0001", Up: func(ctx context.Context, st *store.Store) error {
			_, err := st.Put(ctx, "hello", []byte("world"), store.PutOptions{})
			return err
		}}},
	})
	if mode := inst.Lock().Record().Mode; mode != wantMode {
		t.Errorf("lock mode on %s = %q, want %q", srv.Name, mode, wantMode)
	}

	var keys []string
	if err := srv.Backend(t, bucket).List(ctx, "", func(o backend.Object) error {
		keys = append(keys, o.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"apps/one/.cairn-state/.lock", "apps/one/.cairn-state/.migrations", "apps/one/.cairn-state/hello"} {
		if !slices.Contains(keys, want) {
			t.Errorf("bucket lacks %s; has %q", want, keys)
		}
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "apps/one/.cairn-state/") {
			t.Errorf("object outside the root's reserved prefix: %s", k)
		}
	}
}
