//go:build !linux

package e2e

import "syscall"

// dieWithParent has no portable equivalent off Linux: the cleanup of the soak
// test kills its child.
func dieWithParent() *syscall.SysProcAttr { return nil }
