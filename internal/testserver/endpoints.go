package testserver

import (
	"io"
	"net"
	"sync"
	"testing"
)

// SilentEndpoint returns the base URL (http://127.0.0.1:PORT) of a listener
// that accepts every connection, reads what it is sent and never answers:
// a hung server, or a proxy whose upstream is gone. Its goroutines and
// connections end with the test.
func SilentEndpoint(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(io.Discard, c) })
		}
	})
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + l.Addr().String()
}
