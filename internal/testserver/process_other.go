//go:build !linux

package testserver

import "syscall"

// sysProcAttr has no parent-death signal outside Linux; the t.Cleanup stop
// is the only guard there.
func sysProcAttr() *syscall.SysProcAttr { return nil }
