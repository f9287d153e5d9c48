package mcp

import (
	"context"
	"testing"
)

// Probe starts a server once and lists its tools; a server that exits at start
// is reported with the reason in words and the full error.
func TestProbe(t *testing.T) {
	ok := Probe(context.Background(), stdioServer(t, "probe", "ok", nil), Options{})
	if ok.Err != nil || len(ok.Tools) == 0 {
		t.Fatalf("ok server: %+v", ok)
	}
	bad := Probe(context.Background(), stdioServer(t, "probe", "exit", nil), Options{})
	if bad.Err == nil || bad.Reason == "" {
		t.Fatalf("exiting server: %+v", bad)
	}
}
