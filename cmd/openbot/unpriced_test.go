package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnpricedCostBudget: a cost budget over a bot whose chain has an
// unpriced model stops serve, chat, doctor and config check with the model
// named; with cost.unpriced: warn each goes on and says it.
func TestUnpricedCostBudget(t *testing.T) {
	dir := t.TempDir()
	write := func(extra string) string {
		path := filepath.Join(dir, "config.yaml")
		text := `
llm:
  main: {base_url: "http://127.0.0.1:1/v1", model: gpt-4o}
  local: {base_url: "http://127.0.0.1:2/v1", model: llama3.1}
store: {path: ` + filepath.Join(dir, "openbot.db") + `}
workspace: ` + filepath.Join(dir, "ws") + `
bots:
  - {handle: engineer, llm: [main, local]}
console: [{name: local}]
cost:
` + extra + `
  budgets:
    bots:
      engineer: {daily: {cost: 5}}
`
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	path := write("")
	for _, args := range [][]string{{"config", "check"}, {"serve"}, {"chat"}, {"doctor"}} {
		r := runFor(t, append(args, "--config", path), strings.NewReader(""), nil)
		if r.code == 0 || !strings.Contains(r.stderr, `cost.budgets.bots.engineer.daily.cost: bot @engineer calls model "llama3.1" (llm.local), which has no price`) {
			t.Errorf("%v: exit %d, stderr:\n%s", args, r.code, r.stderr)
		}
	}
	path = write("  unpriced: warn")
	r := runFor(t, []string{"config", "check", "--config", path}, nil, nil)
	if r.code != 0 || !strings.Contains(r.stderr, `warning: cost.budgets.bots.engineer.daily.cost: bot @engineer calls model "llama3.1"`) {
		t.Errorf("warn: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}
