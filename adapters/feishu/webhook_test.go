package feishu_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
)

// fixedClock is a core.Clock stopped at one instant.
type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// rawCBC encrypts blocks (a whole number of AES blocks, padding already applied or
// deliberately broken) under the encrypt key with a zero IV and returns the base64
// "encrypt" value, as a padding-oracle attacker would craft them.
func rawCBC(t *testing.T, key string, plain []byte) string {
	t.Helper()
	sum := sha256.Sum256([]byte(key))
	block, err := aes.NewCipher(sum[:])
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, aes.BlockSize+len(plain))
	cipher.NewCBCEncrypter(block, out[:aes.BlockSize]).CryptBlocks(out[aes.BlockSize:], plain)
	return base64.StdEncoding.EncodeToString(out)
}

func pkcs7(b []byte) []byte {
	n := aes.BlockSize - len(b)%aes.BlockSize
	return append(append([]byte(nil), b...), bytes.Repeat([]byte{byte(n)}, n)...)
}

// TestUnsignedProbesLookAlike sends the probes of a CBC padding oracle as unsigned
// requests (the challenge is the one request the platform does not sign) while an
// encrypt key is set: every one must get byte-identical status, headers that
// matter, and body, and none may be processed (DESIGN.md §9).
func TestUnsignedProbesLookAlike(t *testing.T) {
	key := feishutest.EncryptKey
	badPad := bytes.Repeat([]byte{'A'}, 32) // last byte 'A' (65) is no PKCS#7 padding
	probes := map[string]string{
		"not JSON":                   `not json at all`,
		"bad base64":                 `{"encrypt":"%%%not-base64%%%"}`,
		"short ciphertext":           `{"encrypt":"AAECAwQFBgcICQoLDA0ODw=="}`,
		"bad padding":                `{"encrypt":"` + rawCBC(t, key, badPad) + `"}`,
		"valid padding, not JSON":    `{"encrypt":"` + rawCBC(t, key, pkcs7([]byte("this is not json"))) + `"}`,
		"JSON, not a challenge":      `{"encrypt":"` + rawCBC(t, key, pkcs7([]byte(`{"schema":"2.0","header":{"event_type":"im.message.receive_v1"}}`))) + `"}`,
		"challenge with wrong token": `{"encrypt":"` + rawCBC(t, key, pkcs7([]byte(`{"challenge":"c","token":"forged","type":"url_verification"}`))) + `"}`,
		"plain event, unsigned":      string(feishutest.MessageEvent{MessageID: "om_probe", Text: "@_user_1 hi", Mentions: []feishutest.Mention{feishutest.BotMention("@_user_1")}}.JSON()),
	}
	for _, path := range []string{"events", "card"} {
		h := newHarness(t, nil)
		h.run()
		type answer struct {
			status      int
			contentType string
			body        string
		}
		var first *answer
		var firstName string
		for name, body := range probes {
			req, _ := http.NewRequest(http.MethodPost, h.web.URL+"/feishu/acme/"+path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json; charset=utf-8")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			got := answer{res.StatusCode, res.Header.Get("Content-Type"), string(b)}
			if got.status == http.StatusOK {
				t.Errorf("%s %s: accepted: %q", path, name, got.body)
			}
			if first == nil {
				first, firstName = &got, name
				continue
			}
			if got != *first {
				t.Errorf("%s: %q answered %+v, but %q answered %+v", path, name, got, firstName, *first)
			}
		}
		if n := len(h.eng.ins.All()); n != 0 {
			t.Errorf("%s: %d unsigned probes ingested", path, n)
		}
	}
	// The genuine encrypted challenge still passes.
	h := newHarness(t, nil)
	challenge := rawCBC(t, key, pkcs7([]byte(`{"challenge":"c7","token":"`+feishutest.VerificationToken+`","type":"url_verification"}`)))
	req, _ := http.NewRequest(http.MethodPost, h.web.URL+"/feishu/acme/events", strings.NewReader(`{"encrypt":"`+challenge+`"}`))
	if s, b := h.do(req); s != http.StatusOK || strings.TrimSpace(b) != `{"challenge":"c7"}` {
		t.Errorf("genuine encrypted challenge: %d %s", s, b)
	}
}

// TestSignedRequestFreshness checks the X-Lark-Request-Timestamp window: a
// correctly signed request 30 days old, or far in the future, is refused with a
// WARN line and ingests nothing; one as old as Feishu's last retry (about 7 h
// after the first push) is accepted.
func TestSignedRequestFreshness(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	logs := &recordingHandler{}
	h := newHarness(t, func(o *feishu.Options) {
		o.Clock = fixedClock(now)
		o.Logger = slog.New(logs)
	})
	h.run()
	send := func(id string, at time.Time) int {
		ev := feishutest.MessageEvent{MessageID: id, Text: "@_user_1 deploy", Mentions: []feishutest.Mention{feishutest.BotMention("@_user_1")}}
		req, err := feishutest.WebhookRequestAt(h.web.URL+"/feishu/acme/events", ev.JSON(), feishutest.EncryptKey, at)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := h.do(req)
		return s
	}
	for _, tc := range []struct {
		name string
		at   time.Time
	}{
		{"30 days old", now.Add(-30 * 24 * time.Hour)},
		{"9 hours old", now.Add(-9 * time.Hour)},
		{"an hour ahead", now.Add(time.Hour)},
	} {
		logs.reset()
		if s := send("om_"+strings.ReplaceAll(tc.name, " ", "_"), tc.at); s != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", tc.name, s)
		}
		if !logs.has(slog.LevelWarn, "account", "feishu/acme") {
			t.Errorf("%s: no WARN line naming the account; logged %v", tc.name, logs.all())
		}
	}
	if n := len(h.eng.ins.All()); n != 0 {
		t.Fatalf("stale requests ingested %d messages", n)
	}
	// The last retry of Feishu's schedule (15 s, 5 min, 1 h, 6 h) with the first
	// push's timestamp is still accepted, as is a clock a little ahead.
	for i, at := range []time.Time{now.Add(-(7*time.Hour + 6*time.Minute)), now.Add(2 * time.Minute)} {
		if s := send("om_retry_"+string(rune('a'+i)), at); s != http.StatusOK {
			t.Errorf("request at %v: status %d, want 200", at, s)
		}
	}
	if n := len(h.eng.ins.All()); n != 2 {
		t.Errorf("fresh requests ingested %d messages, want 2", n)
	}
}

