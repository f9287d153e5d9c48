package e2e

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"openbot/adapters/telegram"
	"openbot/adapters/telegram/telegramtest"
	"openbot/core"
)

type tgRig struct {
	*proc
	fake  *telegramtest.Server
	ads   []*telegram.Adapter
	agent *fixedAgent // startTelegram's
}

// startTelegram runs the engine with one Telegram account per bot in bots
// (token "tok-<handle>", username "<handle>_bot") against one fake Bot API.
func startTelegram(t *testing.T, bots ...string) *tgRig {
	t.Helper()
	agent := &fixedAgent{runs: map[string]int{}}
	r := startTelegramWith(t, newTgFake(t, bots...), "", core.Options{Agent: agent}, nil, tgAccounts(bots...)...)
	r.agent = agent
	return r
}

// newTgFake starts a fake Bot API serving the bots "tok-<handle>" (id 900 on,
// username "<handle>_bot") for the handles.
func newTgFake(t *testing.T, handles ...string) *telegramtest.Server {
	fake := telegramtest.NewServer()
	t.Cleanup(fake.Close)
	for i, h := range handles {
		fake.AddBot(telegramtest.Bot{Token: "tok-" + h, ID: int64(900 + i), Username: h + "_bot"})
	}
	return fake
}

// tgAccounts are the accounts of newTgFake's bots, one per handle, named after it.
func tgAccounts(handles ...string) []telegram.Options {
	var out []telegram.Options
	for _, h := range handles {
		out = append(out, telegram.Options{Name: h, Bot: h, Token: "tok-" + h})
	}
	return out
}

// startTelegramWith runs the engine from opts over db ("" for a new store) with
// one Telegram account per entry of accts polling fake; each gets the fake's
// endpoint, the engine's team, open DMs and the store's cursors, then more
// (when set) adjusts it.
func startTelegramWith(t *testing.T, fake *telegramtest.Server, db string, opts core.Options, more func(*proc, *telegram.Options), accts ...telegram.Options) *tgRig {
	t.Helper()
	r := &tgRig{fake: fake}
	r.proc = openProc(t, db, opts)
	var ads []core.Adapter
	for _, o := range accts {
		o.APIEndpoint, o.DMPolicy, o.Bots, o.Engine, o.Cursors = fake.URL(), cmp.Or(o.DMPolicy, telegram.DMOpen), r.eng.Bots(), r.eng, telegram.StoreCursors(r.st)
		if more != nil {
			more(r.proc, &o)
		}
		ad, err := telegram.New(o)
		if err != nil {
			t.Fatal(err)
		}
		r.ads = append(r.ads, ad)
		ads = append(ads, ad)
	}
	r.run(ads...)
	return r
}

// deliver queues update for the bot with token and waits until its account
// confirmed it and the engine is idle.
func (r *tgRig) deliver(token string, update []byte) {
	r.t.Helper()
	id, err := r.fake.PushUpdate(token, update)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.fake.WaitConfirmed(r.ctx(), token, id+1); err != nil {
		r.t.Fatalf("update %d not confirmed: %v", id, err)
	}
	r.idle()
}

// sent waits until the fake Bot API was sent a message containing text.
func (r *tgRig) sent(text string) telegramtest.Call {
	r.t.Helper()
	var found telegramtest.Call
	err := r.fake.Wait(r.ctx(), func(s *telegramtest.Server) bool {
		for _, c := range s.Calls("sendMessage") {
			if strings.Contains(c.Params["text"], text) {
				found = c
				return true
			}
		}
		return false
	})
	if err != nil {
		r.t.Fatalf("no message containing %q was sent", text)
	}
	return found
}

func groupUpdate(id int64, text string, entities string) []byte {
	return []byte(fmt.Sprintf(`{"update_id":%d,"message":{"message_id":201,"from":{"id":100000001,"is_bot":false,"first_name":"Alice"},
"chat":{"id":-1001000000001,"title":"Eng","type":"supergroup"},"date":1767225660,"text":%q,"entities":[%s]}}`, id, text, entities))
}

