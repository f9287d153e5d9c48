package web_test

import (
	"context"
	"openbot/internal/browsertest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"openbot/core"
)

// TestPeoplePageLetsAPersonIn: an unknown person's DM gets a pairing code; the
// People page lists it, and the operator (an owner) lets them in with a
// confirming second click. The store then has them (as an owner: the first
// person paired while no chat platform has an owner becomes one) and their
// next DM is admitted; removing them from the page takes that back.
func TestPeoplePageLetsAPersonIn(t *testing.T) {
	const ops core.ActorID = "console:ops"
	tm := startTeamAs(t, people{identity: ops, name: "Operator", owners: []core.ActorID{ops}})
	ctx := context.Background()
	dm := core.Admission{Account: "telegram/main", Actor: "telegram:777", Name: "Mia"}
	got, err := tm.eng.Admit(ctx, dm)
	if err != nil || got.Allow {
		t.Fatalf("an unknown DM: %+v, %v; want no entry and a code", got, err)
	}
	var code string
	_, pending, err := tm.eng.People(ctx)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending codes = %v (%v), want one", pending, err)
	}
	code = pending[0].Code

	bctx := browser(t)
	signIn(t, bctx, tm)
	row := `tr[data-code="` + code + `"]`
	run(t, bctx, "let Mia in from the People page",
		browsertest.Click(`nav a[data-nav="people"]`),
		chromedp.WaitVisible(chromedp.CSS(row+` button[data-act="pair"]`)),
		browsertest.Click(row+` button[data-act="pair"]`),
		chromedp.WaitVisible(chromedp.CSS(row+` button.danger[data-act="pair"]`)),
		browsertest.Click(row+` button[data-act="pair"]`),
		chromedp.WaitNotPresent(chromedp.CSS(row)),
	)
	waitText(t, bctx, "#flash", "Mia is in, as owner")
	if got, err := tm.eng.Admit(ctx, dm); err != nil || !got.Allow {
		t.Fatalf("Mia's next DM: %+v, %v; want it admitted", got, err)
	}
	people, _, err := tm.eng.People(ctx)
	if err != nil || len(people) != 1 || people[0].Role != core.RoleOwner {
		t.Fatalf("people = %+v (%v), want Mia, the first paired, as an owner", people, err)
	}
	text := value(t, bctx, "the people table", browsertest.Text(`tr[data-person]`))
	if !strings.Contains(text, "Mia") || !strings.Contains(text, "telegram:777") {
		t.Errorf("the people row = %q, want Mia and her id", text)
	}
	prow := `tr[data-person="` + people[0].ID + `"]`
	run(t, bctx, "remove Mia",
		browsertest.Click(prow+` button[data-act="revoke"]`),
		chromedp.WaitVisible(chromedp.CSS(prow+` button.danger[data-act="revoke"]`)),
		browsertest.Click(prow+` button[data-act="revoke"]`),
		chromedp.WaitNotPresent(chromedp.CSS(prow)),
	)
	if got, err := tm.eng.Admit(ctx, dm); err != nil || got.Allow {
		t.Errorf("Mia's DM after removal: %+v, %v; want no entry", got, err)
	}
}
