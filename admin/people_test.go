package admin_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"openbot/admin"
	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/internal/runtest"
)

// peopleAPI serves the API over a real engine whose owners are given, as
// identity.
func peopleAPI(t *testing.T, identity core.ActorID, owners ...core.ActorID) (*core.Engine, string) {
	t.Helper()
	ag, err := agents.New(agents.Options{Providers: map[string]agents.Provider{"default": {BaseURL: openaitest.New(t).URL(), Model: "m"}}, Registry: agents.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	eng, err := core.New(core.Options{Store: st, Agent: ag, Bots: []core.BotProfile{{Handle: "eng"}}, ShutdownGrace: 2 * time.Second, Owners: owners})
	if err != nil {
		t.Fatal(err)
	}
	runtest.Start(t, eng.Run)
	<-eng.Ready()
	hs := serveAPI(t, admin.Options{Store: st, Answerer: eng, People: eng, Identity: identity})
	return eng, hs.URL + "/api/v1"
}

func del(t *testing.T, url string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestPeopleAPI: the operator (an owner) lists pending codes, pairs one, sees
// the person, and revokes them; a wrong or reused code is 404, and a console
// identity that is no owner gets 403 with nothing changed.
func TestPeopleAPI(t *testing.T) {
	ctx := context.Background()
	eng, api := peopleAPI(t, "console:operator", "console:operator")
	ad, _ := eng.Admit(ctx, core.Admission{Account: "telegram/main", Actor: "telegram:7", Name: "Tom"})
	code := regexp.MustCompile(`/pair ([A-Z0-9]{8}) `).FindStringSubmatch(ad.Reply)[1]
	var view admin.PeopleView
	getJSON(t, api+"/people", http.StatusOK, &view)
	if len(view.Pending) != 1 || view.Pending[0].Code != code || len(view.People) != 0 {
		t.Fatalf("people %+v", view)
	}
	if code, body := post(t, api+"/people/pair", `{"code":"ZZZZ9999"}`); code != http.StatusNotFound || !strings.Contains(body, "not valid") {
		t.Fatalf("wrong code: %d %s", code, body)
	}
	if got, body := post(t, api+"/people/pair", `{"code":"`+code+`"}`); got != http.StatusOK || !strings.Contains(body, `"telegram:7"`) {
		t.Fatalf("pair: %d %s", got, body)
	}
	if got, _ := post(t, api+"/people/pair", `{"code":"`+code+`"}`); got != http.StatusNotFound {
		t.Fatalf("reused code: %d", got)
	}
	getJSON(t, api+"/people", http.StatusOK, &view)
	if len(view.People) != 1 || view.People[0].Identities[0] != "telegram:7" || len(view.Pending) != 0 {
		t.Fatalf("people after pairing %+v", view)
	}
	if got := del(t, api+"/people/"+view.People[0].ID); got != http.StatusOK {
		t.Fatalf("revoke: %d", got)
	}
	if got := del(t, api+"/people/p99"); got != http.StatusNotFound {
		t.Fatalf("revoke unknown: %d", got)
	}
	if a, _ := eng.Admit(ctx, core.Admission{Account: "telegram/main", Actor: "telegram:7"}); a.Allow {
		t.Fatal("a revoked person is let in")
	}

	eng2, api2 := peopleAPI(t, "console:ops") // not an owner
	ad, _ = eng2.Admit(ctx, core.Admission{Account: "telegram/main", Actor: "telegram:8"})
	code = regexp.MustCompile(`/pair ([A-Z0-9]{8}) `).FindStringSubmatch(ad.Reply)[1]
	if got, body := post(t, api2+"/people/pair", `{"code":"`+code+`"}`); got != http.StatusForbidden || !strings.Contains(body, "owner") {
		t.Fatalf("pair by a non-owner: %d %s", got, body)
	}
	if _, pending, _ := eng2.People(ctx); len(pending) != 1 {
		t.Fatalf("a refused pairing changed the codes: %+v", pending)
	}
	if got, body := post(t, api2+"/people/owners", `{"id":"telegram:8","name":"Tess"}`); got != http.StatusOK || !strings.Contains(body, `"owner"`) {
		t.Fatalf("add owner: %d %s", got, body)
	}
	if ok, _ := eng2.IsOwner(ctx, "telegram:8"); !ok {
		t.Fatal("the added owner is not one")
	}
}

// TestPolicyAPI: an owner sets a channel's policy and removes it; a bad one is
// 400 and a console that is no owner gets 403, neither storing anything;
// a non-owner cannot remove one, and removing where nothing is stored is 404.
func TestPolicyAPI(t *testing.T) {
	do := func(url, method, body string) (int, string) {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		return runtest.Do(t, req)
	}
	put := func(url, body string) (int, string) { return do(url, http.MethodPut, body) }
	_, api := peopleAPI(t, "console:operator", "console:operator")
	if code, body := put(api+"/policies?account=slack/acme&channel=T1:C1", `{"mode":"sometimes"}`); code != http.StatusBadRequest {
		t.Fatalf("bad policy: %d %s", code, body)
	}
	if code, body := put(api+"/policies?account=slack/acme&channel=T1:C1", `{"tools_removed":["shell"],"members":"paired"}`); code != http.StatusOK {
		t.Fatalf("set: %d %s", code, body)
	}
	var pols map[string]core.ChannelPolicy
	getJSON(t, api+"/policies", http.StatusOK, &pols)
	if p := pols["slack/acme T1:C1"]; p.Members != "paired" || p.SetBy != "console:operator" {
		t.Fatalf("policies %+v", pols)
	}
	_, api2 := peopleAPI(t, "console:ops")
	if code, _ := put(api2+"/policies?account=slack/acme&channel=T1:C1", `{"tools_removed":["shell"]}`); code != http.StatusForbidden {
		t.Fatalf("non-owner: %d", code)
	}
	pols = nil
	getJSON(t, api2+"/policies", http.StatusOK, &pols)
	if len(pols) != 0 {
		t.Fatalf("a refused policy was stored: %+v", pols)
	}
	if code, body := do(api2+"/policies?account=slack/acme&channel=T1:C1", http.MethodDelete, ""); code != http.StatusForbidden {
		t.Fatalf("non-owner removes: %d %s", code, body)
	}

	// Removing: a non-owner is refused, an owner removes it, a second time is 404.
	eng3, api3 := peopleAPI(t, "console:operator", "console:operator")
	if code, body := put(api3+"/policies?account=slack/acme&channel=T1:C1", `{"mode":"open"}`); code != http.StatusOK {
		t.Fatalf("set: %d %s", code, body)
	}
	if code, body := do(api3+"/policies?account=slack/acme", http.MethodDelete, ""); code != http.StatusBadRequest {
		t.Fatalf("remove without a channel: %d %s", code, body)
	}
	if code, body := do(api3+"/policies?account=slack/acme&channel=T1:C1", http.MethodDelete, ""); code != http.StatusOK || !strings.Contains(body, `"mode":"open"`) {
		t.Fatalf("remove: %d %s", code, body)
	}
	if pols, _ := eng3.Policies(context.Background()); len(pols) != 0 {
		t.Fatalf("removed policy still stored: %+v", pols)
	}
	if code, _ := do(api3+"/policies?account=slack/acme&channel=T1:C1", http.MethodDelete, ""); code != http.StatusNotFound {
		t.Fatalf("remove twice: %d", code)
	}
}
