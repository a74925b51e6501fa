package testkit

import (
	"bufio"
	"errors"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is a child process a test started with [StartProc]: its standard
// output is read line by line as it comes, both streams are kept, and it
// is killed when the test ends.
type Proc struct {
	// Cmd is the started command.
	Cmd *exec.Cmd
	// Stdout and Stderr hold what the process has written so far.
	Stdout, Stderr *SyncBuffer

	done     chan struct{}
	exitCode int // valid after done; -1 when killed by a signal

	mu      sync.Mutex
	waiters []lineWaiter
}

type lineWaiter struct {
	prefix string
	ch     chan string
}

// StartProc starts cmd, whose Stdout and Stderr must be unset. When the
// test ends the process is killed (after a SIGCONT, should the test have
// stopped it) unless it has exited, and a failed test logs its command
// line and output.
func StartProc(t testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Cmd: cmd, Stdout: &SyncBuffer{}, Stderr: &SyncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			p.Stdout.Write([]byte(line + "\n"))
			p.mu.Lock()
			for _, w := range p.waiters {
				if strings.HasPrefix(line, w.prefix) {
					select {
					case w.ch <- line:
					default:
					}
				}
			}
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, out)
		err := cmd.Wait()
		p.exitCode = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.exitCode = ee.ExitCode()
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s\nstdout:\n%s\nstderr:\n%s", strings.Join(cmd.Args, " "), p.Stdout.String(), p.Stderr.String())
		}
	})
	return p
}

// Done is closed once the process has exited and its output is read.
func (p *Proc) Done() <-chan struct{} { return p.done }

// ExitCode is the process's exit code, -1 for a death by signal. It is
// valid once [Proc.Done] is closed.
func (p *Proc) ExitCode() int {
	<-p.done
	return p.exitCode
}

// StdoutLine returns a channel that receives the first stdout line with
// prefix, including one already printed ("" matches the first line).
func (p *Proc) StdoutLine(prefix string) <-chan string {
	ch := make(chan string, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	for line := range strings.Lines(p.Stdout.String()) {
		if strings.HasPrefix(line, prefix) {
			ch <- strings.TrimSuffix(line, "\n")
			return ch
		}
	}
	p.waiters = append(p.waiters, lineWaiter{prefix, ch})
	return ch
}

// WaitStdout returns the first stdout line with prefix. The test fails
// when the process exits without printing one, or when timeout passes.
func (p *Proc) WaitStdout(t testing.TB, prefix string, timeout time.Duration) string {
	t.Helper()
	select {
	case line := <-p.StdoutLine(prefix):
		return line
	case <-p.done:
		select {
		case line := <-p.StdoutLine(prefix):
			return line
		default:
		}
		t.Fatalf("exited with code %d before printing %q\nstderr:\n%s", p.exitCode, prefix, p.Stderr.String())
	case <-time.After(timeout):
		t.Fatalf("no %q line after %s\nstderr:\n%s", prefix, timeout, p.Stderr.String())
	}
	return ""
}

// WaitStderr waits until stderr holds substr. The test fails when the
// process exits first, or when timeout passes.
func (p *Proc) WaitStderr(t testing.TB, substr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(p.Stderr.String(), substr) {
		select {
		case <-p.done:
			t.Fatalf("exited with code %d before saying %q\nstderr:\n%s", p.exitCode, substr, p.Stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("did not say %q within %s\nstderr:\n%s", substr, timeout, p.Stderr.String())
		}
	}
}

// Signal sends sig to the process; the test fails when it cannot.
func (p *Proc) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// Wait returns the exit code (-1 for a death by signal) once the process
// has exited. The test fails when it still runs after timeout.
func (p *Proc) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.exitCode
	case <-time.After(timeout):
		t.Fatalf("still running after %s\nstderr:\n%s", timeout, p.Stderr.String())
		return 0
	}
}
