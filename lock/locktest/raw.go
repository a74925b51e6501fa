package locktest

import (
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/lock"
)

func jsonRecord(r lock.Record) ([]byte, error) { return json.Marshal(r) }

func readRaw(t *testing.T, b backend.Backend, key string) []byte {
	t.Helper()
	rc, _, err := b.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("raw get %q: %v", key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
