package lock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/fs"
	"github.com/cairnhq/state/backend/s3"
	"github.com/cairnhq/state/internal/driver"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/store"
)

// The test binary re-executes itself as a lock holder ("child") when
// childEnv is set: it opens the store at childURL, takes the lock and
// reports on stdout, one line per event:
//
//	held epoch=N pid=P        the lock is held
//	refused: ERR              Acquire refused (exit 3)
//	released                  SIGTERM: released (exit 0)
//	lost: ERR | write: ERR    the lock was lost; a fenced write was refused (exit 4)
const (
	childEnv       = "CAIRN_LOCK_TEST_CHILD"
	childURL       = "CAIRN_LOCK_TEST_URL"
	childIdentity  = "CAIRN_LOCK_TEST_IDENTITY"
	childInstance  = "CAIRN_LOCK_TEST_INSTANCE"
	childHostname  = "CAIRN_LOCK_TEST_HOSTNAME" // set in a new UTS namespace: "another pod"
	childStale     = "CAIRN_LOCK_TEST_STALE_AFTER"
	childHeartbeat = "CAIRN_LOCK_TEST_HEARTBEAT"
	childWrite     = "CAIRN_LOCK_TEST_WRITE" // write "app" through the fenced store while holding
)

func childMain() int {
	if h := os.Getenv(childHostname); h != "" {
		if err := syscall.Sethostname([]byte(h)); err != nil {
			fmt.Printf("refused: sethostname: %v\n", err)
			return 1
		}
	}
	// SIGTERM is handled from the start, so a parent that signals right
	// after "held" never kills us before we release.
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)

	ctx := context.Background()
	st, err := openStore(ctx, os.Getenv(childURL), os.Getenv(childIdentity), slog.New(slog.NewTextHandler(os.Stderr, nil)), nil)
	if err != nil {
		fmt.Printf("refused: %v\n", err)
		return 1
	}
	stale, _ := time.ParseDuration(os.Getenv(childStale))
	hb, _ := time.ParseDuration(os.Getenv(childHeartbeat))
	l, err := lock.Acquire(ctx, st, lock.Options{
		InstanceID:        os.Getenv(childInstance),
		StaleAfter:        stale,
		HeartbeatInterval: hb,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		fmt.Printf("refused: %v\n", err)
		if errors.Is(err, lock.ErrHeld) {
			return 3
		}
		return 1
	}
	fmt.Printf("held epoch=%d pid=%d\n", l.Record().Epoch, os.Getpid())
	// With childWrite, write through the fenced store until told to stop,
	// counting what landed, what the fence refused, and (apart) what it
	// refused while suspended — a heartbeat late under load, not a loss.
	var writes, refused, paused int
	tick := make(<-chan time.Time)
	if os.Getenv(childWrite) != "" {
		t := time.NewTicker(max(hb/8, 10*time.Millisecond))
		defer t.Stop()
		tick = t.C
	}
	fenced := l.Fence(st)
	for {
		select {
		case <-tick:
			switch _, err := fenced.Put(ctx, "app", []byte(fmt.Sprint(writes)), store.PutOptions{}); {
			case errors.Is(err, lock.ErrSuspended),
				errors.Is(err, store.ErrFenced) && !errors.Is(err, lock.ErrLost):
				// Suspended, or cut off at the lease's end by a heartbeat
				// answered late and then confirmed: paused, not lost.
				paused++
			case err != nil:
				refused++
			default:
				writes++
			}
			continue
		case <-term:
			if err := l.Release(ctx); err != nil {
				fmt.Printf("release failed: %v\n", err)
				return 1
			}
			fmt.Printf("released writes=%d refused=%d paused=%d\n", writes, refused, paused)
			return 0
		case <-l.Lost():
			_, werr := fenced.Put(ctx, "app", []byte("written after loss"), store.PutOptions{})
			fmt.Printf("lost: %v | write: %v\n", l.Err(), werr)
			return 4
		}
	}
}

// openStore opens the store a URL names, as an application would: file:DIR
// or s3://BUCKET[/ROOT]?… with credentials from environ (KEY=VALUE
// entries: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), or from the
// environment when environ is nil.
func openStore(ctx context.Context, rawURL, identityFile string, log *slog.Logger, environ []string) (*store.Store, error) {
	ids, err := envelope.LoadIdentityFile(identityFile)
	if err != nil {
		return nil, err
	}
	env, err := envelope.New(ids, nil, envelope.Options{})
	if err != nil {
		return nil, err
	}
	var (
		b    backend.Backend
		root string
	)
	switch {
	case strings.HasPrefix(rawURL, "file:"):
		b, err = fs.New(strings.TrimPrefix(rawURL, "file:"), fs.Options{})
	case strings.HasPrefix(rawURL, "s3://"):
		var opts s3.Options
		opts, root, err = s3.ParseURL(rawURL)
		if err == nil {
			opts.Logger = log
			if environ != nil {
				vars := map[string]string{}
				for _, kv := range environ {
					k, v, _ := strings.Cut(kv, "=")
					vars[k] = v
				}
				opts.Credentials = credentials.NewStaticCredentialsProvider(vars["AWS_ACCESS_KEY_ID"], vars["AWS_SECRET_ACCESS_KEY"], "")
			}
			var sb backend.Backend
			if sb, err = s3.New(ctx, opts); err == nil {
				b = sb
				_, err = driver.ResolveCapabilities(ctx, sb)
			}
		}
	default:
		err = fmt.Errorf("unknown url %q", rawURL)
	}
	if err != nil {
		return nil, err
	}
	return storeadmin.Open(b, env, store.Options{Root: root, Logger: log})
}
