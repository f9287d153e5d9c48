package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The real openbot binary as a child process, for the tests that kill it
// (soak_rig_test.go, cluster_test.go, ingress_failover_e2e_test.go).

// built is the openbot binary the package's tests share: built once by the
// first test that asks, removed by TestMain.
var built struct {
	once     sync.Once
	dir, bin string
	out      []byte
	err      error
}

// buildOpenbot returns the path of the openbot binary, building it on first
// use; it skips t when there is no go tool.
func buildOpenbot(t testing.TB) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to build the openbot binary:", err)
	}
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "openbot-e2e-bin-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "openbot")
		built.out, built.err = exec.Command(gobin, "build", "-o", built.bin, "openbot/cmd/openbot").CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("go build openbot/cmd/openbot: %v\n%s", built.err, built.out)
	}
	return built.bin
}

// removeBuilt removes the shared binary, if one was built.
func removeBuilt() {
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
}

// child is a running `openbot serve`; its output is appended to a log file.
type child struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once it exited and its log is closed
}

// startServe runs `bin serve --config cfg --log-level level` with env added to
// this process's environment (and the admin token unset), its output appended
// to logPath. It dies with the test process.
func startServe(t testing.TB, bin, cfg, level, logPath string, env ...string) *child {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", cfg, "--log-level", level)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(append(os.Environ(), "OPENBOT_ADMIN_TOKEN="), env...)
	cmd.SysProcAttr = dieWithParent()
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	c := &child{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(c.exited) }() // joined by signal
	return c
}

// signal sends sig and waits for the child to be gone, sending SIGKILL after
// soakStopFor.
func (c *child) signal(sig syscall.Signal) {
	_ = c.cmd.Process.Signal(sig)
	select {
	case <-c.exited:
	case <-time.After(soakStopFor):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}
