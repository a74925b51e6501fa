package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cairnhq/state/backend/fs"
	"github.com/cairnhq/state/internal/envelope"
	"github.com/cairnhq/state/internal/migratelog"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/migrate"
	"github.com/cairnhq/state/store"
)

// The crash tests re-run this test binary as a helper process that runs
// migrations against a directory and SIGKILLs itself in the middle of a
// step: a real crash, not a simulated one.
const (
	helperDirEnv  = "MIGRATE_TEST_HELPER_DIR"
	helperModeEnv = "MIGRATE_TEST_HELPER_MODE" // "repeatable" or "non-repeatable"
	crashInstance = "crashy"
)

// helperMain runs the helper process when the test binary was started as
// one, and reports whether it did.
func helperMain() bool {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		return false
	}
	err := func() error {
		ctx := context.Background()
		st, err := openDirStore(dir)
		if err != nil {
			return err
		}
		l, err := lock.Acquire(ctx, st, lock.Options{InstanceID: crashInstance, Logger: quietLogger()})
		if err != nil {
			return err
		}
		_, err = migrate.Run(ctx, l, st, crashMigrations(true, os.Getenv(helperModeEnv) == "non-repeatable"), migrate.Options{Logger: quietLogger()})
		return fmt.Errorf("helper: Run returned instead of crashing: %v", err)
	}()
	fmt.Fprintln(os.Stderr, err)
	os.Exit(2)
	return true
}

// openDirStore opens a store over dir/state with the identity in
// dir/identity.txt.
func openDirStore(dir string) (*store.Store, error) {
	ids, err := envelope.LoadIdentityFile(filepath.Join(dir, "identity.txt"))
	if err != nil {
		return nil, err
	}
	env, err := envelope.New(ids, nil, envelope.Options{})
	if err != nil {
		return nil, err
	}
	b, err := fs.New(filepath.Join(dir, "state"), fs.Options{})
	if err != nil {
		return nil, err
	}
	return storeadmin.Open(b, env, store.Options{Logger: quietLogger()})
}

// crashMigrations writes "first", then in step 0002 "second/1", a crash
// point, and "second/2".
func crashMigrations(crash, nonRepeatable bool) []migrate.Migration {
	return []migrate.Migration{
		{ID: "0001-first", Up: func(ctx context.Context, st *store.Store) error {
			_, err := st.Put(ctx, "first", []byte("1"), store.PutOptions{})
			return err
		}},
		{ID: "0002-second", NonRepeatable: nonRepeatable, Up: func(ctx context.Context, st *store.Store) error {
			if _, err := st.Put(ctx, "second/1", []byte("1"), store.PutOptions{}); err != nil {
				return err
			}
			if crash {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
			_, err := st.Put(ctx, "second/2", []byte("2"), store.PutOptions{})
			return err
		}},
	}
}

// crashHelper prepares a directory with an identity and runs the helper
// until it kills itself in step 0002.
func crashHelper(t *testing.T, mode string) string {
	t.Helper()
	identity, _ := testkit.IdentityFile(t)
	dir := filepath.Dir(identity) // identity.txt, and the helper's store
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperDirEnv+"="+dir, helperModeEnv+"="+mode)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper did not die by SIGKILL: %v\n%s", err, out)
	}
	return dir
}

func TestRun_ProcessKilledMidStep_NextRunSaysSoAndRerunsTheStep(t *testing.T) {
	ctx := context.Background()
	dir := crashHelper(t, "repeatable")
	st, err := openDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	ms := crashMigrations(false, false)
	recs, err := migratelog.Applied(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].State != migratelog.StateApplied || recs[1].State != migratelog.StateStarted {
		t.Fatalf("after the crash: log %+v", recs)
	}

	// The restarted instance keeps its id and takes its own lock back at once.
	l := acquire(t, st, crashInstance)
	logs := &logBuffer{}
	res, err := migrate.Run(ctx, l, st, ms, migrate.Options{Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(res.Ran) != "[0002-second]" || fmt.Sprint(res.Rerun) != "[0002-second]" || res.AlreadyApplied != 1 {
		t.Fatalf("result = %+v", res)
	}
	for _, want := range []string{"did not finish before; running it again", "id=0002-second", "previous_state=started", "instance=crashy"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log does not say %q:\n%s", want, logs)
		}
	}
	if get(t, st, "second/1") != "1" || get(t, st, "second/2") != "2" {
		t.Fatal("re-run step did not complete its writes")
	}
	recs, _ = migratelog.Applied(ctx, st)
	if recs[1].State != migratelog.StateApplied || recs[1].Attempts != 2 {
		t.Fatalf("record = %+v", recs[1])
	}
}

func TestRun_ProcessKilledMidNonRepeatableStep_StopsWithRecoveryCalls(t *testing.T) {
	ctx := context.Background()
	dir := crashHelper(t, "non-repeatable")
	st, err := openDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	l := acquire(t, st, crashInstance)
	ms := crashMigrations(false, true)

	_, err = migrate.Run(ctx, l, st, ms, migrate.Options{Logger: quietLogger()})
	if !errors.Is(err, migrate.ErrInterrupted) || !strings.Contains(err.Error(), "never finished") ||
		!strings.Contains(err.Error(), `migrate.MarkApplied(ctx, lk, st, "0002-second", note)`) {
		t.Fatalf("err = %v", err)
	}
	if _, _, err := st.Get(ctx, "second/2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the interrupted non-repeatable step ran again: %v", err)
	}
	if err := migrate.MarkApplied(ctx, l, st, "0002-second", "second/2 not needed"); err != nil {
		t.Fatal(err)
	}
	res, err := migrate.Run(ctx, l, st, ms, migrate.Options{Logger: quietLogger()})
	if err != nil || len(res.Ran) != 0 || res.AlreadyApplied != 2 {
		t.Fatalf("after MarkApplied: %+v, %v", res, err)
	}
}
