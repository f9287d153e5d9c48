package feishu_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
	"openbot/adapters/internal/adaptertest"
	"openbot/core"
)

// observedEngine is the fake engine with an Observer, as *core.Engine has.
type observedEngine struct {
	*fakeEngine
	obs *adaptertest.Inbound
}

func (e observedEngine) Observe() core.Observer { return e.obs }

// TestRefusalsReportInbound: a forged or unverifiable request and a DM from
// someone not on allow_users count as "refused", an authentic but malformed
// event as "dropped", once each (DESIGN.md §10, Metrics).
func TestRefusalsReportInbound(t *testing.T) {
	signed := func(h *harness, payload []byte) *http.Request {
		req, err := feishutest.WebhookRequestAt(h.web.URL+"/feishu/acme/events", payload, feishutest.EncryptKey, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	cases := []struct {
		name    string
		request func(h *harness) *http.Request
		want    string
	}{
		{"bad signature", func(h *harness) *http.Request {
			req := signed(h, feishutest.MessageEvent{MessageID: "om_1", Text: "hi"}.JSON())
			req.Header.Set("X-Lark-Signature", strings.Repeat("ab", 32))
			return req
		}, "feishu/refused"},
		{"malformed message event", func(h *harness) *http.Request {
			return signed(h, []byte(`{"schema":"2.0","header":{"event_type":"im.message.receive_v1","token":"`+feishutest.VerificationToken+`"},"event":"oops"}`))
		}, "feishu/dropped"},
		{"unknown user in DM", func(h *harness) *http.Request {
			ev := feishutest.MessageEvent{MessageID: "om_4", ChatID: "oc_bob", ChatType: "p2p", Sender: feishutest.BobOpenID, Text: "hello"}
			return signed(h, ev.JSON())
		}, "feishu/refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := &adaptertest.Inbound{}
			h := newHarness(t, func(o *feishu.Options) { o.Engine = observedEngine{o.Engine.(*fakeEngine), obs} })
			h.run()
			h.do(tc.request(h))
			if got := strings.Join(obs.All(), ","); got != tc.want {
				t.Errorf("reported %q, want %q", got, tc.want)
			}
		})
	}
}
