package telegram

import (
	"strings"
	"testing"

	"openbot/adapters/telegram/telegramtest"
)

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
	release := e.srv.Hold("getUpdates")
	defer release()
	// The poller marked itself down before backing off and calling again; that
	// call waits at the fake.
	e.waitCalls(t, "getUpdates", 3)
	why := a.IngressDown()
	if why == "" {
		t.Fatal("IngressDown is empty while getUpdates fails")
	}
	if strings.Contains(why, botToken) {
		t.Fatalf("IngressDown names the token: %q", why)
	}
	release()
	e.waitCalls(t, "getUpdates", 4) // the third was answered: up before the next poll
	if why := a.IngressDown(); why != "" {
		t.Fatalf("IngressDown = %q after getUpdates answered again", why)
	}
}
