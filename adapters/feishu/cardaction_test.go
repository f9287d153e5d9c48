package feishu_test

import (
	"encoding/json"
	"strings"
	"testing"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
	"openbot/core"
)

// withoutOpenID rewrites a card callback so that its clicker has no open_id (a v2
// operator with only a user_id, or a legacy body without open_id).
func withoutOpenID(t *testing.T, payload []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(payload, &m); err != nil {
		t.Fatal(err)
	}
	if ev, ok := m["event"].(map[string]any); ok {
		ev["operator"] = map[string]any{"tenant_key": "1a2b3c4d5e6f7a8b", "user_id": "ex_alice"}
	} else {
		delete(m, "open_id")
	}
	b, _ := json.Marshal(m)
	return b
}

// checkUnidentifiedRefused: the click got a private "not allowed" toast and the
// question was not answered (the engine saw no answer with an actor).
func checkUnidentifiedRefused(t *testing.T, h *harness, q *core.Question, tt *feishu.Toast, what string) {
	t.Helper()
	if tt == nil || tt.Type != feishu.ToastError || !strings.Contains(strings.ToLower(tt.Content), "not allowed") {
		t.Errorf("%s: toast %+v, want an error toast saying it is not allowed", what, tt)
	}
	for _, a := range h.eng.answers.All() {
		if a.Actor != "" {
			t.Errorf("%s: an answer reached the engine as %q", what, a.Actor)
		}
	}
	if q.Status != core.QuestionPending {
		t.Errorf("%s: question %+v was answered", what, q)
	}
}

// TestCardActionWithoutOpenIDFailsClosed: a signed card click that does not tell who
// clicked (no operator open_id) answers nothing and tells the clicker they are not
// allowed, over the card URL (callback v2 and legacy) and the long connection.
func TestCardActionWithoutOpenIDFailsClosed(t *testing.T) {
	t.Run("webhook", func(t *testing.T) {
		h := newHarness(t, nil)
		h.run()
		q := approvalQ()
		h.eng.questions[q.Token] = &q
		h.eng.approvers[aliceID] = true
		v := feishutest.CardButtons(feishu.QuestionCard(q, "", false))[0].Value
		ev := feishutest.CardAction{MessageID: "om_card", Value: v}

		s, b := h.post("card", withoutOpenID(t, ev.JSON()), feishutest.EncryptKey)
		if s != 200 {
			t.Fatalf("v2: HTTP %d %s", s, b)
		}
		checkUnidentifiedRefused(t, h, &q, toast(t, b), "v2")

		r, err := feishutest.LegacyCardRequest(h.web.URL+"/feishu/acme/card", withoutOpenID(t, ev.LegacyJSON()), feishutest.VerificationToken)
		if err != nil {
			t.Fatal(err)
		}
		s, b = h.do(r)
		if s != 200 {
			t.Fatalf("legacy: HTTP %d %s", s, b)
		}
		checkUnidentifiedRefused(t, h, &q, toast(t, b), "legacy")

		// The same click with the clicker known is answered: the refusal above was
		// about the missing identity, not the button.
		s, b = h.post("card", ev.JSON(), feishutest.EncryptKey)
		if tt := toast(t, b); s != 200 || tt == nil || tt.Content != "Recorded" {
			t.Errorf("identified click: %d %s", s, b)
		}
		if len(h.eng.ins.All()) != 0 {
			t.Error("card clicks were ingested as messages")
		}
	})
	t.Run("websocket", func(t *testing.T) {
		h := newHarness(t, func(o *feishu.Options) { o.Mode = feishu.ModeWebsocket; o.EncryptKey = "" })
		q := approvalQ()
		h.eng.questions[q.Token] = &q
		h.eng.approvers[aliceID] = true
		h.run()
		ctx := ctxT(t)
		if err := h.srv.WaitConnections(ctx, 1); err != nil {
			t.Fatal(err)
		}
		v := feishutest.CardButtons(feishu.QuestionCard(q, "", false))[0].Value
		id, err := h.srv.PushCard(ctx, withoutOpenID(t, feishutest.CardAction{MessageID: "om_card", Value: v}.JSON()), "event")
		if err != nil {
			t.Fatal(err)
		}
		ack, err := h.srv.WaitAck(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if ack.Code != 200 {
			t.Errorf("ack %+v", ack)
		}
		checkUnidentifiedRefused(t, h, &q, toast(t, string(ack.Data)), "long connection")
	})
}
