package testserver

import (
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"
)

// NeverAcceptingEndpoint returns the base URL (http://127.0.0.1:PORT) of a
// listening socket whose accept queue (backlog 0: one connection) is
// already full and which never accepts: connecting to it hangs, as to a
// host that drops SYNs. Linux only (the backlog's behaviour is Linux's).
func NeverAcceptingEndpoint(t testing.TB) string {
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
		t.Fatal("testutil: the listener's backlog is not full")
	}
	return "http://" + addr
}