// TestTelegramTwoAccountsOneGroupMessage: two openbot bots with their own Telegram
// accounts in one group both receive a message mentioning both: it is stored once,
// each bot runs once, and each reply is sent by the bot's own account.
func TestTelegramTwoAccountsOneGroupMessage(t *testing.T) {
	r := startTelegram(t, "chief_of_staff", "engineer")
	text := "@chief_of_staff_bot @engineer_bot ship it"
	ents := `{"offset":0,"length":19,"type":"mention"},{"offset":20,"length":13,"type":"mention"}`
	for _, tok := range []string{"tok-chief_of_staff", "tok-engineer"} {
		if _, err := r.fake.PushUpdate(tok, groupUpdate(1, text, ents)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tok := range []string{"tok-chief_of_staff", "tok-engineer"} {
		if err := r.fake.WaitConfirmed(ctx, tok, 2); err != nil {
			t.Fatalf("%s: %v", tok, err)
		}
	}
	r.idle()
	if r.agent.runs["chief_of_staff"] != 1 || r.agent.runs["engineer"] != 1 {
		t.Fatalf("runs = %v, want one each", r.agent.runs)
	}
	var msgs, humans int
	_ = r.st.View(ctx, func(tx core.ReadTx) error {
		ths, _ := tx.Threads(0)
		for _, th := range ths {
			ms, _ := tx.Messages(th.ID, 0, 0)
			for _, m := range ms {
				msgs++
				if m.Sender == "telegram:100000001" {
					humans++
				}
			}
		}
		return nil
	})
	if humans != 1 || msgs != 3 {
		t.Fatalf("stored %d messages (%d human), want 3 (the human message once, two replies)", msgs, humans)
	}
	by := map[string]string{}
	for _, c := range r.fake.Calls("sendMessage") {
		by[c.Token] = c.Params["text"]
	}
	if !strings.Contains(by["tok-chief_of_staff"], "chief_of_staff on it") || !strings.Contains(by["tok-engineer"], "engineer on it") {
		t.Fatalf("each bot must reply through its own account; sendMessage by token: %v", by)
	}
}

// TestTelegramRateLimitHonoured: a 429 with retry_after 3 holds that chat's lane
// for 3 s, then the message goes out exactly once.
func TestTelegramRateLimitHonoured(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 3s for retry_after")
	}
	r := startTelegram(t, "chief_of_staff")
	r.fake.Fail("sendMessage", telegramtest.RateLimited(3))
	r.deliver("tok-chief_of_staff", []byte(`{"update_id":1,"message":{"message_id":10,"from":{"id":5,"is_bot":false,"first_name":"A"},"chat":{"id":5,"type":"private"},"date":1767225600,"text":"hi"}}`))
	sends := r.fake.Calls("sendMessage")
	if len(sends) != 2 {
		t.Fatalf("sendMessage calls = %d, want 2 (the 429, then one message)", len(sends))
	}
	if gap := sends[1].At.Sub(sends[0].At); gap < 3*time.Second {
		t.Fatalf("retried after %v, want at least retry_after 3s", gap)
	}
}

// TestTelegramReplyChainJoinsOlderDialog: in a group, a reply to the bot's answer in
// an earlier dialog joins that dialog, even after /new started another one.
func TestTelegramReplyChainJoinsOlderDialog(t *testing.T) {
	r := startTelegram(t, "chief_of_staff")
	push := func(id int64, body string) {
		t.Helper()
		r.deliver("tok-chief_of_staff", []byte(fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"from":{"id":7,"is_bot":false,"first_name":"Al"},"chat":{"id":-1002,"title":"G","type":"supergroup"},"date":1767225600,%s}}`, id, 100+id, body)))
	}
	push(1, `"text":"@chief_of_staff_bot first topic","entities":[{"offset":0,"length":19,"type":"mention"}]`)
	first := r.fake.Calls("sendMessage")[0]
	push(2, `"text":"/new@chief_of_staff_bot second topic","entities":[{"offset":0,"length":23,"type":"bot_command"}]`)
	// Reply to the bot's answer of the first dialog, without a mention.
	replyTo := firstSentID(t, r, first)
	push(3, fmt.Sprintf(`"text":"follow-up on the first","reply_to_message":{"message_id":%d,"from":{"id":900,"is_bot":true,"first_name":"chief","username":"chief_of_staff_bot"},"chat":{"id":-1002,"type":"supergroup"},"date":1767225600,"text":"chief_of_staff on it"}`, replyTo))
	a, b, c := r.threadOf("first topic"), r.threadOf("second topic"), r.threadOf("follow-up on the first")
	if a == 0 || a == b || c != a {
		t.Fatalf("threads: first %d, second %d, follow-up %d; want the follow-up in the first", a, b, c)
	}
	if r.agent.runs["chief_of_staff"] != 3 {
		t.Fatalf("runs = %v, want 3 (the reply to the bot wakes it)", r.agent.runs)
	}
}

// firstSentID returns the message_id the fake gave the first sendMessage.
func firstSentID(t *testing.T, r *tgRig, c telegramtest.Call) int64 {
	t.Helper()
	var id int64
	_ = r.st.View(context.Background(), func(tx core.ReadTx) error {
		o, err := tx.Outbox(1)
		if err == nil {
			fmt.Sscan(o.PlatformID, &id)
		}
		return nil
	})
	if id == 0 {
		t.Fatalf("no platform id recorded for the first reply (%v)", c.Params)
	}
	return id
}

// TestTelegramTwoBotsPrivateChatsStaySeparate: one person's private chats with two
// bot accounts have the same chat id and count message ids separately; they are
// two threads, each answered by its own bot through its own account, and a message
// with a message_id the other chat already used is not taken for a duplicate.
func TestTelegramTwoBotsPrivateChatsStaySeparate(t *testing.T) {
	r := startTelegram(t, "chief_of_staff", "engineer")
	dm := func(tok string, update int64, text string) {
		t.Helper()
		r.deliver(tok, []byte(fmt.Sprintf(`{"update_id":%d,"message":{"message_id":15,"from":{"id":4242,"is_bot":false,"first_name":"Alice"},"chat":{"id":4242,"type":"private"},"date":1767225600,"text":%q}}`, update, text)))
	}
	dm("tok-chief_of_staff", 1, "hello chief")
	dm("tok-engineer", 1, "engineer, are you there?")
	if r.agent.runs["chief_of_staff"] != 1 || r.agent.runs["engineer"] != 1 {
		t.Fatalf("runs = %v, want one each: the second DM must not be dropped or routed to the chief", r.agent.runs)
	}
	by := map[string]string{}
	for _, c := range r.fake.Calls("sendMessage") {
		by[c.Token] = c.Params["text"]
	}
	if !strings.Contains(by["tok-chief_of_staff"], "chief_of_staff on it") || !strings.Contains(by["tok-engineer"], "engineer on it") {
		t.Fatalf("replies by account: %v; each DM must be answered by its own bot", by)
	}
	threads, _ := r.eng.Threads(r.ctx(), 0)
	if len(threads) != 2 {
		t.Fatalf("threads = %d, want 2", len(threads))
	}
}
