package main

import (
	"io"
	"strings"
	"testing"

	"openbot/config"
)

// TestDoctorPeople: doctor warns about no owner, a bot whose gated tools nobody
// can approve, and a group account open to everyone with such a bot; an owner,
// an approver and a members policy each clear their warning.
func TestDoctorPeople(t *testing.T) {
	shellBot := config.Bot{Handle: "engineer", Tools: []string{"shell"}, ApprovalTools: []config.ApprovalTool{{Tool: "shell"}}}
	base := func() *config.Config {
		return &config.Config{Bots: []config.Bot{shellBot}, Telegram: []config.Telegram{{Name: "main", Bot: "engineer"}}}
	}
	warnings := func(cfg *config.Config) string {
		d := &doctor{cfg: cfg, out: io.Discard}
		d.people()
		var out []string
		for _, l := range d.lines {
			if l.Status == checkWarn {
				out = append(out, l.Name+": "+l.Detail+" / "+l.Fix)
			}
		}
		return strings.Join(out, "\n")
	}
	got := warnings(base())
	for _, want := range []string{"owners: no owner", "approvers of @engineer: nobody can approve its shell calls", "groups of telegram/main: anyone in a group", "openbot owner add"} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings:\n%s\nwant %q", got, want)
		}
	}
	cfg := base()
	cfg.Owners = []string{"telegram:1"}
	cfg.Policies = []config.Policy{{Account: "telegram/main", Channel: "*", Members: "paired"}}
	if got := warnings(cfg); got != "" {
		t.Errorf("with an owner and a members policy: %s", got)
	}
	cfg = base()
	cfg.Approvers = []string{"telegram:2"}
	if got := warnings(cfg); strings.Contains(got, "approvers of") || !strings.Contains(got, "no owner") {
		t.Errorf("with an approver: %s", got)
	}
	cfg = base()
	cfg.Admin.Token, cfg.Admin.Identity = "0123456789abcdef0123", config.DefaultOperator
	if got := warnings(cfg); strings.Contains(got, "no owner") || strings.Contains(got, "approvers of") {
		t.Errorf("with the dashboard's operator as owner: %s", got)
	}
}
