//go:build linux

package main

import (
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// neverAcceptingEndpoint returns the base URL of a listening socket whose
// accept queue (backlog 0: one connection) is already full and which never
// accepts: connecting to it hangs, as to a host that drops SYNs.
func neverAcceptingEndpoint(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	filler, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { filler.Close() })
	if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
		c.Close()
		t.Fatal("test bug: the listener's backlog is not full")
	}
	return "http://" + addr
}

// TestTimeout_NeverAcceptingEndpoint_LsFailsWithinTheBudget_NamingIt: the
// connect timeout, derived from the budget, gives up on a listener that
// never accepts.
func TestTimeout_NeverAcceptingEndpoint_LsFailsWithinTheBudget_NamingIt(t *testing.T) {
	t.Parallel()
	ep := neverAcceptingEndpoint(t)
	host := strings.TrimPrefix(ep, "http://")
	tg := &target{dir: t.TempDir(), url: "s3://bucket?endpoint=" + ep + "&region=garage", env: fakeCredentials}
	for _, c := range []struct {
		args    []string
		budget  time.Duration
		timeout string
	}{
		{[]string{"ls"}, defaultTimeout, "3.8s"},
		{[]string{"ls", "--timeout", "3s"}, 3 * time.Second, "380ms"},
	} {
		t.Run(c.budget.String(), func(t *testing.T) {
			t.Parallel()
			r, took := tg.timed(t, nil, c.args...)
			r.must(t, exitFail)
			t.Logf("%v after %v: %s", c.args, took.Round(time.Millisecond), r.stderr)
			if took > c.budget {
				t.Errorf("%v took %v, want at most %v", c.args, took, c.budget)
			}
			if took < c.budget/4 {
				t.Errorf("%v gave up after %v: want its attempts to use most of the budget (%v)", c.args, took, c.budget)
			}
			for _, want := range []string{"no answer from " + ep, host + " did not accept a connection within " + c.timeout + " (connect timeout)"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, r)
				}
			}
		})
	}
}
