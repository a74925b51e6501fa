// Command instance is a runnable application that embeds cairn-state's boot
// sequence the way a real one would: it opens the store, takes the instance
// lock, runs its migrations, increments a boot counter kept in state, prints
//
//	ready: instance=ID epoch=N boots=K
//
// and serves until SIGTERM or SIGINT, when it releases the lock, prints
// "shutdown complete" and exits 143 or 130, as cairn-state does.
//
// Usage:
//
//	go run ./examples/instance [--url URL] [--identity FILE] [--instance-id ID]
//	    [--store-id ID] [--heartbeat D] [--stale-after D] [--metrics-addr HOST:PORT]
//
// Without --url (or CAIRN_STATE_URL) the state lives in ./.cairn-demo/state;
// without --identity (or CAIRN_STATE_IDENTITY) a demo identity is created
// on first run in ./.cairn-demo/identity.txt (mode 0600). Keep that file:
// it is the only key to the state. CAIRN_STATE_RECIPIENTS adds recipients.
//
// With --metrics-addr it serves the store's and the lock's metrics in
// Prometheus's text format at http://HOST:PORT/metrics (docs/adr/0024),
// and says where on stderr ("instance: serving metrics on …"); without it,
// no metrics are recorded.
//
// Its migrations: 0001 imports the legacy on-disk state in
// ./.cairn-demo/legacy (if present) under "legacy/", never deleting it;
// 0002 seeds default settings.
//
// Exit codes, cairn-state's (cairn-state help): 143 (SIGTERM) or 130
// (SIGINT) after a graceful shutdown, the lock released — also when the
// signal comes during the boot; 1 on any other failure; 2 on a usage error;
// 3 when a live foreign instance holds the lock (the refusal, naming the
// holder, goes to stderr, with a hint that reads the situation when the
// holder uses this instance's own id); 4 when the lock is lost while serving
// (another instance took over after this one stopped heartbeating): it
// stops writing at once, names the new holder when known and leaves that
// holder's lock alone; 5 when its identity does not belong to the store
// (it cannot open .cairn-state/.store, e.g. a key retired by a rekey), or
// the store is not the one --store-id (or CAIRN_STATE_STORE_ID) pins: it
// says so, naming the store, and touches nothing — not even the lock; 6
// when a pinned store is not there at all (nothing is created).
//
// Its first run creates the store and logs its id at warning level, with
// how to pin it.
//
// The binary its tests build (go build -tags cairntest) can stop half-way
// through a migration so that a test can kill it there
// (testhooks_cairntest.go); the example as shipped has no such hook.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"filippo.io/age"

	state "github.com/cairnhq/state"
	"github.com/cairnhq/state/internal/lockadmin"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/migrate"
	"github.com/cairnhq/state/store"
)

// Exit codes, cairn-state's; a signal's is 128 + its number.
const (
	exitOK        = 0
	exitFailure   = 1
	exitUsage     = 2
	exitHeld      = 3
	exitLockLost  = 4
	exitNotMember = 5
	exitNoStore   = 6
)

