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
`
	cfg := parseOK(t, ok, nil)
	pols := cfg.CorePolicies()
	if p := pols[core.PolicyKey("telegram/main", "-100123")]; len(p.ToolsRemoved) != 1 || p.Approvers[0] != "telegram:2" {
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
`
	var got []string
	for _, e := range parseErrs(t, bad) {
		got = append(got, e.Path+": "+e.Msg)
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{"policies[0].account", "policies[0].channel", "members \"some\"", "policies[0].approvers[0]"} {
		if !strings.Contains(all, want) {
			t.Errorf("errors %s\nwant one about %s", all, want)
		}
	}
}
