package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"openbot/agents/openaitest"
)

// A failed MCP server is shown in the terminal in `chat` (where the log goes to
// a file), and a run of a bot that uses it is told in the thread.
func TestChatShowsFailedMCPServer(t *testing.T) {
	llm := openaitest.New(t)
	llm.Enqueue(openaitest.Text("Hello without my tools."))
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(`
llm:
  default: {base_url: "${OPENAI_BASE_URL}", api_key: k, model: m}
store: {path: `+filepath.Join(dir, "data", "openbot.db")+`}
workspace: `+filepath.Join(dir, "ws")+`
http: {listen: "127.0.0.1:0"}
mcp_servers:
  - {name: broken, command: `+filepath.Join(dir, "no-such-mcp-server")+`}
bots:
  - {handle: chief_of_staff, tools: [broken]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runFor(t, []string{"chat", "--config", path}, strings.NewReader("hello\n"), map[string]string{"OPENAI_BASE_URL": llm.URL()})
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		"[system] MCP server broken is not available: its command was not found. Its tools are missing until it starts",
		"[system] MCP server broken is not available: its command was not found. @chief_of_staff goes on without its tools.",
		"[chief_of_staff] Hello without my tools.",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("terminal lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, dir) {
		t.Errorf("terminal shows the server's path:\n%s", r.stdout)
	}
}
