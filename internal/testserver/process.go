package testserver

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Process is a server process started for one test. It is stopped when the
// test ends (t.Cleanup) and, on Linux, killed by the kernel if the test
// binary dies first, so it never outlives the test run.
type Process struct {
	// Name names the server in messages.
	Name string
	// LogPath is the file that receives the process's stdout and stderr.
	LogPath string
	// Grace is how long Stop waits after SIGTERM before SIGKILL; zero
	// kills at once (for throwaway servers whose data is discarded).
	// StartProcess sets it to five seconds.
	Grace time.Duration

	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// StartProcess starts bin with args, output to logPath, and registers its
// stop with t.Cleanup: SIGTERM, then SIGKILL after p.Grace. When the
// test has failed, the end of the log is printed with the test's output.
func StartProcess(t testing.TB, name, logPath, bin string, args ...string) (*Process, error) {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &Process{Name: name, LogPath: logPath, Grace: 5 * time.Second, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("%s log (%s), last lines:\n%s", name, logPath, p.LogTail(40))
		}
	})
	return p, nil
}

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.done }

// ExitError returns how the process ended, once Exited is closed.
func (p *Process) ExitError() error {
	<-p.done
	return p.waitErr
}

// Stop ends the process (SIGTERM, then SIGKILL after p.Grace) and waits
// for it. It is safe to call more than once.
func (p *Process) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	if p.Grace <= 0 {
		_ = p.cmd.Process.Kill()
		<-p.done
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(p.Grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Kill sends SIGKILL, as a crash or the OOM killer would, and waits for the
// process to exit. It is safe to call on a process that has exited.
func (p *Process) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Signal sends sig to the process (SIGSTOP and SIGCONT pause and resume
// it). It fails once the process has exited.
func (p *Process) Signal(sig os.Signal) error {
	select {
	case <-p.done:
		return fmt.Errorf("%s has exited (%v)", p.Name, p.waitErr)
	default:
	}
	return p.cmd.Process.Signal(sig)
}

// Pid returns the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogTail returns the last n lines of the process's log, after the
// lines that say why it panicked, if it did (a Rust panic's message comes
// before a backtrace of a hundred lines or more under RUST_BACKTRACE=1).
func (p *Process) LogTail(n int) string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	var panicked [][]byte
	if len(lines) > n {
		for i, l := range lines[:len(lines)-n] {
			if bytes.Contains(l, []byte("panicked at")) {
				panicked = append(panicked, lines[i:min(i+2, len(lines)-n)]...)
				panicked = append(panicked, []byte("  …"))
				break
			}
		}
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(append(panicked, lines...), []byte("\n")))
}

// LostPortRace reports whether the process's log, read whole, says it
// could not listen on its port because another process took it first
// ([PortInUse]).
func (p *Process) LostPortRace() bool {
	data, err := os.ReadFile(p.LogPath)
	return err == nil && PortInUse(string(data))
}

// WaitReady polls ready every 50 ms until it returns nil, the process
// exits, or timeout passes; the error then includes the end of the log.
func (p *Process) WaitReady(timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if last = ready(); last == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready (%v); log:\n%s", p.Name, p.waitErr, p.LogTail(20))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %v; log:\n%s", p.Name, timeout, last, p.LogTail(20))
		}
	}
}

// PortInUse reports whether a failed start's log looks like a lost race
// for the listening port, which is worth another try on a new port.
func PortInUse(log string) bool {
	s := strings.ToLower(log)
	return strings.Contains(s, "address already in use") || strings.Contains(s, "addrinuse")
}