const (
	demoDir      = ".cairn-demo"
	demoState    = "file:" + demoDir + "/state"
	demoIdentity = demoDir + "/identity.txt"
	legacyDir    = demoDir + "/legacy"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg := state.ConfigFromEnv()
	fl := flag.NewFlagSet("instance", flag.ContinueOnError)
	fl.SetOutput(stderr)
	url := fl.String("url", "", "backend URL (default $CAIRN_STATE_URL, else "+demoState+")")
	identity := fl.String("identity", "", "age identity file (default $CAIRN_STATE_IDENTITY, else "+demoIdentity+", created on first run)")
	fl.StringVar(&cfg.InstanceID, "instance-id", "", "instance id in the lock (default: host name)")
	fl.StringVar(&cfg.StoreID, "store-id", cfg.StoreID, "pin the store: refuse (exit 5) a store with another id, and create none (exit 6) (default $CAIRN_STATE_STORE_ID)")
	fl.DurationVar(&cfg.HeartbeatInterval, "heartbeat", 0, "lock heartbeat interval (default 60s)")
	fl.DurationVar(&cfg.StaleAfter, "stale-after", 0, "age after which a lock is stale and taken over (default 5m)")
	metricsAddr := fl.String("metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics, e.g. 127.0.0.1:9464 (default: none)")
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "instance: unexpected arguments %q\n", fl.Args())
		return exitUsage
	}

	logger := slog.New(slog.NewTextHandler(stderr, nil))
	cfg.Logger = logger
	if *url != "" {
		cfg.URL = *url
	}
	if cfg.URL == "" {
		cfg.URL = demoState
	}
	if *identity != "" {
		cfg.IdentityFiles = []string{*identity}
	}
	if len(cfg.IdentityFiles) == 0 {
		created, err := ensureDemoIdentity(demoIdentity)
		if err != nil {
			fmt.Fprintf(stderr, "instance: %v\n", err)
			return exitFailure
		}
		if created {
			fmt.Fprintf(stderr, "instance: created demo identity %s (keep it: it is the only key to the state)\n", demoIdentity)
		}
		cfg.IdentityFiles = []string{demoIdentity}
	}
	cfg.Migrations = migrations(stderr)
	if *metricsAddr != "" {
		ms, err := serveMetrics(*metricsAddr, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "instance: %v\n", err)
			return exitFailure
		}
		defer ms.stop()
		cfg.MeterProvider = ms.provider
	}

	// The first SIGTERM or SIGINT ends the boot or the serving; the ones
	// after it are caught and dropped until exit: `timeout`, shells and
	// init systems often deliver SIGTERM twice (to the process and to its
	// group), and dying on the second one would skip the release. Close
	// is bounded by its own timeout instead.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got atomic.Int32 // the signal received, 0 before
	go func() {
		select {
		case s := <-sigs:
			got.Store(int32(s.(syscall.Signal)))
			cancel()
		case <-ctx.Done():
		}
	}()
	signalled := func() int { return 128 + int(got.Load()) }

	inst, err := state.Open(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "instance: %v\n", err)
		var held *lock.HeldError
		switch {
		case got.Load() != 0:
			return signalled()
		case errors.Is(err, store.ErrNotMember), errors.Is(err, store.ErrWrongStore):
			return exitNotMember
		case errors.Is(err, store.ErrNoStore), errors.Is(err, state.ErrNoStore):
			return exitNoStore
		case errors.As(err, &held):
			if held.Duplicate {
				fmt.Fprintf(stderr, "instance: hint: %s\n", duplicateHint(held, cfg.InstanceID != ""))
			}
			return exitHeld
		}
		return exitFailure
	}

	// The application's work runs under a context that the lock's loss
	// and the shutdown signal both end: a write in flight at SIGTERM is
	// cancelled, and Close waits for it to return before it releases.
	work, stopWork := context.WithCancel(inst.Context())
	defer stopWork()
	defer context.AfterFunc(ctx, stopWork)()
	boots, err := countBoot(work, inst.Store())
	if err == nil {
		// Ready means the boot's writes are in storage, history included
		// (a keep lands behind its write: docs/adr/0065).
		err = storeadmin.WaitKeeps(work, inst.Store())
	}
	if err != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cerr := inst.Close(closeCtx)
		if got.Load() != 0 && cerr == nil {
			fmt.Fprintln(stdout, "shutdown complete")
			return signalled()
		}
		fmt.Fprintf(stderr, "instance: boot counter: %v\n", err)
		if cerr != nil {
			fmt.Fprintf(stderr, "instance: %v\n", cerr)
		}
		return exitFailure
	}
	rec := inst.Lock().Record()
	fmt.Fprintf(stdout, "ready: instance=%s epoch=%d boots=%d\n", rec.InstanceID, rec.Epoch, boots)

	select {
	case <-ctx.Done():
		closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := inst.Close(closeCtx); err != nil {
			fmt.Fprintf(stderr, "instance: %v\n", err)
			if errors.Is(err, lock.ErrLost) {
				return exitLockLost
			}
			return exitFailure
		}
		fmt.Fprintln(stdout, "shutdown complete")
		return signalled()
	case <-inst.Lost():
		return lockLost(inst, cfg.StaleAfter, stderr)
	}
}

