package lock

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// The probe judges this very process alive only with its start ticks, and
// says "cannot tell" rather than "alive" whenever it cannot compare them.
func TestProbeHolder_OwnProcess_AliveOnlyWithMatchingTicks(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("PIDs are probed on Linux only")
	}
	self := selfProcess()
	if self.ticks == 0 || self.scope == "" {
		t.Fatalf("selfProcess() = %+v: no start ticks or scope on Linux", self)
	}
	host, _ := os.Hostname()
	rec := Record{PID: self.pid, ProcessStartTicks: self.ticks, ProcessScope: self.scope, Hostname: host}
	for _, c := range []struct {
		name string
		edit func(*Record)
		want liveness
	}{
		{"Same", func(*Record) {}, alive},
		{"NoTicksRecorded", func(r *Record) { r.ProcessStartTicks = 0 }, inconclusive},
		{"OtherTicks", func(r *Record) { r.ProcessStartTicks++ }, reused},
		{"OtherScope", func(r *Record) { r.ProcessScope += "x" }, inconclusive},
		{"OtherHost", func(r *Record) { r.Hostname += "x" }, inconclusive},
	} {
		r := rec
		c.edit(&r)
		if got := probeHolder(self, host, r); got != c.want {
			t.Errorf("%s: probe = %s, want %s", c.name, got, c.want)
		}
	}
}

// In a new PID namespace whose /proc is still the host's, this process is
// pid 1 and /proc/1 is the host's init: its own start read from /proc/self
// differs, so it probes no PID at all (it used to find every holder alive
// by reading the host's init).
func TestSelfProcess_HostProcInNewPIDNamespace_NoScope(t *testing.T) {
	if os.Getenv("CAIRN_LOCK_SELF_PROBE") != "" {
		p := selfProcess()
		fmt.Printf("pid=%d scope=%q\n", p.pid, p.scope)
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("PIDs are probed on Linux only")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare(1)")
	}
	cmd := exec.Command(unshare, "--pid", "--fork", os.Args[0], "-test.run=^TestSelfProcess_HostProcInNewPIDNamespace_NoScope$")
	cmd.Env = append(os.Environ(), "CAIRN_LOCK_SELF_PROBE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Skipf("unshare --pid --fork: %v (%s): needs root or user namespaces", err, strings.TrimSpace(string(out)))
	}
	if !strings.Contains(string(out), `pid=1 scope=""`) {
		t.Fatalf("in a new PID namespace with the host's /proc: %s; want pid 1 and no scope", out)
	}
}
