package agents_test

import (
	"testing"

	"openbot/agents"
	"openbot/agents/openaitest"
)

// A reflection uses the agent current at that time (ReflectorOptions.Current):
// after a reload changes the llm profile's model, the next reflection calls
// the new model and its ledger entry names it.
func TestReflectionUsesReloadedProfile(t *testing.T) {
	srv := openaitest.New(t)
	r := newMemRig(t, srv, "", false, memBot)
	r.say("console:a", "@engineer remember the deploy window is friday")
	reloaded, err := agents.New(agents.Options{Providers: map[string]agents.Provider{"default": {BaseURL: srv.URL(), Model: "m2"}}})
	if err != nil {
		t.Fatal(err)
	}
	r.cur.Store(reloaded)
	r.reflect()
	refl := reflections(srv)
	if len(refl) != 1 {
		t.Fatalf("%d reflection calls, want 1", len(refl))
	}
	if got := refl[0].Body.Model; got != "m2" {
		t.Errorf("reflection called model %q, want the reloaded m2", got)
	}
	es := ledger(t, r.st)
	if last := es[len(es)-1]; last.Model != "m2" {
		t.Errorf("reflection ledger entry names model %q, want m2", last.Model)
	}
}
