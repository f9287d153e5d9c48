//go:build !linux

package main

import "os"

// dataSync flushes f as bbolt's commit does where there is no fdatasync.
func dataSync(f *os.File) error { return f.Sync() }
