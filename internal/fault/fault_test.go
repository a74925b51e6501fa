package fault_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/driver"
	"github.com/cairnhq/state/internal/fault"
)

func read(t *testing.T, b backend.Backend, key string) (string, backend.Object) {
	t.Helper()
	rc, obj, err := b.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(data), obj
}

func TestNoFault_ForwardsAndCounts(t *testing.T) {
	ctx := context.Background()
	f := fault.New(mem.New(mem.Options{}))
	if _, err := f.Put(ctx, "k", []byte("v"), backend.PutOptions{IfAbsent: true}); err != nil {
		t.Fatal(err)
	}
	if got, _ := read(t, f, "k"); got != "v" {
		t.Fatalf("read %q, want v", got)
	}
	if err := f.List(ctx, "", func(backend.Object) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Now(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Delete(ctx, "k", backend.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := fault.Counts{Get: 1, Put: 1, Delete: 1, List: 1, Now: 1}
	if got := f.Counts(); got != want {
		t.Fatalf("counts %v, want %v", got, want)
	}
	f.ResetCounts()
	if got := f.Counts().Total(); got != 0 {
		t.Fatalf("total after reset = %d", got)
	}
}

func TestLosePutAcks_WritesThenAnswersPreconditionFailed(t *testing.T) {
	ctx := context.Background()
	f := fault.New(mem.New(mem.Options{}))
	f.LosePutAcks(1)
	_, err := f.Put(ctx, "k", []byte("mine"), backend.PutOptions{IfAbsent: true})
	if !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Fatalf("put = %v, want ErrPreconditionFailed", err)
	}
	if got, _ := read(t, f, "k"); got != "mine" {
		t.Fatalf("object = %q, want the write to have happened", got)
	}
	// Only the next n: the following conditional put behaves normally.
	_, err = f.Put(ctx, "k", []byte("again"), backend.PutOptions{IfAbsent: true})
	if !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Fatalf("second if-absent put = %v, want a real precondition failure", err)
	}
	if got, _ := read(t, f, "k"); got != "mine" {
		t.Fatalf("object = %q after a refused put", got)
	}
}

func TestIgnoreConditions_WritesUnconditionallyAndStillClaimsCAS(t *testing.T) {
	ctx := context.Background()
	f := fault.New(mem.New(mem.Options{}))
	f.SetIgnoreConditions(true)
	if !f.Capabilities().ConditionalWrites {
		t.Fatal("capabilities changed; the point is that the server lies")
	}
	for _, v := range []string{"one", "two"} {
		if _, err := f.Put(ctx, "k", []byte(v), backend.PutOptions{IfAbsent: true}); err != nil {
			t.Fatalf("put %s: %v", v, err)
		}
	}
	if _, err := f.Put(ctx, "k", []byte("three"), backend.PutOptions{IfVersion: "no-such-version"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := read(t, f, "k"); got != "three" {
		t.Fatalf("object = %q, want three", got)
	}
	if err := f.Delete(ctx, "k", backend.DeleteOptions{IfVersion: "no-such-version"}); err != nil {
		t.Fatalf("delete ignoring condition: %v", err)
	}
}

func TestClockSkew_ShiftsNowModTimesAndResponseTimes(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := base
	f := fault.New(mem.New(mem.Options{Clock: func() time.Time { return clock }}))
	f.SetClockSkew(-time.Hour)
	now, err := f.Now(ctx)
	if err != nil || !now.Equal(base.Add(-time.Hour)) {
		t.Fatalf("Now = %v, %v; want %v", now, err, base.Add(-time.Hour))
	}
	obj, err := f.Put(ctx, "k", []byte("v"), backend.PutOptions{})
	if err != nil || !obj.ModTime.Equal(base.Add(-time.Hour)) || !obj.Now.Equal(base.Add(-time.Hour)) {
		t.Fatalf("put ModTime = %v, Now = %v, %v; want both %v", obj.ModTime, obj.Now, err, base.Add(-time.Hour))
	}
	// Later reads carry the later response time, shifted the same way.
	clock = base.Add(time.Minute)
	want := clock.Add(-time.Hour)
	if _, o := read(t, f, "k"); !o.ModTime.Equal(base.Add(-time.Hour)) || !o.Now.Equal(want) {
		t.Fatalf("get ModTime = %v, Now = %v; want %v, %v", o.ModTime, o.Now, base.Add(-time.Hour), want)
	}
	listed := 0
	err = f.List(ctx, "", func(o backend.Object) error {
		listed++
		if !o.ModTime.Equal(base.Add(-time.Hour)) || !o.Now.Equal(want) {
			t.Errorf("list ModTime = %v, Now = %v; want %v, %v", o.ModTime, o.Now, base.Add(-time.Hour), want)
		}
		return nil
	})
	if err != nil || listed != 1 {
		t.Fatalf("list: %d objects, %v", listed, err)
	}
}

// A zero Object.Now means "unknown"; skew must not turn it into a time.
func TestClockSkew_LeavesAnUnknownResponseTimeZero(t *testing.T) {
	f := fault.New(noNow{mem.New(mem.Options{})})
	f.SetClockSkew(time.Hour)
	obj, err := f.Put(context.Background(), "k", []byte("v"), backend.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !obj.Now.IsZero() {
		t.Errorf("Put Now = %v, want zero (the wrapped backend could not tell)", obj.Now)
	}
}

// noNow is a backend that cannot tell the storage's time per request.
type noNow struct{ backend.Backend }

func (n noNow) Put(ctx context.Context, key string, data []byte, opts backend.PutOptions) (backend.Object, error) {
	o, err := n.Backend.Put(ctx, key, data, opts)
	o.Now = time.Time{}
	return o, err
}

// resolver counts its resolutions.
type resolver struct {
	backend.Backend
	calls int
}

func (r *resolver) ResolveCapabilities(context.Context) (backend.Capabilities, error) {
	r.calls++
	return backend.Capabilities{ConditionalWrites: true}, nil
}

func TestResolveCapabilities_ForwardedToTheWrappedBackend(t *testing.T) {
	inner := &resolver{Backend: mem.New(mem.Options{NoConditionalWrites: true})}
	f := fault.New(inner)
	caps, err := driver.ResolveCapabilities(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	if inner.calls != 1 || !caps.ConditionalWrites {
		t.Errorf("ResolveCapabilities through the wrapper: %d calls to the wrapped backend, caps %+v; want 1 call and its answer", inner.calls, caps)
	}
	// Through two wrappers as well.
	if _, err := driver.ResolveCapabilities(context.Background(), fault.New(f)); err != nil || inner.calls != 2 {
		t.Errorf("through two wrappers: %d calls, %v", inner.calls, err)
	}
}

func TestUnavailable_FailsEveryCallUntilHealed(t *testing.T) {
	ctx := context.Background()
	f := fault.New(mem.New(mem.Options{}))
	f.SetUnavailable(true)
	if _, err := f.Put(ctx, "k", []byte("v"), backend.PutOptions{}); !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("put = %v, want ErrInjected", err)
	}
	if _, err := f.Now(ctx); !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("now = %v, want ErrInjected", err)
	}
	f.SetUnavailable(false)
	if _, _, err := f.Get(ctx, "k"); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("get after heal = %v, want ErrNotFound (the failed put wrote nothing)", err)
	}
}

func TestStall_BlocksUntilResumeOrContextEnd(t *testing.T) {
	f := fault.New(mem.New(mem.Options{}))
	resume := f.Stall()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := f.Now(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stalled call = %v, want DeadlineExceeded", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.Put(context.Background(), "k", []byte("v"), backend.PutOptions{})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("put returned while stalled: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	resume()
	resume()
	if err := <-done; err != nil {
		t.Fatalf("put after resume: %v", err)
	}
}

func TestHook_DecidesPerCall(t *testing.T) {
	ctx := context.Background()
	f := fault.New(mem.New(mem.Options{}))
	boom := errors.New("boom")
	var seen []fault.Call
	f.SetHook(func(_ context.Context, c fault.Call) error {
		seen = append(seen, c)
		if c.Op == fault.OpDelete {
			return boom
		}
		return nil
	})
	if _, err := f.Put(ctx, "k", []byte("v"), backend.PutOptions{IfAbsent: true}); err != nil {
		t.Fatal(err)
	}
	if err := f.Delete(ctx, "k", backend.DeleteOptions{IfVersion: "1"}); !errors.Is(err, boom) {
		t.Fatalf("delete = %v, want the hook's error", err)
	}
	want := []fault.Call{{Op: fault.OpPut, Key: "k", IfAbsent: true}, {Op: fault.OpDelete, Key: "k", IfVersion: "1"}}
	if len(seen) != 2 || seen[0] != want[0] || seen[1] != want[1] {
		t.Fatalf("hook saw %+v, want %+v", seen, want)
	}
	f.SetHook(nil)
	if err := f.Delete(ctx, "k", backend.DeleteOptions{}); err != nil {
		t.Fatalf("delete without hook: %v", err)
	}
}

// A held write whose caller gave up is still carried out when delivered:
// it lands late, after a write that came after it, unless a condition
// stops it.
func TestHoldWrites_CallerCutOffWriteLandsLate(t *testing.T) {
	ctx := context.Background()
	inner := mem.New(mem.Options{})
	f := fault.New(inner)
	first, err := f.Put(ctx, "k", []byte("v0"), backend.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deliver := f.HoldWrites(func(key string) bool { return key == "k" })
	cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := f.Put(cctx, "k", []byte("late"), backend.PutOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("held put = %v, want its context's error", err)
	}
	cctx2, cancel2 := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel2()
	if _, err := f.Put(cctx2, "k", []byte("late, conditional"), backend.PutOptions{IfVersion: first.Version}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("held conditional put = %v, want its context's error", err)
	}
	if _, err := f.Put(ctx, "other", []byte("x"), backend.PutOptions{}); err != nil {
		t.Fatalf("a put of another key is not held: %v", err)
	}
	if got := sizeOf(t, inner, "k"); got != int64(len("v0")) {
		t.Fatalf("before delivery k has %d bytes, want v0's", got)
	}
	errs := deliver()
	if len(errs) != 2 || errs[0] != nil || !errors.Is(errs[1], backend.ErrPreconditionFailed) {
		t.Fatalf("delivery = %v, want the blind write landed and the conditional one refused", errs)
	}
	if got := sizeOf(t, inner, "k"); got != int64(len("late")) {
		t.Fatalf("after delivery k has %d bytes, want the late write's", got)
	}
	if _, err := f.Put(ctx, "k", []byte("now"), backend.PutOptions{}); err != nil {
		t.Fatalf("after delivery writes are not held: %v", err)
	}
}

// sizeOf is the size of the object under key, as listed (the test's values
// have distinct lengths).
func sizeOf(t *testing.T, b backend.Backend, key string) int64 {
	t.Helper()
	size := int64(-1)
	if err := b.List(context.Background(), key, func(o backend.Object) error {
		if o.Key == key {
			size = o.Size
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return size
}
