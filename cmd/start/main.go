// Command start builds openbot and runs it, saying so first. It is what the
// README's quick start runs (`go run ./cmd/start chat`): on a fresh machine the
// first build of ./cmd/openbot downloads its modules and compiles for a minute
// or two, and a plain `go run ./cmd/openbot` shows nothing of openbot's until
// that is done. start links only the standard library, so Go builds it within
// seconds; it prints one line, builds ./cmd/openbot with `go build` into the
// user's cache directory (a build that is up to date is skipped), and then
// replaces itself with that binary, which so gets the arguments, the terminal,
// the signals and the exit code.
package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
)

func main() {
	os.Stderr.WriteString("openbot: building ./cmd/openbot (the first build downloads modules and compiles for a minute or two)\n")
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	bin := filepath.Join(dir, "openbot", "openbot")
	goCmd := "go"
	if root := runtime.GOROOT(); root != "" {
		goCmd = filepath.Join(root, "bin", "go")
	}
	build := exec.Command(goCmd, "build", "-o", bin, "openbot/cmd/openbot")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fail("build failed: " + err.Error())
	}
	if err := syscall.Exec(bin, append([]string{bin}, os.Args[1:]...), os.Environ()); err != nil {
		fail("cannot run " + bin + ": " + err.Error())
	}
}

func fail(msg string) {
	os.Stderr.WriteString("openbot: " + msg + "\n")
	os.Exit(1)
}
