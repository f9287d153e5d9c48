package telegram

import (
	"strings"
	"testing"
	"time"

	"openbot/adapters/telegram/telegramtest"
)

// waitDown polls a.IngressDown until want(reason) holds.
func waitDown(t *testing.T, a *Adapter, want func(string) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !want(a.IngressDown()) {
		if time.Now().After(deadline) {
			t.Fatalf("IngressDown = %q, want %s", a.IngressDown(), what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestIngressDownWhilePollingFails: readiness is not latched by the first
// getUpdates: while getUpdates fails and the poller backs off the ingress is
// down (with a reason that holds no token), and the next answer brings it up.
func TestIngressDownWhilePollingFails(t *testing.T) {
	e := newEnv(t)
	e.srv.FailAfter("getUpdates", 1, telegramtest.Error{Code: 502, Description: "Bad Gateway"})
	a := e.adapter(t, e.options())
	run(t, a)
	<-a.IngressReady()
	e.waitCalls(t, "getUpdates", 2) // the second one fails
	waitDown(t, a, func(s string) bool { return s != "" }, "down while getUpdates fails")
	if why := a.IngressDown(); strings.Contains(why, botToken) {
		t.Fatalf("IngressDown names the token: %q", why)
	}
	e.waitCalls(t, "getUpdates", 3) // after the backoff, it answers again
	waitDown(t, a, func(s string) bool { return s == "" }, "up again")
}
