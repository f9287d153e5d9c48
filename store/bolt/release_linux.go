//go:build linux

package bolt

import "syscall"

// canRelease: Linux gives back mapped pages with madvise(MADV_DONTNEED).
const canRelease = true

// dropPages tells the kernel this process no longer needs the pages of the shared,
// read-only file mapping at addr (size bytes, within the mapping): they leave the
// RSS and a later read faults them in again from the page cache or the file.
func dropPages(addr uintptr, size int64) error {
	if addr == 0 || size <= 0 {
		return nil
	}
	if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, addr, uintptr(size), syscall.MADV_DONTNEED); errno != 0 {
		return errno
	}
	return nil
}
