package e2e

// End-to-end tests of the Telegram adapter through getUpdates on the real engine: core.New over
// bbolt with a scripted agent (fixedAgent), the real Telegram adapter and the fake
// Bot API.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"openbot/adapters/telegram"
	"openbot/adapters/telegram/telegramtest"
	"openbot/core"
	"openbot/store/bolt"
)

// runsOf is the total of a fixedAgent's runs.
func runsOf(a *fixedAgent) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, c := range a.runs {
		n += c
	}
	return n
}

// repliesTo counts sendMessage calls by the message id they reply to, and returns
// those ids in the order the calls were made.
func repliesTo(fake *telegramtest.Server) (map[int64]int, []int64) {
	by := map[int64]int{}
	var order []int64
	for _, c := range fake.Calls("sendMessage") {
		id := telegramtest.ParseReplyTo(c)
		by[id]++
		order = append(order, id)
	}
	return by, order
}

// startTgProc runs one openbot process over db with the Telegram account "acme"
// (bot engineer, token tok-engineer) polling fake; a test stops it and starts
// another over the same database, as a crash and restart do. wrap, when set,
// wraps the offset store and may call crash (which cancels the process) from
// inside it.
func startTgProc(t *testing.T, fake *telegramtest.Server, db string, agent core.Agent, wrap func(c telegram.Cursors, eng *core.Engine, crash func()) telegram.Cursors) *tgRig {
	t.Helper()
	var more func(*proc, *telegram.Options)
	if wrap != nil {
		more = func(p *proc, o *telegram.Options) { o.Cursors = wrap(o.Cursors, p.eng, func() { p.cancel() }) }
	}
	return startTelegramWith(t, fake, db, core.Options{Agent: agent}, more, telegram.Options{Name: "acme", Bot: "engineer", Token: "tok-engineer"})
}

// crashCursors is an offset store whose first SetCursor never happens: the process
// "crashes" there, after the update was stored and before its offset is saved.
type crashCursors struct {
	telegram.Cursors
	before  func() // runs just before the crash, e.g. to let the engine finish
	crash   func()
	crashed chan struct{}
	once    atomic.Bool
}

func (c *crashCursors) SetCursor(ctx context.Context, name, value string) error {
	if c.once.CompareAndSwap(false, true) {
		if c.before != nil {
			c.before()
		}
		c.crash()
		close(c.crashed)
		<-ctx.Done()
		return errors.New("crashed before saving the offset")
	}
	return c.Cursors.SetCursor(ctx, name, value)
}

