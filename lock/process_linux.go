package lock

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// userHZ is the unit of /proc/<pid>/stat's starttime: USER_HZ, 100 on every
// Linux ABI Go supports (sysconf(_SC_CLK_TCK) would need cgo).
const userHZ = 100

var bootTime = sync.OnceValues(func() (time.Time, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "btime "); ok {
			sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, err
			}
			return time.Unix(sec, 0), nil
		}
	}
	return time.Time{}, errors.New("no btime in /proc/stat")
})

// procStat returns the state letter (field 3) and the start time in clock
// ticks after boot (field 22) of /proc/<pid>/stat.
func procStat(pid int) (state byte, ticks uint64, ok bool) {
	return readStat("/proc/" + strconv.Itoa(pid) + "/stat")
}

// selfStartTicks is this process's start in clock ticks after boot, read
// from /proc/self, which names this process whatever PID namespace /proc
// belongs to.
func selfStartTicks() (uint64, bool) {
	_, ticks, ok := readStat("/proc/self/stat")
	return ticks, ok && ticks != 0
}

// readStat parses a stat file. The command name (field 2) is in
// parentheses and may itself contain spaces and parentheses, so fields are
// counted from the last ')'.
func readStat(path string) (state byte, ticks uint64, ok bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := strings.Fields(string(data[i+1:]))
	// fields[0] is field 3 (state), so field 22 is fields[19].
	if len(fields) < 20 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	t, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return fields[0][0], t, true
}

// processStartTicks is the start of pid in clock ticks after boot.
func processStartTicks(pid int) (uint64, bool) {
	_, ticks, ok := procStat(pid)
	return ticks, ok && ticks != 0
}

// processStart is the start of pid as a wall-clock time (btime + ticks), for
// display only: btime moves with wall-clock steps.
func processStart(pid int) (time.Time, bool) {
	_, ticks, ok := procStat(pid)
	if !ok {
		return time.Time{}, false
	}
	bt, err := bootTime()
	if err != nil {
		return time.Time{}, false
	}
	return bt.Add(time.Duration(ticks) * (time.Second / userHZ)).UTC(), true
}

// processExists reports whether pid names a running process. A zombie (dead,
// not yet reaped by its parent) counts as gone. known is false when the
// kernel did not say.
func processExists(pid int) (exists, known bool) {
	err := syscall.Kill(pid, 0)
	switch {
	case errors.Is(err, syscall.ESRCH):
		return false, true
	case err != nil && !errors.Is(err, syscall.EPERM):
		return false, false
	}
	if state, _, ok := procStat(pid); ok && (state == 'Z' || state == 'X') {
		return false, true
	}
	return true, true
}

// processScope names this process's PID space: the kernel boot id and the
// PID namespace. A PID recorded under another scope (another machine, a
// reboot, another container) is never probed.
func processScope() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(boot)) + "/" + ns
}
