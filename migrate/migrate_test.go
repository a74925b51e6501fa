package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/lockadmin"
	"github.com/cairnhq/state/internal/migratelog"
	"github.com/cairnhq/state/internal/storeadmin"
	"github.com/cairnhq/state/internal/testkit"
	"github.com/cairnhq/state/lock"
	"github.com/cairnhq/state/migrate"
	"github.com/cairnhq/state/store"
)

func TestMain(m *testing.M) {
	if helperMain() {
		return
	}
	goleak.VerifyTestMain(m)
}

// newStore returns a store over a fresh in-memory backend.
func newStore(t testing.TB) *store.Store {
	t.Helper()
	return testkit.Store(t, mem.New(mem.Options{}), store.Options{Logger: quietLogger()})
}

// acquire takes the lock on st as id and releases it at the end of the test.
func acquire(t testing.TB, st *store.Store, id string) *lock.Lock {
	t.Helper()
	l, err := lock.Acquire(context.Background(), st, lock.Options{InstanceID: id, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("acquire lock as %q: %v", id, err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// logBuffer is a logger whose text output the test reads.
type logBuffer struct{ testkit.SyncBuffer }

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// put returns a migration that writes value at name, counting its calls.
func put(id, name, value string, calls *int) migrate.Migration {
	return migrate.Migration{
		ID:          id,
		Description: "write " + name,
		Up: func(ctx context.Context, st *store.Store) error {
			*calls++
			_, err := st.Put(ctx, name, []byte(value), store.PutOptions{})
			return err
		},
	}
}

func get(t testing.TB, st *store.Store, name string) string {
	t.Helper()
	v, _, err := st.Get(context.Background(), name)
	if err != nil {
		t.Fatalf("get %q: %v", name, err)
	}
	return string(v)
}

func states(t testing.TB, st *store.Store) map[string]migratelog.State {
	t.Helper()
	recs, err := migratelog.Applied(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]migratelog.State)
	for _, r := range recs {
		out[r.ID] = r.State
	}
	return out
}

func TestRun_WithoutHeldLock_RefusesAndWritesNothing(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	calls := 0
	ms := []migrate.Migration{put("0001", "a", "1", &calls)}

	_, err := migrate.Run(ctx, nil, st, ms, migrate.Options{Logger: quietLogger()})
	if !errors.Is(err, migrate.ErrLockNotHeld) {
		t.Fatalf("Run with nil lock: err = %v, want ErrLockNotHeld", err)
	}

	l, err := lock.Acquire(ctx, st, lock.Options{InstanceID: "a", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = migrate.Run(ctx, l, st, ms, migrate.Options{Logger: quietLogger()})
	if !errors.Is(err, migrate.ErrLockNotHeld) || !errors.Is(err, lock.ErrReleased) {
		t.Fatalf("Run with released lock: err = %v, want ErrLockNotHeld wrapping lock.ErrReleased", err)
	}
	if calls != 0 {
		t.Fatalf("Up called %d times without the lock", calls)
	}
	if recs, err := migratelog.Applied(ctx, st); err != nil || len(recs) != 0 {
		t.Fatalf("log after refused runs: %v, %v; want empty", recs, err)
	}
}

// A lock held on one store does not license migrations on another.
func TestRun_LockOfAnotherStore_RefusesAndWritesNothing(t *testing.T) {
	ctx := context.Background()
	st, other := newStore(t), newStore(t)
	l := acquire(t, other, "pod-a")
	calls := 0
	ms := []migrate.Migration{put("0001", "a", "1", &calls)}

	_, err := migrate.Run(ctx, l, st, ms, migrate.Options{Logger: quietLogger()})
	if !errors.Is(err, migrate.ErrLockNotHeld) || !strings.Contains(err.Error(), "another store") {
		t.Fatalf("Run under another store's lock: err = %v, want ErrLockNotHeld saying so", err)
	}
	if calls != 0 {
		t.Fatalf("Up called %d times under another store's lock", calls)
	}
	if err := migrate.MarkApplied(ctx, l, st, "0001", "by hand"); !errors.Is(err, migrate.ErrLockNotHeld) {
		t.Fatalf("MarkApplied under another store's lock: err = %v, want ErrLockNotHeld", err)
	}
	if recs, err := migratelog.Applied(ctx, st); err != nil || len(recs) != 0 {
		t.Fatalf("log after refused calls: %v, %v; want empty", recs, err)
	}

	// Same backend, other root: another store too.
	b := storeadmin.Backend(st)
	rooted := testkit.Store(t, b, store.Options{Root: "elsewhere"})
	l2 := acquire(t, rooted, "pod-b")
	if _, err := migrate.Run(ctx, l2, st, ms, migrate.Options{Logger: quietLogger()}); !errors.Is(err, migrate.ErrLockNotHeld) {
		t.Fatalf("Run under the lock of another root: err = %v, want ErrLockNotHeld", err)
	}
}

func TestRun_PendingSteps_RunInOrderOnceAndAreRecorded(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	l := acquire(t, st, "pod-a")
	var order []string
	step := func(id string) migrate.Migration {
		return migrate.Migration{ID: id, Description: "step " + id, Up: func(ctx context.Context, st *store.Store) error {
			order = append(order, id)
			_, err := st.Put(ctx, "steps/"+id, []byte(id), store.PutOptions{})
			return err
		}}
	}
	ms := []migrate.Migration{step("0001-a"), step("0002-b"), step("0003-c")}

	res, err := migrate.Run(ctx, l, st, ms, migrate.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, ","); got != "0001-a,0002-b,0003-c" {
		t.Fatalf("order = %s", got)
	}
	if len(res.Ran) != 3 || len(res.Rerun) != 0 || res.AlreadyApplied != 0 {
		t.Fatalf("result = %+v", res)
	}
	recs, err := migratelog.Applied(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if r.ID != ms[i].ID || r.State != migratelog.StateApplied || r.Attempts != 1 ||
			r.InstanceID != "pod-a" || r.Epoch != l.Record().Epoch || r.Description != ms[i].Description ||
			r.StartedAt.IsZero() || r.FinishedAt.Before(r.StartedAt) {
			t.Errorf("record %d = %+v", i, r)
		}
	}

	// Adding a step later runs only that one.
	ms = append(ms, step("0004-d"))
	order = nil
	res, err = migrate.Run(ctx, l, st, ms, migrate.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, ","); got != "0004-d" || res.AlreadyApplied != 3 {
		t.Fatalf("second run ran %q (result %+v), want only 0004-d", got, res)
	}
	if get(t, st, "steps/0004-d") != "0004-d" {
		t.Fatal("0004-d did not write")
	}
}

func TestRun_StepFails_RecordsFailureStopsAndNextRunRetries(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	l := acquire(t, st, "pod-a")
	boom := errors.New("disk on fire")
	fail := true
	calls2, calls3 := 0, 0
	ms := []migrate.Migration{
		{ID: "0001", Up: func(context.Context, *store.Store) error { return nil }},
		{ID: "0002", Up: func(context.Context, *store.Store) error {
			calls2++
			if fail {
				return boom
			}
			return nil
		}},
		put("0003", "c", "3", &calls3),
	}

	_, err := migrate.Run(ctx, l, st, ms, migrate.Options{Logger: quietLogger()})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), `"0002"`) {
		t.Fatalf("err = %v, want the step's error naming 0002", err)
	}
	if calls3 != 0 {
		t.Fatal("a step after the failed one ran")
	}
	got := states(t, st)
	if got["0001"] != migratelog.StateApplied || got["0002"] != migratelog.StateFailed || got["0003"] != "" {
		t.Fatalf("states = %v", got)
	}
	recs, _ := migratelog.Applied(ctx, st)
	if !strings.Contains(recs[1].Error, "disk on fire") {
		t.Fatalf("failed record's error = %q", recs[1].Error)
	}

	fail = false
	logs := &logBuffer{}
	res, err := migrate.Run(ctx, l, st, ms, migrate.Options{Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(res.Rerun) != "[0002]" || fmt.Sprint(res.Ran) != "[0002 0003]" || calls2 != 2 {
		t.Fatalf("result %+v, calls %d", res, calls2)
	}
	if !strings.Contains(logs.String(), "running it again") || !strings.Contains(logs.String(), "disk on fire") {
		t.Fatalf("the re-run is not explained in the log:\n%s", logs)
	}
	recs, _ = migratelog.Applied(ctx, st)
	if recs[1].State != migratelog.StateApplied || recs[1].Attempts != 2 || recs[1].Error != "" {
		t.Fatalf("record after retry = %+v", recs[1])
	}
}

func TestRun_FailedNonRepeatableStep_StopsWithErrorNamingTheRecoveryCalls(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	l := acquire(t, st, "pod-a")
	calls := 0
	ms := []migrate.Migration{{
		ID: "0007-rewrite", NonRepeatable: true,
		Up: func(context.Context, *store.Store) error {
			calls++
			if calls == 1 {
				return errors.New("half done")
			}
			return nil
		},
	}}
	if _, err := migrate.Run(ctx, l, st, ms, migrate.Options{Logger: quietLogger()}); err == nil {
		t.Fatal("first run: want the step's error")
	}

	_, err := migrate.Run(ctx, l, st, ms, migrate.Options{Logger: quietLogger()})
	var ie *migrate.InterruptedError
	if !errors.Is(err, migrate.ErrInterrupted) || !errors.As(err, &ie) || ie.ID != "0007-rewrite" {
		t.Fatalf("second run: err = %v, want *InterruptedError naming 0007-rewrite", err)
	}
	for _, want := range []string{`"0007-rewrite"`, "half done", "pod-a",
		`migrate.MarkApplied(ctx, lk, st, "0007-rewrite", note)`, `migrate.MarkPending(ctx, lk, st, "0007-rewrite", note)`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %s:\n%v", want, err)
		}
	}
	if calls != 1 {
		t.Fatalf("non-repeatable step ran %d times", calls)
	}

	// MarkPending re-arms it; the next Run runs it from the start.
	if err := migrate.MarkPending(ctx, l, st, "0007-rewrite", "checked by ops: nothing was written"); err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Run(ctx, l, st, ms, migrate.Options{Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	if calls != 2 || states(t, st)["0007-rewrite"] != migratelog.StateApplied {
		t.Fatalf("after MarkPending: calls %d, states %v", calls, states(t, st))
	}
}

func TestMarkApplied_ResolvesInterruptedStepWithoutRunningIt(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	l := acquire(t, st, "pod-a")
	calls := 0
	ms := []migrate.Migration{{ID: "0001", NonRepeatable: true, Up: func(context.Context, *store.Store) error {
		calls++
		return errors.New("interrupted")
	}}}
	_, _ = migrate.Run(ctx, l, st, ms, migrate.Options{Logger: quietLogger()})

	if err := migrate.MarkApplied(ctx, l, st, "0001", "effects verified by hand"); err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Run(ctx, l, st, ms, migrate.Options{Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	recs, _ := migratelog.Applied(ctx, st)
	if calls != 1 || recs[0].State != migratelog.StateApplied || recs[0].Note != "effects verified by hand" {
		t.Fatalf("calls %d, record %+v", calls, recs[0])
	}
	if err := migrate.MarkApplied(ctx, l, st, "0099", ""); !errors.Is(err, migrate.ErrNoSuchMigration) {
		t.Fatalf("MarkApplied of an unknown id: %v", err)
	}
	if err := migrate.MarkApplied(ctx, nil, st, "0001", ""); !errors.Is(err, migrate.ErrLockNotHeld) {
		t.Fatalf("MarkApplied without lock: %v", err)
	}
}

func TestRun_LogHasStepsThisCodeDoesNotKnow_RefusesUnlessAllowed(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	l := acquire(t, st, "pod-a")
	n := 0
	newer := []migrate.Migration{put("0001", "a", "1", &n), put("0002", "b", "2", &n)}
	if _, err := migrate.Run(ctx, l, st, newer, migrate.Options{Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	older := newer[:1]
	_, err := migrate.Run(ctx, l, st, older, migrate.Options{Logger: quietLogger()})
	if !errors.Is(err, migrate.ErrUnknownMigration) || !strings.Contains(err.Error(), `"0002"`) {
		t.Fatalf("err = %v, want ErrUnknownMigration naming 0002", err)
	}
	if _, err := migrate.Run(ctx, l, st, older, migrate.Options{Logger: quietLogger(), AllowUnknown: true}); err != nil {
		t.Fatalf("with AllowUnknown: %v", err)
	}
}

func TestRun_InvalidMigrationList_IsRefusedBeforeAnythingRuns(t *testing.T) {
	ok := func(context.Context, *store.Store) error { return nil }
	cases := []struct {
		name string
		ms   []migrate.Migration
		want string
	}{
		{"empty id", []migrate.Migration{{ID: "", Up: ok}}, "empty ID"},
		{"duplicate id", []migrate.Migration{{ID: "a", Up: ok}, {ID: "a", Up: ok}}, "duplicate ID"},
		{"nil up", []migrate.Migration{{ID: "a"}}, "nil Up"},
		{"control character", []migrate.Migration{{ID: "a\nb", Up: ok}}, "control character"},
		{"too long", []migrate.Migration{{ID: strings.Repeat("x", 201), Up: ok}}, "longer than"},
	}
	st := newStore(t)
	l := acquire(t, st, "pod-a")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := migrate.Run(context.Background(), l, st, c.ms, migrate.Options{Logger: quietLogger()})
			if !errors.Is(err, migrate.ErrInvalidMigration) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrInvalidMigration saying %q", err, c.want)
			}
		})
	}
}

// In virtual time (testing/synctest): with the 20 ms heartbeat in real time
// a loaded machine let a heartbeat rewrite the lock between the break's
// look and its conditional delete ("the lock changed since it was
// inspected"), which is Break doing its job, not what this test checks.
func TestRun_LockLostDuringStep_CancelsStepAndRefusesItsWrites(t *testing.T) {
	synctest.Test(t, testRunLockLostDuringStep)
}

func testRunLockLostDuringStep(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	l, err := lock.Acquire(ctx, st, lock.Options{InstanceID: "pod-a", HeartbeatInterval: 20 * time.Millisecond,
		StaleAfter: time.Second, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })

	var writeErr error
	ms := []migrate.Migration{{ID: "0001-long", Up: func(ctx context.Context, fenced *store.Store) error {
		// An operator breaks the lock and another instance takes it.
		if _, err := lockadmin.Break(ctx, st, lockadmin.BreakOptions{Holder: "pod-a", Force: true, StaleAfter: time.Second}); err != nil {
			return fmt.Errorf("break: %w", err)
		}
		other, err := lock.Acquire(context.WithoutCancel(ctx), st, lock.Options{InstanceID: "pod-b", Logger: quietLogger()})
		if err != nil {
			return fmt.Errorf("acquire as pod-b: %w", err)
		}
		defer func() { _ = other.Release(context.Background()) }()
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			return errors.New("step context not cancelled after the lock was lost")
		}
		_, writeErr = fenced.Put(context.Background(), "late", []byte("x"), store.PutOptions{})
		return ctx.Err()
	}}}

	_, err = migrate.Run(ctx, l, st, ms, migrate.Options{Logger: quietLogger()})
	if !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Run: err = %v, want it to wrap lock.ErrLost", err)
	}
	if !errors.Is(writeErr, store.ErrFenced) {
		t.Fatalf("write after loss: err = %v, want store.ErrFenced", writeErr)
	}
	if _, _, err := st.Get(ctx, "late"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the write after loss landed: %v", err)
	}
	if s := states(t, st)["0001-long"]; s != migratelog.StateStarted {
		t.Fatalf("state after loss = %q, want started (the fence refused the failure record)", s)
	}
}

func TestLogger_InsideUp_IsTheRunsLoggerTaggedWithTheStep(t *testing.T) {
	st := newStore(t)
	l := acquire(t, st, "pod-a")
	logs := &logBuffer{}
	ms := []migrate.Migration{{ID: "0001-talk", Up: func(ctx context.Context, _ *store.Store) error {
		migrate.Logger(ctx).Info("halfway there")
		return nil
	}}}
	if _, err := migrate.Run(context.Background(), l, st, ms, migrate.Options{Logger: logs.logger()}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `msg="halfway there" migration=0001-talk`) {
		t.Fatalf("log:\n%s", logs)
	}
}