func privateUpdate(id, msg, user int64, text string) []byte {
	return []byte(fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"from":{"id":%d,"is_bot":false,"first_name":"U%d"},"chat":{"id":%d,"type":"private"},"date":1767225600,"text":%q}}`,
		id, msg, user, user, user, text))
}

// TestTelegramCrashBeforeOffsetSaved: the updates of one getUpdates answer are
// stored together, and the process stops right after that, before the one offset
// save of the answer. A new process over the same database fetches them all again:
// the redelivery is deduplicated, nothing is lost, each update is answered exactly
// once and stored in update order.
func TestTelegramCrashBeforeOffsetSaved(t *testing.T) {
	cases := []struct {
		name string
		// n updates; from one private chat, or one chat each (so that a run the new
		// engine recovers cannot take two updates as its triggers).
		n       int
		oneChat bool
		// settle lets the engine answer the stored updates before the crash.
		settle bool
	}{
		{name: "answered before the crash", n: 2, oneChat: true, settle: true},
		{name: "crash right after the ingest", n: 2},
		{name: "batch of 100 answered before the crash", n: 100, settle: true},
		{name: "batch of 100 crash right after the ingest", n: 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := telegramtest.NewServer()
			t.Cleanup(fake.Close)
			fake.AddBot(telegramtest.Bot{Token: "tok-engineer", ID: 900, Username: "engineer_bot"})
			db := filepath.Join(t.TempDir(), "openbot.db")
			agent := &fixedAgent{runs: map[string]int{}}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()

			user := func(i int) int64 {
				if tc.oneChat {
					return 41
				}
				return int64(1000 + i)
			}
			key := func(i int) string { return telegram.DedupKey(900, user(i), int64(11+i)) }
			// All updates wait in the queue before the first getUpdates.
			for i := range tc.n {
				if _, err := fake.PushUpdate("tok-engineer", privateUpdate(int64(i+1), int64(11+i), user(i), fmt.Sprintf("question %d", i+1))); err != nil {
					t.Fatal(err)
				}
			}
			var sets atomic.Int32
			cc := &crashCursors{crashed: make(chan struct{})}
			first := startTgProc(t, fake, db, agent, func(c telegram.Cursors, eng *core.Engine, crash func()) telegram.Cursors {
				cc.Cursors, cc.crash = c, crash
				cc.before = func() { sets.Add(1) }
				if tc.settle {
					cc.before = func() { sets.Add(1); _ = eng.WaitIdle(ctx) }
				}
				return cc
			})
			select {
			case <-cc.crashed:
			case <-ctx.Done():
				first.stop()
				t.Fatal("the offset was never saved")
			}
			first.stop()
			// The crash came after every update was stored, at the first offset save.
			st, err := bolt.Open(db, bolt.Options{})
			if err != nil {
				t.Fatal(err)
			}
			_ = st.View(ctx, func(tx core.ReadTx) error {
				for i := range tc.n {
					if _, err := tx.Seen(key(i)); err != nil {
						t.Errorf("update %d was not stored before the offset save: %v", i+1, err)
					}
				}
				if v, _ := tx.Cursor(telegram.CursorName("acme")); v != "" {
					t.Errorf("offset %q saved before the crash", v)
				}
				return nil
			})
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			if got := fake.Confirmed("tok-engineer"); got > 1 {
				t.Fatalf("confirmed offset %d before the crash; the test needs every update to be fetched again", got)
			}

			second := startTgProc(t, fake, db, agent, nil)
			defer second.stop()
			if err := fake.WaitConfirmed(ctx, "tok-engineer", int64(tc.n+1)); err != nil {
				t.Fatal(err)
			}
			if err := second.eng.WaitIdle(ctx); err != nil {
				t.Fatal(err)
			}
			if n := sets.Load(); n != 1 {
				t.Errorf("%d offset saves before the crash, want 1 for the whole answer", n)
			}

			by, order := repliesTo(fake)
			switch {
			case tc.oneChat:
				// Stored together in one chat, the updates wake the bot once: one run
				// answers the last of them, before the crash, and never again.
				if len(order) != 1 || by[int64(11+tc.n-1)] != 1 {
					t.Errorf("replies by trigger %v, want one, to the last update", by)
				}
				if n := runsOf(agent); n != 1 {
					t.Errorf("runs = %d, want 1", n)
				}
			default:
				if len(order) != tc.n {
					t.Errorf("%d replies, want %d", len(order), tc.n)
				}
				for i := range tc.n {
					if by[int64(11+i)] != 1 {
						t.Fatalf("replies by trigger %v (in order %v), want one to each update", by, order)
					}
				}
				if n := runsOf(agent); tc.settle && n != tc.n {
					t.Errorf("runs = %d, want %d", n, tc.n)
				}
			}
			var humans []core.MessageID
			_ = second.st.View(ctx, func(tx core.ReadTx) error {
				for i := range tc.n {
					id, err := tx.Seen(key(i))
					if err != nil {
						return err
					}
					humans = append(humans, id)
				}
				v, _ := tx.Cursor(telegram.CursorName("acme"))
				if v != fmt.Sprint(tc.n+1) {
					t.Errorf("saved offset %q, want %d", v, tc.n+1)
				}
				return nil
			})
			if len(humans) != tc.n {
				t.Fatalf("stored %d messages, want %d", len(humans), tc.n)
			}
			for i := 1; i < len(humans); i++ {
				if humans[i] <= humans[i-1] {
					t.Errorf("stored messages %v, want update order", humans)
					break
				}
			}
		})
	}
}

// TestTelegramGroupWhatStartsARun: through getUpdates in a group, an @engineer_bot
// mention, a reply to the bot and /new@engineer_bot each start a run answered once;
// a message without a mention, @engineer_bot_two, /new@other_bot and a reply to a
// person start nothing and get nothing.
func TestTelegramGroupWhatStartsARun(t *testing.T) {
	r := startTelegram(t, "engineer")
	const tok, chat = "tok-engineer", int64(-1001000000077)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var next int64 = 1
	push := func(msg int64, body string) {
		t.Helper()
		u := fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"from":{"id":7,"is_bot":false,"first_name":"Al"},"chat":{"id":%d,"title":"G","type":"supergroup"},"date":1767225600,%s}}`, next, msg, chat, body)
		r.deliver(tok, []byte(u))
		next++
	}
	check := func(step string, runs int, replies map[int64]int) {
		t.Helper()
		by, _ := repliesTo(r.fake)
		if n := runsOf(r.agent); n != runs {
			t.Errorf("%s: runs = %d, want %d", step, n, runs)
		}
		if len(by) != len(replies) {
			t.Errorf("%s: replies by trigger %v, want %v", step, by, replies)
		}
		for id, n := range replies {
			if by[id] != n {
				t.Errorf("%s: replies by trigger %v, want %v", step, by, replies)
				break
			}
		}
	}

	push(1, `"text":"morning all"`)
	push(2, `"text":"@engineer_bot_two can you look?","entities":[{"offset":0,"length":17,"type":"mention"}]`)
	push(3, `"text":"/new@other_bot start over","entities":[{"offset":0,"length":14,"type":"bot_command"}]`)
	check("not addressed to this bot", 0, map[int64]int{})

	push(4, `"text":"@engineer_bot can you look?","entities":[{"offset":0,"length":13,"type":"mention"}]`)
	check("mention", 1, map[int64]int{4: 1})
	botMsg := firstSentID(t, r, r.fake.Calls("sendMessage")[0])

	push(5, fmt.Sprintf(`"text":"and the db side?","reply_to_message":{"message_id":%d,"from":{"id":900,"is_bot":true,"first_name":"engineer","username":"engineer_bot"},"chat":{"id":%d,"type":"supergroup"},"date":1767225600,"text":"engineer on it"}`, botMsg, chat))
	check("reply to the bot", 2, map[int64]int{4: 1, 5: 1})

	// A reply to a person, without a mention, is not for the bot.
	push(6, fmt.Sprintf(`"text":"agreed","reply_to_message":{"message_id":1,"from":{"id":8,"is_bot":false,"first_name":"Bo"},"chat":{"id":%d,"type":"supergroup"},"date":1767225600,"text":"morning all"}`, chat))
	check("reply to a person", 2, map[int64]int{4: 1, 5: 1})

	// A bare /new@this_bot is confirmed without a run; the next message for the bot
	// begins the new thread.
	push(7, `"text":"/new@engineer_bot","entities":[{"offset":0,"length":17,"type":"bot_command"}]`)
	check("/new@engineer_bot", 2, map[int64]int{4: 1, 5: 1, 7: 1})
	push(8, `"text":"@engineer_bot next topic","entities":[{"offset":0,"length":13,"type":"mention"}]`)
	check("after /new", 3, map[int64]int{4: 1, 5: 1, 7: 1, 8: 1})

	// /new started another thread; the mention and the reply share the first.
	thread := map[string]core.ThreadID{}
	_ = r.st.View(ctx, func(tx core.ReadTx) error {
		for _, m := range []int64{1, 2, 3, 4, 5, 6, 7, 8} {
			id, err := tx.Seen(telegram.DedupKey(900, chat, m))
			if err != nil {
				continue
			}
			msg, err := tx.Message(id)
			if err == nil {
				thread[strconv.FormatInt(m, 10)] = msg.Thread
			}
		}
		return nil
	})
	if len(thread) != 3 || thread["4"] == 0 || thread["5"] != thread["4"] || thread["8"] == thread["4"] || thread["8"] == 0 {
		t.Errorf("stored messages by thread %v, want only 4, 5 (one thread) and 8 (a new one)", thread)
	}
}

