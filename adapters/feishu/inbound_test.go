package feishu

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/core"
)

func TestReplaceMentions(t *testing.T) {
	ms := []mention{
		{Key: "@_user_1", ID: userID{OpenID: "ou_bot"}, Name: "Bridge Bot"},
		{Key: "@_user_2", ID: userID{OpenID: "ou_a"}, Name: "Alice"},
		{Key: "@_user_10", ID: userID{OpenID: "ou_t"}, Name: "Ten"},
		{Key: "@_user_11", ID: userID{OpenID: "ou_e"}, Name: "Eleven"},
	}
	tests := []struct{ in, botText, want string }{
		{"@_user_1 hi @_user_10 and @_user_11, @_user_2!", "@engineer", "@engineer hi @Ten and @Eleven, @Alice!"},
		{"@_user_10@_user_1", "@engineer", "@Ten@engineer"},
		{"@_user_1 please", "", "please"},
		{"x @_user_1 y", "", "x y"},
		{"@_user_3 unknown and @_all", "@e", "@_user_3 unknown and @all"},
		{"no mentions", "@e", "no mentions"},
	}
	for _, tt := range tests {
		if got := replaceMentions(tt.in, ms, "ou_bot", tt.botText); got != tt.want {
			t.Errorf("replaceMentions(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestMessageText(t *testing.T) {
	ms := []mention{{Key: "@_user_1", ID: userID{OpenID: "ou_bot"}, Name: "Bot"}, {Key: "@_user_2", ID: userID{OpenID: "ou_b"}, Name: "Bob"}}
	post := `{"title":"Deploy","content":[[{"tag":"at","user_id":"@_user_1","user_name":"Bot"},{"tag":"text","text":" see "},{"tag":"a","text":"log","href":"https://ci/1"}],[{"tag":"text","text":"cc "},{"tag":"at","user_id":"@_user_2","user_name":"Bob"},{"tag":"img","image_key":"k"}],[{"tag":"code_block","language":"go","text":"x := 1\n"}]]}`
	localePost := `{"zh_cn":{"title":"","content":[[{"tag":"text","text":"你好 "},{"tag":"at","user_id":"ou_other","user_name":"Carol"},{"tag":"emotion","emoji_type":"SMILE"}]]}}`
	tests := []struct {
		typ, content, want string
		ok                 bool
	}{
		{"text", `{"text":"@_user_1 hi @_user_2"}`, "@engineer hi @Bob", true},
		{"post", post, "Deploy\n@engineer see [log](https://ci/1)\ncc @Bob[image]\n```go\nx := 1\n```", true},
		{"post", localePost, "你好 @Carol:SMILE:", true},
		{"image", `{"image_key":"k"}`, "", false},
		{"text", `not json`, "", false},
	}
	for _, tt := range tests {
		got, ok := messageText(tt.typ, tt.content, ms, "ou_bot", "@engineer")
		if got != tt.want || ok != tt.ok {
			t.Errorf("messageText(%s, %s) = %q, %v; want %q, %v", tt.typ, tt.content, got, ok, tt.want, tt.ok)
		}
	}
}

func TestTextMentionsBotAndCommand(t *testing.T) {
	a := &Adapter{}
	a.SetBots([]core.BotProfile{{Handle: "engineer"}, {Handle: "qa"}})
	for text, want := range map[string]bool{
		"@engineer fix it": true, "ask @qa.": true, "mail@engineer.com": false, "@engineers": false,
		"@qa_team": false, "nothing": false, "@q": false,
	} {
		if got := a.textMentionsBot(text); got != want {
			t.Errorf("textMentionsBot(%q) = %v, want %v", text, got, want)
		}
	}
	// A reload that adds a bot makes its handle a mention (SetBots).
	if a.textMentionsBot("@designer draw it") {
		t.Error("an unknown handle counted as a mention")
	}
	a.SetBots([]core.BotProfile{{Handle: "engineer"}, {Handle: "designer"}})
	if !a.textMentionsBot("@designer draw it") || a.textMentionsBot("ask @qa.") {
		t.Error("SetBots did not replace the team")
	}
	for text, want := range map[string]string{"/new": "", "/new do x": "do x", "/newer": "-", "hi /new": "-"} {
		rest, ok := command(text, "/new")
		if !ok {
			rest = "-"
		}
		if rest != want {
			t.Errorf("command(%q) = %q, want %q", text, rest, want)
		}
	}
}

type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestTokenCachedUntilNearExpiry checks the cache against the fixture response
// (expire 7200 s): reused until 3 minutes before expiry, then fetched again.
func TestTokenCachedUntilNearExpiry(t *testing.T) {
	var fetches int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches++
		var req map[string]string
		_ = json.NewDecoder(r.Body).Decode(&req)
		if r.URL.Path != "/open-apis/auth/v3/tenant_access_token/internal" || req["app_id"] != "cli_1" || req["app_secret"] != "s" {
			t.Errorf("token request %s %v", r.URL.Path, req)
		}
		w.Write([]byte(`{"code":0,"expire":7200,"msg":"ok","tenant_access_token":"t-` + string(rune('0'+fetches)) + `"}`))
	}))
	defer srv.Close()
	clk := &stepClock{now: time.Unix(1767225600, 0)}
	c := newAPIClient(srv.URL, "cli_1", "s", srv.Client(), clk, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	t1, err := c.tenantToken(ctx, "")
	if err != nil || t1 != "t-1" {
		t.Fatalf("first token %q, %v", t1, err)
	}
	clk.add(7200*time.Second - tokenRefreshMargin - time.Second)
	if t2, _ := c.tenantToken(ctx, ""); t2 != "t-1" || fetches != 1 {
		t.Errorf("token %q after %d fetches, want cached t-1", t2, fetches)
	}
	clk.add(2 * time.Second)
	if t3, _ := c.tenantToken(ctx, ""); t3 != "t-2" || fetches != 2 {
		t.Errorf("token %q after %d fetches, want refreshed t-2", t3, fetches)
	}
	if t4, _ := c.tenantToken(ctx, "t-2"); t4 != "t-3" {
		t.Errorf("stale token not replaced: %q", t4)
	}
}

func TestAPIErrorClassification(t *testing.T) {
	tests := []struct {
		e         APIError
		permanent bool
	}{
		{APIError{HTTPStatus: 400, Code: CodeBotNotInChat}, true},
		{APIError{HTTPStatus: 400, Code: CodeNoAvailability}, true},
		{APIError{HTTPStatus: 429, Code: CodeRateLimited}, false},
		{APIError{HTTPStatus: 400, Code: CodeRateLimited}, false},
		{APIError{HTTPStatus: 200, Code: CodeMessageRateLimit}, false},
		{APIError{HTTPStatus: 502}, false},
		{APIError{HTTPStatus: 400, Code: CodeInvalidToken}, false},
	}
	for _, tt := range tests {
		var de core.DeliveryError = &tt.e
		if de.Permanent() != tt.permanent {
			t.Errorf("%v: Permanent = %v, want %v", &tt.e, de.Permanent(), tt.permanent)
		}
	}
}

// TestReassembleFixture feeds the fixture's two fragments out of order and expects
// the fixture's reassembled payload; duplicates and stale sets are handled.
func TestReassembleFixture(t *testing.T) {
	f := loadFrames(t)
	var parts []Frame
	for _, v := range f.Frames {
		if strings.HasPrefix(v.Name, "server_fragment_") {
			raw, _ := hex.DecodeString(v.Hex)
			fr, err := UnmarshalFrame(raw)
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, fr)
		}
	}
	if len(parts) != 2 {
		t.Fatalf("%d fragments in fixture", len(parts))
	}
	clk := &stepClock{now: time.Unix(1767225600, 0)}
	s := &wsSession{a: &Adapter{clock: clk}, frags: map[string]*fragSet{}}
	if got := s.reassemble(parts[1]); got != nil {
		t.Fatalf("complete after one part: %q", got)
	}
	if got := s.reassemble(parts[1]); got != nil {
		t.Fatalf("duplicate part completed the set: %q", got)
	}
	got := s.reassemble(parts[0])
	if string(got) != f.Reassembled {
		t.Errorf("reassembled %q\nwant %q", got, f.Reassembled)
	}
	if len(s.frags) != 0 {
		t.Errorf("set kept after completion")
	}
	// An incomplete set older than the TTL is dropped.
	s.reassemble(parts[0])
	clk.add(fragmentTTL + time.Second)
	if got := s.reassemble(parts[1]); got != nil {
		t.Errorf("stale fragment completed a set: %q", got)
	}
}
