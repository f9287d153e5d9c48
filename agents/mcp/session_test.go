package mcp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// forgetfulServer is a streamable HTTP MCP server on the 2025-06-18 protocol
// (sessions in the Mcp-Session-Id header) that can forget its sessions, as a
// server does when it restarts: it then answers 404 for the old session id.
type forgetfulServer struct {
	mu       sync.Mutex
	sessions int    // sessions started (initialize calls)
	current  string // the session id it knows
	calls    int    // tools/call requests it ran
	refused  int    // requests answered 404
}

func (f *forgetfulServer) forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.current = ""
}

func (f *forgetfulServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var result any
	switch req.Method {
	case "initialize":
		f.sessions++
		f.current = fmt.Sprintf("session-%d", f.sessions)
		w.Header().Set("Mcp-Session-Id", f.current)
		result = map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo": map[string]any{"name": "forgetful", "version": "1"}}
	default:
		if r.Header.Get("Mcp-Session-Id") != f.current || f.current == "" {
			f.refused++
			http.Error(w, "unknown session", http.StatusNotFound)
			return
		}
		switch req.Method {
		case "tools/list":
			result = map[string]any{"tools": []any{map[string]any{"name": "ping", "description": "Counts pings",
				"inputSchema": map[string]any{"type": "object"}}}}
		case "tools/call":
			f.calls++
			result = map[string]any{"content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("pong %d", f.calls)}}}
		default: // notifications
			w.WriteHeader(http.StatusAccepted)
			return
		}
	}
	if len(req.ID) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
}

// A server that no longer knows the session answers 404: the session is
// re-initialized at once (not at the next health check) and the call is sent
// once more, so it runs exactly once.
func TestForgottenHTTPSessionReinitializedAtOnce(t *testing.T) {
	f := &forgetfulServer{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	h := start(t, Options{
		Servers: []ServerConfig{{Name: "web", URL: srv.URL + "/mcp"}},
		// Far longer than the test: only the 404 can bring the new session.
		HealthInterval: time.Hour,
		CallTimeout:    20 * time.Second,
	})
	if got, err := callTool(t, h.tool("web", "web__ping"), nil); err != nil || got != "pong 1" {
		t.Fatalf("first call: %q, %v", got, err)
	}
	f.forget()
	got, err := callTool(t, h.tool("web", "web__ping"), nil)
	if err != nil || got != "pong 2" {
		t.Fatalf("call after the server forgot the session: %q, %v\nlog:\n%s", got, err, h.logs.String())
	}
	f.mu.Lock()
	sessions, calls, refused := f.sessions, f.calls, f.refused
	f.mu.Unlock()
	if sessions != 2 || calls != 2 || refused < 1 {
		t.Fatalf("sessions %d, calls run %d, refused %d; want 2 sessions and each call run once", sessions, calls, refused)
	}
	h.waitFor("tools back", func() bool { return h.tools["web"]["web__ping"] != nil })
	for _, st := range h.m.Status() {
		if st.State != "running" || st.Reason != "" {
			t.Fatalf("status after re-initializing = %+v, want running with no failure", st)
		}
	}
}
