// Command breaker is run inside the shell sandbox by breaker_test.go: each
// subcommand tries one way past a limit or the seccomp filter and prints what
// happened. Built by the test (go build), copied into the workspace.
package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// int80 makes a system call through the 32-bit (i386) entry point.
func int80(nr, a, b, c uintptr) int32

func main() {
	if len(os.Args) < 2 {
		fmt.Println("want a subcommand")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "i386":
		i386()
	case "shm":
		shm(atoi(os.Args[2]))
	case "fallocate":
		falloc(os.Args[2], int64(atoi(os.Args[3]))<<20)
	case "deep":
		deep(atoi(os.Args[2]), atoi(os.Args[3]))
	case "unixflood":
		unixflood(os.Args[2], atoi(os.Args[3]))
	default:
		fmt.Println("unknown subcommand")
		os.Exit(2)
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

// i386 calls syscalls the filter denies, first natively, then through int 0x80.
func i386() {
	r1, _, e := unix.Syscall(unix.SYS_KEYCTL, 0, ^uintptr(2), 1) // KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, create
	fmt.Printf("native keyctl: %d %v\n", int64(r1), e)
	fmt.Printf("i386 keyctl: %d\n", int80(288, 0, ^uintptr(2), 1))
	r1, _, e = unix.Syscall(unix.SYS_USERFAULTFD, 1, 0, 0) // UFFD_USER_MODE_ONLY
	fmt.Printf("native userfaultfd: %d %v\n", int64(r1), e)
	fmt.Printf("i386 userfaultfd: %d\n", int80(374, 1, 0, 0))
	// io_uring_setup(4, params): params must lie below 4 GiB for the 32-bit call.
	p, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_32BIT)
	if err != nil {
		fmt.Println("mmap:", err)
		return
	}
	r1, _, e = unix.Syscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafePointer(p)), 0)
	fmt.Printf("native io_uring_setup: %d %v\n", int64(r1), e)
	clear(p)
	fmt.Printf("i386 io_uring_setup: %d\n", int80(425, 4, uintptr(unsafePointer(p)), 0))
	r1, _, e = unix.Syscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0)
	fmt.Printf("native ptrace: %d %v\n", int64(r1), e)
	fmt.Printf("i386 ptrace: %d\n", int80(26, 0, 0, 0))
}

// shm maps mib MiB of shared anonymous memory and touches every page.
func shm(mib int) {
	n := mib << 20
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANON)
	if err != nil {
		fmt.Println("mmap:", err)
		os.Exit(1)
	}
	for i := 0; i < n; i += 4096 {
		b[i] = 1
	}
	st, _ := os.ReadFile("/proc/self/status")
	fmt.Printf("touched %d MiB of MAP_SHARED memory\n%s", mib, st)
}

// falloc reserves n bytes of disk for name without changing its size.
func falloc(name string, n int64) {
	f, err := os.Create(name)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, n); err != nil {
		fmt.Println("fallocate:", err)
		os.Exit(1)
	}
	var st unix.Stat_t
	_ = unix.Fstat(int(f.Fd()), &st)
	fmt.Printf("fallocated: size %d, on disk %d bytes\n", st.Size, st.Blocks*512)
}

// deep makes a chain of directories whose path is longer than PATH_MAX
// (moving into each by a relative name) and writes files MiB each there.
func deep(files, mib int) {
	name := make([]byte, 250)
	for i := range name {
		name[i] = 'd'
	}
	for range 20 {
		if err := os.Mkdir(string(name), 0o755); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		if err := os.Chdir(string(name)); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	}
	buf := make([]byte, mib<<20)
	for i := range files {
		if err := os.WriteFile("f"+strconv.Itoa(i), buf, 0o644); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	}
	time.Sleep(time.Second) // ten checks of the quota watcher
	fmt.Printf("wrote %d MiB below a path longer than PATH_MAX\n", files*mib)
}

// unixflood opens n connections to the unix socket path and holds them.
func unixflood(path string, n int) {
	var conns []net.Conn
	for i := range n {
		c, err := net.Dial("unix", path)
		if err != nil {
			fmt.Printf("connection %d: %v\n", i, err)
			break
		}
		conns = append(conns, c)
	}
	fmt.Printf("holding %d connections\n", len(conns))
	os.Stdout.Sync()
	time.Sleep(3 * time.Second)
	_ = syscall.Getpid()
}
