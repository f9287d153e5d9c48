package admin_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"openbot/admin"
	"openbot/core"
)

// TestQuestionWhole: GET /api/v1/questions/{id} answers one question whole: a
// shell approval with its command as it will run, its warnings and its reach
// (where the platforms' prompts point when a command is too long for them),
// without its token; an unknown id is 404.
func TestQuestionWhole(t *testing.T) {
	st := openStore(t)
	cmd := "echo " + strings.Repeat("QUJD", 25000) + " | base64 -d | sh"
	args, _ := json.Marshal(map[string]any{"command": cmd, "timeout_seconds": 60})
	update(t, st, func(tx core.Tx) error {
		must(tx.PutQuestion(core.Question{Token: "secrettoken1", Kind: core.QuestionApproval, Run: 1, Bot: "bot:eng", Thread: 1, Tool: "shell",
			Args: args, Reach: "runs in a sandbox. Timeout: 60 s.", Warnings: []string{"This command decodes hidden content (base64) and runs it."},
			Status: core.QuestionPending, Choice: -1, Created: t0, Expires: t0.Add(time.Hour)}))
		return nil
	})
	hs := serveAPI(t, admin.Options{Store: st, Clock: fixedClock{t0}})
	var q admin.QuestionView
	getJSON(t, hs.URL+"/api/v1/questions/1", http.StatusOK, &q)
	if q.Command != cmd || len(q.Warnings) != 1 || !strings.Contains(q.Reach, "Timeout: 60 s.") || q.Token != "" {
		t.Errorf("question = command of %d characters, warnings %q, reach %q, token %q; want the whole command, the warning and the reach, no token",
			len(q.Command), q.Warnings, q.Reach, q.Token)
	}
	getJSON(t, hs.URL+"/api/v1/questions/9", http.StatusNotFound, nil)
}
