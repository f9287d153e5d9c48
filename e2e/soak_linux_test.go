//go:build linux

package e2e

import "syscall"

// dieWithParent makes the kernel SIGKILL a soak child when the test process
// dies, so a crashed or timed-out soak leaves no openbot serving behind.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
