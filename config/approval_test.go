package config

import (
	"slices"
	"strings"
	"testing"
)

// TestApprovalToolsEntries: an approval_tools entry is a tool name or a mapping
// naming that tool's approvers; mistakes are reported at their field path.
func TestApprovalToolsEntries(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	good := `
llm: {default: {base_url: "http://127.0.0.1:1/v1", model: m}}
bots:
  - handle: ops
    approval_tools:
      - http_fetch
      - {tool: shell, approvers: ["slack:T1:U1", "console:you"]}
      - tool: gh__*
`
	c, err := Parse([]byte(good), none)
	if err != nil {
		t.Fatal(err)
	}
	got := c.Bots[0].ApprovalTools
	if !slices.Equal(ApprovalToolNames(got), []string{"http_fetch", "shell", "gh__*"}) {
		t.Fatalf("approval_tools = %+v", got)
	}
	if !slices.Equal(got[1].Approvers, []string{"slack:T1:U1", "console:you"}) || got[0].Approvers != nil || got[2].Approvers != nil {
		t.Errorf("approvers = %+v", got)
	}

	bad := `
llm: {default: {base_url: "http://127.0.0.1:1/v1", model: m}}
bots:
  - handle: ops
    approval_tools:
      - {tool: shell, approvers: ["bogus"]}
      - {tool: shell}
      - {tool: deploy, aprovers: ["console:you"]}
      - [nested]
      - tool: ""
        approvers: console:you
      - tool: ""
`
	_, err = Parse([]byte(bad), none)
	if err == nil {
		t.Fatal("want errors")
	}
	msg := err.Error()
	for _, want := range []string{
		`bots[0].approval_tools[0].approvers[0]: "bogus" is not an actor id`,
		`bots[0].approval_tools[1]: "shell" is listed twice`,
		`bots[0].approval_tools[2].aprovers: unknown key "aprovers" (line 8)`,
		`bots[0].approval_tools[3]: an approval_tools entry is a tool name or {tool: NAME, approvers: [...]} (line 9)`,
		`bots[0].approval_tools[4].approvers: must be a list of actor ids`,
		`bots[0].approval_tools[5].tool: must be set`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("errors lack %q:\n%s", want, msg)
		}
	}
}
