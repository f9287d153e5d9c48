package admin_test

import (
	"net/http"
	"testing"

	"openbot/admin"
	"openbot/core"
)

// GET /bots shows each bot's fixed prompt size and flags one above the
// configured warning size.
func TestBotsShowFixedPrompt(t *testing.T) {
	st := openStore(t)
	hs := serveAPI(t, admin.Options{Store: st,
		Bots:            []core.BotProfile{{Handle: "big"}, {Handle: "small"}},
		FixedPrompt:     func(b core.BotProfile) int { return map[string]int{"big": 9000, "small": 1200}[b.Handle] },
		FixedPromptWarn: 8000})
	var p admin.Page[admin.BotView]
	getJSON(t, hs.URL+"/api/v1/bots", http.StatusOK, &p)
	if len(p.Items) != 2 {
		t.Fatalf("bots = %+v", p.Items)
	}
	big, small := p.Items[0], p.Items[1]
	if big.FixedPromptTokens != 9000 || !big.FixedPromptLarge || small.FixedPromptTokens != 1200 || small.FixedPromptLarge {
		t.Errorf("bots = %+v", p.Items)
	}
}
