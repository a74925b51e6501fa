package state_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"

	state "github.com/cairnhq/state"
	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/migrate"
	"github.com/cairnhq/state/store"
	"github.com/cairnhq/state/testutil"
	"github.com/cairnhq/state/testutil/garage"
	"github.com/cairnhq/state/testutil/versitygw"
)

func TestOpen_S3URLWithRoot_Versitygw_KeepsEverythingUnderTheRootWithCAS(t *testing.T) {
	srv := versitygw.Start(t)
	testS3Boot(t, &srv.S3Server, lock.ModeCAS)
}

func TestOpen_S3URLWithRoot_Garage_KeepsEverythingUnderTheRootWithClaims(t *testing.T) {
	srv := garage.Start(t)
	testS3Boot(t, &srv.S3Server, lock.ModeClaims)
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
	_, id := testkit.IdentityFile(t)
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
	// The holder's object and the epoch marker: in compare-and-swap mode
	// the first block's reservation (docs/adr/0066).
	holder, marker := "apps/one/.cairn-state/.lock", "apps/one/.cairn-state/.lock.d/epoch-00000000000000001000"
	if wantMode == lock.ModeClaims {
		holder = "apps/one/.cairn-state/.lock.d/claim-" + inst.Lock().Record().AcquisitionID + "-2-held"
		marker = "apps/one/.cairn-state/.lock.d/epoch-00000000000000000001"
	}
	for _, want := range []string{holder, marker, "apps/one/.cairn-state/.migrations", "apps/one/.cairn-state/hello"} {
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
