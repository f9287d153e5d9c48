package main

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"openbot/agents/openaitest"
)

// TestRedactHandler: whatever a package logs (message, string, error, Stringer,
// group and WithAttrs values) reaches the output with URL credentials, secret
// query parameters and configured secret values replaced.
func TestRedactHandler(t *testing.T) {
	var buf bytes.Buffer
	// No time: a timestamp such as 2026-12-01T20:13 holds "T2" itself.
	noTime := &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}
	log := slog.New(newRedactHandler(slog.NewTextHandler(&buf, noTime), []string{"xoxb-literal-secret"}))
	log = log.With("base", "http://u:pw0rd@h/v1?api-key=K1")
	log.Warn("post http://h/api?token=T2 failed",
		"err", errors.New(`Post "http://mcpuser:mcppass@127.0.0.1:1/mcp?access_token=tok123": refused`),
		"tok", "xoxb-literal-secret", "n", 3,
		slog.Group("req", "url", "https://h/x?sig=S3"))
	out := buf.String()
	for _, secret := range []string{"pw0rd", "K1", "T2", "mcppass", "tok123", "xoxb-literal-secret", "S3"} {
		if strings.Contains(out, secret) {
			t.Errorf("%q leaked: %s", secret, out)
		}
	}
	for _, kept := range []string{"127.0.0.1:1/mcp", "n=3", "http://h/api"} {
		if !strings.Contains(out, kept) {
			t.Errorf("%q lost: %s", kept, out)
		}
	}
}

// TestChatLogKeepsMCPCredentialsOut: an MCP server URL with userinfo and an
// access_token query, and a header secret, never reach openbot.log when the
// server cannot be reached and the failure is logged.
func TestChatLogKeepsMCPCredentialsOut(t *testing.T) {
	llm := openaitest.New(t)
	dir := t.TempDir()
	cfg := exampleConfig(t, dir)
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(`
mcp_servers:
  - name: docs
    url: http://mcpuser:mcppass@127.0.0.1:1/mcp?access_token=tok123secret
    headers: {Authorization: "Bearer hdrsecret12345"}
`)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := runFor(t, []string{"chat", "--config", cfg}, strings.NewReader("hello\n"),
		map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENAI_API_KEY": "sk-literal-api-key-123"})
	logData, err := os.ReadFile(dir + "/data/openbot.log")
	if err != nil {
		t.Fatal(err)
	}
	all := r.stdout + r.stderr + string(logData)
	for _, secret := range []string{"mcppass", "tok123secret", "hdrsecret12345", "sk-literal-api-key-123"} {
		if strings.Contains(all, secret) {
			t.Errorf("%q leaked:\nstderr %s\nlog %s", secret, r.stderr, logData)
		}
	}
	if !strings.Contains(string(logData), "docs") {
		t.Errorf("the log does not mention the failed MCP server:\n%s", logData)
	}
}