// TestRefusalsLogWarn: every malformed or refused request leaves a WARN line that
// names the account and a reason, and no log line carries the app secret, the
// encrypt key or the verification token.
func TestRefusalsLogWarn(t *testing.T) {
	bot := []feishutest.Mention{feishutest.BotMention("@_user_1")}
	signedAt := func(h *harness, path string, payload []byte, at time.Time) *http.Request {
		req, err := feishutest.WebhookRequestAt(h.web.URL+"/feishu/acme/"+path, payload, feishutest.EncryptKey, at)
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	raw := func(h *harness, path, body string) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, h.web.URL+"/feishu/acme/"+path, strings.NewReader(body))
		return req
	}
	cases := []struct {
		name    string
		noKey   bool // token-only account (no encrypt key)
		request func(h *harness) *http.Request
	}{
		{"bad signature", false, func(h *harness) *http.Request {
			req := signedAt(h, "events", feishutest.MessageEvent{MessageID: "om_1", Text: "hi"}.JSON(), time.Now())
			req.Header.Set("X-Lark-Signature", strings.Repeat("ab", 32))
			return req
		}},
		{"stale", false, func(h *harness) *http.Request {
			return signedAt(h, "events", feishutest.MessageEvent{MessageID: "om_2", Text: "@_user_1 hi", Mentions: bot}.JSON(), time.Now().Add(-30*24*time.Hour))
		}},
		{"plaintext event while encrypt_key is set", false, func(h *harness) *http.Request {
			body := feishutest.MessageEvent{MessageID: "om_5", Text: "@_user_1 hi", Mentions: bot}.JSON()
			req := raw(h, "events", string(body))
			ts, nonce := strconv.FormatInt(time.Now().Unix(), 10), "n0nce"
			req.Header.Set("X-Lark-Request-Timestamp", ts)
			req.Header.Set("X-Lark-Request-Nonce", nonce)
			req.Header.Set("X-Lark-Signature", feishu.Signature(ts, nonce, feishutest.EncryptKey, body))
			return req
		}},
		{"plaintext card click while encrypt_key is set", false, func(h *harness) *http.Request {
			q := approvalQ()
			h.eng.questions[q.Token] = &q
			v := feishutest.CardButtons(feishu.QuestionCard(q, "", false))[0].Value
			return raw(h, "card", string(feishutest.CardAction{MessageID: "om_card", Value: v}.JSON()))
		}},
		{"unsigned, not a challenge", false, func(h *harness) *http.Request { return raw(h, "events", `{"encrypt":"AAAA"}`) }},
		{"signed, not JSON inside", false, func(h *harness) *http.Request {
			return signedAt(h, "events", []byte("not json"), time.Now())
		}},
		{"signed, malformed message event", false, func(h *harness) *http.Request {
			return signedAt(h, "events", []byte(`{"schema":"2.0","header":{"event_type":"im.message.receive_v1","token":"`+feishutest.VerificationToken+`"},"event":"oops"}`), time.Now())
		}},
		{"wrong verification token", true, func(h *harness) *http.Request {
			return raw(h, "events", string(feishutest.MessageEvent{MessageID: "om_3", Text: "hi", Token: "forged"}.JSON()))
		}},
		{"not JSON", true, func(h *harness) *http.Request { return raw(h, "events", "{nope") }},
		{"encrypted body without a key", true, func(h *harness) *http.Request { return raw(h, "events", `{"encrypt":"AAAA"}`) }},
		{"unknown user in DM", false, func(h *harness) *http.Request {
			ev := feishutest.MessageEvent{MessageID: "om_4", ChatID: "oc_bob", ChatType: "p2p", Sender: feishutest.BobOpenID, Text: "hello"}
			return signedAt(h, "events", ev.JSON(), time.Now())
		}},
		{"card click from a non-approver", false, func(h *harness) *http.Request {
			q := approvalQ()
			h.eng.questions[q.Token] = &q
			v := feishutest.CardButtons(feishu.QuestionCard(q, "", false))[0].Value
			return signedAt(h, "card", feishutest.CardAction{MessageID: "om_card", OpenID: feishutest.BobOpenID, Value: v}.JSON(), time.Now())
		}},
		{"card click on a button that is not a question", false, func(h *harness) *http.Request {
			return signedAt(h, "card", feishutest.CardAction{MessageID: "om_card", Value: []byte(`{"x":1}`)}.JSON(), time.Now())
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logs := &recordingHandler{}
			h := newHarness(t, func(o *feishu.Options) {
				o.Logger = slog.New(logs)
				if tc.noKey {
					o.EncryptKey = ""
				}
			})
			h.run()
			logs.reset()
			h.do(tc.request(h))
			if got := logs.warned("account", "feishu/acme"); len(got) == 0 {
				t.Errorf("no WARN line naming the account; logged %v", logs.all())
			}
			if n := len(h.eng.ins.All()); n != 0 {
				t.Errorf("%d messages ingested", n)
			}
			if l := logs.leaks(feishutest.AppSecret, feishutest.EncryptKey, feishutest.VerificationToken); len(l) != 0 {
				t.Errorf("secrets in logs: %v", l)
			}
		})
	}
}
