package testserver

import "syscall"

// sysProcAttr makes the kernel kill the server if the test binary dies
// without running its cleanups (a panic, a -timeout, a SIGKILL).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
