package telegram

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"openbot/adapters/internal/adaptertest"
	"openbot/core"
)

// observedEngine is the fake engine with an Observer, as *core.Engine has.
type observedEngine struct {
	*fakeEngine
	obs *adaptertest.Inbound
}

func (e observedEngine) Observe() core.Observer { return e.obs }

// TestRefusalsReportInbound: a wrong secret token and a DM from someone not on
// allow_users count as "refused", a body that is not JSON as "dropped", once
// each (DESIGN.md §10, Metrics).
func TestRefusalsReportInbound(t *testing.T) {
	dm, _ := json.Marshal(map[string]any{"update_id": 5, "message": map[string]any{
		"message_id": 50, "date": 1767225660, "text": "hello",
		"from": map[string]any{"id": 555, "is_bot": false, "first_name": "Mallory"},
		"chat": map[string]any{"id": 555, "type": "private"},
	}})
	cases := []struct {
		name, secret string
		body         []byte
		want         string
	}{
		{"wrong secret token", "wrong", dm, "telegram/refused"},
		{"body is not JSON", hookSecret, []byte("{not json"), "telegram/dropped"},
		{"unknown user in DM", hookSecret, dm, "telegram/refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			obs := &adaptertest.Inbound{}
			o := e.options()
			o.Mode, o.Cursors = ModeWebhook, nil
			o.WebhookURL = "https://bridge.example.invalid/telegram/main/webhook"
			o.SecretToken = hookSecret
			o.Engine = observedEngine{e.eng, obs}
			a := e.adapter(t, o)
			mux := http.NewServeMux()
			a.MountHTTP(mux)
			hs := httptest.NewServer(mux)
			t.Cleanup(hs.Close)
			run(t, a)
			started(t, e, a)
			post(t, hs.URL+WebhookPath("main"), tc.secret, tc.body)
			if got := strings.Join(obs.All(), ","); got != tc.want {
				t.Errorf("reported %q, want %q", got, tc.want)
			}
		})
	}
}