// duplicateHint says what to do when the lock is held under this
// instance's own id, from where the holder runs and whether the id was
// chosen: a second copy on this host, or two machines sharing a host name.
func duplicateHint(held *lock.HeldError, idGiven bool) string {
	h := held.Holder
	host, _ := os.Hostname()
	switch {
	case h.Hostname == host && idGiven:
		return fmt.Sprintf("process %d on this host already runs with --instance-id %q: stop it first, or give this one another id", h.PID, h.InstanceID)
	case h.Hostname == host:
		return fmt.Sprintf("this instance already runs on this host (pid %d): stop it before starting it again", h.PID)
	case idGiven:
		return fmt.Sprintf("host %s runs an instance with the same --instance-id %q: give each machine its own", h.Hostname, h.InstanceID)
	}
	return fmt.Sprintf("host %s runs an instance with the same id %q: the id defaults to the host name, and the two machines share it (compose hostname:, cloned VMs, host networking); give each its own --instance-id (state.Config.InstanceID)", h.Hostname, h.InstanceID)
}

// lockLost reports a lost lock, naming the new holder when it can be read,
// and closes the instance without touching that holder's lock.
func lockLost(inst *state.Instance, staleAfter time.Duration, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lostErr := inst.Lock().Err()
	msg := fmt.Sprintf("instance: stopped serving and writing: %v", lostErr)
	var le *lock.LostError
	if !errors.As(lostErr, &le) || le.Holder == nil {
		// The heartbeat did not see who took over; look.
		if s, err := lockadmin.Inspect(ctx, inst.Store(), lockadmin.InspectOptions{StaleAfter: staleAfter}); err == nil && s.Present && s.Readable {
			msg += fmt.Sprintf("; now held by %q (pid %d on %s)", s.Record.InstanceID, s.Record.PID, s.Record.Hostname)
		}
	}
	fmt.Fprintln(stderr, msg)
	_ = inst.Close(ctx) // leaves the new holder's lock alone; the loss is already reported
	return exitLockLost
}

// migrations are the example application's migrations.
func migrations(stderr io.Writer) []migrate.Migration {
	// A demo may never have had legacy state: the import is optional.
	imp := migrate.ImportDirIfPresent(legacyDir, "legacy/")
	imp.ID = "0001-import-legacy-state"
	return []migrate.Migration{
		imp,
		{
			ID:          "0002-seed-settings",
			Description: "write default settings where none exist",
			Up: func(ctx context.Context, st *store.Store) error {
				defaults := []struct{ name, value string }{
					{"settings/greeting", "hello"},
					{"settings/theme", "dark"},
					{"settings/limits", `{"max_users":10}`},
				}
				for i, d := range defaults {
					if i == 1 && testPauseInMigration("0002-seed-settings") {
						fmt.Fprintln(stderr, "paused in migration 0002-seed-settings")
						<-ctx.Done()
						return ctx.Err()
					}
					// Idempotent: a value already there (from an interrupted
					// run, or set by the user) is kept.
					if _, err := st.Update(ctx, d.name, func(old []byte, exists bool) ([]byte, error) {
						if exists {
							return old, nil
						}
						return []byte(d.value), nil
					}); err != nil {
						return err
					}
				}
				return nil
			},
		},
	}
}

// countBoot increments the boot counter kept in state and returns it.
func countBoot(ctx context.Context, st *store.Store) (int, error) {
	var n int
	_, err := st.Update(ctx, "boots", func(old []byte, exists bool) ([]byte, error) {
		n = 0
		if exists {
			var err error
			if n, err = strconv.Atoi(string(old)); err != nil {
				return nil, fmt.Errorf("boot counter %q: %w", old, err)
			}
		}
		n++
		return []byte(strconv.Itoa(n)), nil
	})
	return n, err
}

// ensureDemoIdentity creates a new X25519 identity at path (0600, in a 0700
// folder) unless the file exists. It reports whether it created one.
func ensureDemoIdentity(path string) (bool, error) {
	if _, err := os.Stat(path); err == nil {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, fmt.Errorf("demo identity: %w", err)
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return false, fmt.Errorf("demo identity: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return false, nil // another process created it first
	}
	if err != nil {
		return false, fmt.Errorf("demo identity: %w", err)
	}
	_, err = fmt.Fprintf(f, "# created: %s\n# public key: %s\n%s\n",
		time.Now().UTC().Format(time.RFC3339), id.Recipient(), id)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return false, fmt.Errorf("demo identity: %w", err)
	}
	return true, nil
}
