package tools

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"openbot/agents"
)

// publicAddr stands for a public internet host inside the test's own network
// namespace (TestShellNetwork): the address is put on that namespace's
// loopback, so no packet ever leaves the machine.
const publicAddr = "93.184.216.34"

// privateAddr stands for a host on the operator's private network.
const privateAddr = "10.77.0.1"

// TestShellNetwork runs its inner test in a network namespace of its own (a
// rig made with unshare and ip), where a "public" host, a private host and a
// loopback-only service listen. A bot with the network on reaches the public
// host over HTTP and HTTPS-style CONNECT through the egress proxy, and nothing
// else: not the loopback service, not the private host, not the public host
// around the proxy. A bot with the network off reaches nothing.
func TestShellNetwork(t *testing.T) {
	if os.Getenv("OPENBOT_INNER") == "netns" {
		shellNetwork(t)
		return
	}
	requireBwrap(t)
	for _, tool := range []string{"unshare", "ip", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed (CI=true): %v", tool, err)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`set -e; ip link set lo up; ip addr add %s/32 dev lo; ip addr add %s/32 dev lo; exec "$0" -test.run='^TestShellNetwork$' -test.v`, publicAddr, privateAddr)
	cmd := exec.Command("unshare", "--net", "--map-root-user", "sh", "-c", script, exe)
	cmd.Env = append(os.Environ(), "OPENBOT_INNER=netns")
	out, err := cmd.CombinedOutput()
	t.Logf("inner:\n%s", out)
	if err != nil || !strings.Contains(string(out), "--- PASS: TestShellNetwork") {
		t.Fatalf("inner test in its own network namespace failed: %v", err)
	}
}

// serve starts an HTTP server on addr that answers "hello from NAME".
func serve(t *testing.T, addr, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", name)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func shellNetwork(t *testing.T) {
	public := serve(t, publicAddr+":0", "public")
	private := serve(t, privateAddr+":0", "private")
	loop := serve(t, "127.0.0.1:0", "loopback")
	tl := builtins(t, Options{WorkspaceRoot: t.TempDir(), ShellNetwork: map[string]bool{"netbot": true}})
	run := func(bot, cmd string) string {
		t.Helper()
		got, err := tl["shell"].Call(context.Background(), agents.ToolCall{
			Args: []byte(fmt.Sprintf(`{"command":%q}`, cmd+"; exit 0")), Bot: botProfile(bot), Thread: 7,
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	curl := "curl -sS --max-time 5 "
	// Through the proxy: the public host over plain HTTP and over CONNECT.
	for _, c := range []string{curl + "http://" + public + "/", curl + "--proxytunnel http://" + public + "/"} {
		if got := run("netbot", c); !strings.Contains(got, "hello from public") {
			t.Errorf("network on, %s: no answer from the public host:\n%s", c, got)
		}
	}
	// Refused by the guard: the host's loopback and a private address, by
	// name of the proxy and through it explicitly.
	for _, target := range []string{private, loop} {
		for _, c := range []string{curl + "http://" + target + "/", curl + "-x http://" + egressPort + " --noproxy '' http://" + target + "/",
			curl + "-x http://" + egressPort + " --noproxy '' --proxytunnel http://" + target + "/"} {
			got := run("netbot", c)
			if strings.Contains(got, "hello from") {
				t.Errorf("network on reached %s with %s:\n%s", target, c, got)
			}
		}
	}
	if got := run("netbot", curl+"http://"+private+"/"); !strings.Contains(got, "egress refused") {
		t.Errorf("the refusal does not say why:\n%s", got)
	}
	// Around the proxy there is no route at all.
	if got := run("netbot", curl+"--noproxy '*' http://"+public+"/"); strings.Contains(got, "hello from") {
		t.Errorf("network on reached the public host around the proxy:\n%s", got)
	}
	// Network off: nothing, not even through a proxy.
	for _, c := range []string{curl + "http://" + public + "/", curl + "-x http://" + egressPort + " http://" + public + "/"} {
		if got := run("engineer", c); strings.Contains(got, "hello from") {
			t.Errorf("network off reached the public host with %s:\n%s", c, got)
		}
	}
}