// TestTelegramForumTopicReplies: a message in a forum topic is answered in that
// topic (message_thread_id), a second topic is its own thread, and a message in
// the General topic is answered without message_thread_id.
func TestTelegramForumTopicReplies(t *testing.T) {
	r := startTelegram(t, "engineer")
	const tok, forum = "tok-engineer", int64(-1001000000002)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var next int64 = 1
	push := func(msg, topic int64, text string) {
		t.Helper()
		where := ""
		if topic != 0 {
			// A topic message replies to the topic's creation message.
			where = fmt.Sprintf(`"message_thread_id":%d,"is_topic_message":true,"reply_to_message":{"message_id":%d,"from":{"id":7,"is_bot":false,"first_name":"Al"},"chat":{"id":%d,"is_forum":true,"type":"supergroup"},"date":1767222000,"message_thread_id":%d,"forum_topic_created":{"name":"T%d","icon_color":7322096},"is_topic_message":true},`, topic, topic, forum, topic, topic)
		}
		u := fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"from":{"id":7,"is_bot":false,"first_name":"Al"},"chat":{"id":%d,"title":"Forum","is_forum":true,"type":"supergroup"},"date":1767225600,%s"text":%q,"entities":[{"offset":0,"length":13,"type":"mention"}]}}`, next, msg, forum, where, text)
		r.deliver(tok, []byte(u))
		next++
	}
	push(43, 42, "@engineer_bot draft the release notes")
	push(80, 77, "@engineer_bot look at the incident")
	push(90, 0, "@engineer_bot anything in General?")
	push(44, 42, "@engineer_bot add the changelog too")

	sends := r.fake.Calls("sendMessage")
	if len(sends) != 4 {
		t.Fatalf("sendMessage calls = %d, want 4: %+v", len(sends), sends)
	}
	want := []struct {
		replyTo int64
		topic   string
	}{{43, "42"}, {80, "77"}, {90, ""}, {44, "42"}}
	for i, w := range want {
		c := sends[i]
		if c.Params["chat_id"] != strconv.FormatInt(forum, 10) || telegramtest.ParseReplyTo(c) != w.replyTo || c.Params["message_thread_id"] != w.topic {
			t.Errorf("reply %d: chat %s, reply to %d, message_thread_id %q; want reply to %d in topic %q",
				i, c.Params["chat_id"], telegramtest.ParseReplyTo(c), c.Params["message_thread_id"], w.replyTo, w.topic)
		}
	}
	thread := map[int64]core.ThreadID{}
	_ = r.st.View(ctx, func(tx core.ReadTx) error {
		for _, m := range []int64{43, 80, 90, 44} {
			if id, err := tx.Seen(telegram.DedupKey(900, forum, m)); err == nil {
				if msg, err := tx.Message(id); err == nil {
					thread[m] = msg.Thread
				}
			}
		}
		return nil
	})
	if len(thread) != 4 || thread[43] == 0 || thread[44] != thread[43] || thread[80] == thread[43] || thread[90] == thread[43] || thread[90] == thread[80] {
		t.Errorf("threads by message %v, want 43 and 44 in one (topic 42), 80 and 90 each in their own", thread)
	}
}
