package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The real openbot binary as a child process, for the tests that kill it
// (soak_rig_test.go, cluster_test.go, ingress_failover_e2e_test.go).

// buildOpenbot builds the openbot binary into dir and returns its path; it
// skips t when there is no go tool.
func buildOpenbot(t testing.TB, dir string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to build the openbot binary:", err)
	}
	bin := filepath.Join(dir, "openbot")
	if out, err := exec.Command(gobin, "build", "-o", bin, "openbot/cmd/openbot").CombinedOutput(); err != nil {
		t.Fatalf("go build openbot/cmd/openbot: %v\n%s", err, out)
	}
	return bin
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
