//go:build !linux

package bolt

// canRelease: no portable way to give back mapped pages here.
const canRelease = false

func dropPages(uintptr, int64) error { return nil }
