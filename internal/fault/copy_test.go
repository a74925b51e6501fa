package fault_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairnhq/state/backend"
	"github.com/cairnhq/state/backend/backendtest"
	"github.com/cairnhq/state/backend/mem"
	"github.com/cairnhq/state/internal/driver"
	"github.com/cairnhq/state/internal/fault"
)

// The wrapper keeps the contract of what it wraps, the copy included.
func TestConformance_OverMem(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		NewBackend: func(*testing.T) backend.Backend { return fault.New(mem.New(mem.Options{})) },
	})
}

func TestCopy_ForwardedCountedAndShifted(t *testing.T) {
	ctx := context.Background()
	f := fault.New(mem.New(mem.Options{}))
	src, err := f.Put(ctx, "src", []byte("v"), backend.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var calls []fault.Call
	f.SetHook(func(_ context.Context, c fault.Call) error {
		calls = append(calls, c)
		return nil
	})
	f.SetClockSkew(time.Hour)
	obj, err := driver.Copy(ctx, f, "src", "dst", backend.CopyOptions{IfSourceVersion: src.Version, IfAbsent: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := read(t, f, "dst"); got != "v" {
		t.Fatalf("dst = %q, want the source's bytes", got)
	}
	if time.Until(obj.ModTime) < 50*time.Minute || time.Until(obj.Now) < 50*time.Minute {
		t.Errorf("copy's ModTime %v and Now %v are not an hour ahead", obj.ModTime, obj.Now)
	}
	want := fault.Call{Op: fault.OpCopy, Key: "dst", Source: "src", IfAbsent: true, IfVersion: src.Version}
	if len(calls) != 2 || calls[0] != want {
		t.Errorf("the hook saw %+v, want the copy %+v first (then the read)", calls, want)
	}
	if c := f.Counts(); c.Copy != 1 || c.Total() != 3 {
		t.Errorf("counts %v, want one copy among put, copy and get", c)
	}
}

func TestCopy_IgnoreConditions_CopiesUnconditionally(t *testing.T) {
	ctx := context.Background()
	f := fault.New(mem.New(mem.Options{}))
	if _, err := f.Put(ctx, "src", []byte("new"), backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Put(ctx, "dst", []byte("old"), backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	f.SetIgnoreConditions(true)
	if _, err := driver.Copy(ctx, f, "src", "dst", backend.CopyOptions{IfSourceVersion: "stale", IfAbsent: true}); err != nil {
		t.Fatalf("copy with conditions ignored: %v", err)
	}
	if got, _ := read(t, f, "dst"); got != "new" {
		t.Errorf("dst = %q, want the copy to have happened", got)
	}
}

func TestCopy_UnavailableFailsWithoutCopying(t *testing.T) {
	ctx := context.Background()
	f := fault.New(mem.New(mem.Options{}))
	if _, err := f.Put(ctx, "src", []byte("v"), backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	f.SetUnavailable(true)
	if _, err := driver.Copy(ctx, f, "src", "dst", backend.CopyOptions{}); !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("copy = %v, want ErrInjected", err)
	}
	f.SetUnavailable(false)
	if _, _, err := f.Get(ctx, "dst"); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("get dst = %v, want ErrNotFound", err)
	}
}

// plain is a backend without a server-side copy.
type plain struct{ backend.Backend }

// Over a backend that cannot copy, the wrapper says so: through one
// wrapper and through two.
func TestCopy_OverABackendWithoutCopier_Unsupported(t *testing.T) {
	ctx := context.Background()
	inner := plain{mem.New(mem.Options{})}
	if _, err := inner.Put(ctx, "src", []byte("v"), backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, b := range []backend.Backend{fault.New(inner), fault.New(fault.New(inner))} {
		if _, err := driver.Copy(ctx, b, "src", "dst", backend.CopyOptions{}); !errors.Is(err, backend.ErrUnsupported) {
			t.Errorf("copy through %T over a backend without Copier = %v, want ErrUnsupported", b, err)
		}
	}
}
