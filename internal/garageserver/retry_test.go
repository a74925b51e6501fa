package garageserver

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Bring-up commands answered "Could not reach quorum" (a cluster still
// coming up, or slow under load) are tried again until they succeed; one
// that was carried out although it failed is done when the retry finds it
// there; any other error is returned at once.
func TestRetryTransient(t *testing.T) {
	quorum := errors.New(`garage key import: exit status 1: Error: Internal error: Could not reach quorum of 2 (sets=[3]). 1 of 3 request succeeded, others returned errors: ["Timeout"]`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		name    string
		answers []error
		calls   int
		wantErr bool
	}{
		{"TransientThenOK", []error{quorum, quorum, nil}, 3, false},
		{"TransientThenAlreadyExists", []error{quorum, errors.New("Error: Key GK… already exists")}, 2, false},
		{"Permanent", []error{errors.New("Error: invalid key id")}, 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			cli := func(context.Context, ...string) ([]byte, error) {
				err := c.answers[min(calls, len(c.answers)-1)]
				calls++
				return nil, err
			}
			_, err := retryTransient(ctx, cli, "key", "import", "--yes", "-n", "x", "GKx", "secret")
			if (err != nil) != c.wantErr || calls != c.calls {
				t.Fatalf("err = %v after %d calls; want error %v after %d", err, calls, c.wantErr, c.calls)
			}
		})
	}
}
