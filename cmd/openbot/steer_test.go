package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"openbot/admin"
)

// TestSteerRefusesAnotherStore: `openbot pause` first checks that the server
// answering at http.listen serves this config's store, as the inspect commands
// do; another deployment there is not steered, and the message names its store.
func TestSteerRefusesAnotherStore(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
			w.Write([]byte(`{}`))
			return
		}
		json.NewEncoder(w).Encode(admin.Info{Store: "/elsewhere/openbot.db", Events: "0.0.0"})
	}))
	defer srv.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	text := `
llm:
  default: {base_url: "http://127.0.0.1:1/v1", api_key: k, model: m}
store: {path: ` + filepath.Join(dir, "data", "openbot.db") + `}
workspace: ` + filepath.Join(dir, "ws") + `
http: {listen: "` + srv.Listener.Addr().String() + `"}
admin: {token: steer-test-token-0123456789}
bots:
  - {handle: engineer}
`
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"pause", "engineer", "--config", path}, nil, &out, &errOut, envOf(nil))
	if code != exitFail || !strings.Contains(errOut.String(), "/elsewhere/openbot.db") {
		t.Fatalf("openbot pause against another store = %d %q %q, want a refusal naming it", code, out.String(), errOut.String())
	}
	if n := posts.Load(); n != 0 {
		t.Fatalf("%d steering requests reached the other deployment", n)
	}
}
