package config

import (
	"strings"
	"testing"

	"openbot/core"
)

func TestPolicies(t *testing.T) {
	ok := minimal + `
owners: ["telegram:1"]
telegram:
  - name: main
    bot: engineer
    token: "1:x"
policies:
  - account: telegram/main
    channel: "*"
    members: paired
  - account: telegram/main
    channel: "-100123"
    tools_removed: [shell]
    approvers: ["telegram:2"]
    mode: open
`
	cfg := parseOK(t, ok, nil)
	pols := cfg.CorePolicies()
	if p := pols[core.PolicyKey("telegram/main", "-100123")]; len(p.ToolsRemoved) != 1 || p.Approvers[0] != "telegram:2" || p.Mode != core.ModeOpen {
		t.Errorf("policies = %+v", pols)
	}
	if p := pols[core.PolicyKey("telegram/main", "*")]; p.Members != core.MembersPaired {
		t.Errorf("default = %+v", p)
	}
	bad := minimal + `
policies:
  - account: slack/none
    channel: ""
    members: some
    approvers: ["bob"]
  - account: slack/none
    channel: C1
    mode: opne
`
	var got []string
	for _, e := range parseErrs(t, bad) {
		got = append(got, e.Path+": "+e.Msg)
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{"policies[0].account", "policies[0].channel", "members \"some\"", "policies[0].approvers[0]", "policies[1]: bad policy: mode \"opne\" is not mention_only, open or disabled"} {
		if !strings.Contains(all, want) {
			t.Errorf("errors %s\nwant one about %s", all, want)
		}
	}
}

// TestPolicyBudget: a policy's budget loads in micro-units; a negative one is
// an error naming its field.
func TestPolicyBudget(t *testing.T) {
	ok := minimal + `
telegram:
  - name: main
    bot: engineer
    token: "1:x"
policies:
  - account: telegram/main
    channel: "-100123"
    budget: {tokens: 50000, cost: 2.5}
`
	p := parseOK(t, ok, nil).CorePolicies()[core.PolicyKey("telegram/main", "-100123")]
	if p.Budget != (core.Limit{Tokens: 50000, CostMicros: 2_500_000}) {
		t.Errorf("budget = %+v", p.Budget)
	}
	bad := minimal + `
telegram:
  - name: main
    bot: engineer
    token: "1:x"
policies:
  - account: telegram/main
    channel: "*"
    budget: {tokens: -1, cost: -2}
`
	var got []string
	for _, e := range parseErrs(t, bad) {
		got = append(got, e.Path+": "+e.Msg)
	}
	want := []string{"policies[0].budget.tokens: must not be negative, got -1", "policies[0].budget.cost: must not be negative, got -2"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors %q, want %q", got, want)
	}
}
