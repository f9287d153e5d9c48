package main

import (
	"os"
	"syscall"
)

// dataSync flushes f's data as bbolt's commit does on Linux (fdatasync: the
// file's data and the metadata needed to read it, not its times).
func dataSync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
