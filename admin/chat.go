package admin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"openbot/core"
)

// ChatAccount is the account of the dashboard's chat: a console account, as
// the terminal's, whose threads are keyed "console:web:...".
const ChatAccount core.AccountID = "console/web"

// Limits of the chat.
const (
	// maxChatText bounds one message (bytes).
	maxChatText = 16 << 10
	// chatStreamEvery is how often a reply being written is updated.
	chatStreamEvery = 200 * time.Millisecond
	// maxDrafts bounds the replies being written that are kept.
	maxDrafts = 256
)

// Ingester stores an inbound message and routes it; *core.Engine implements it.
type Ingester interface {
	Ingest(ctx context.Context, in core.Inbound) (core.IngestResult, error)
}

// Chat is the dashboard's way to try a bot: the page's messages go in through
// Engine.Ingest as the terminal channel's do (a new thread, or an existing
// one by id as the terminal's /switch does), and Chat is the adapter of
// ChatAccount that takes the replies: Deliver accepts them (the page reads
// them from the store) and Stream keeps each conversation's reply while it is
// written, for GET /api/v1/threads/{id}/draft. Safe for concurrent use.
type Chat struct {
	eng Ingester
	seq atomic.Uint64
	mu  sync.Mutex
	// drafts are the replies being written by conversation; threads maps a
	// conversation to its thread once known.
	drafts  map[core.ConversationRef]Draft
	threads map[core.ConversationRef]core.ThreadID
}

// Draft is a reply being written: its text so far and the bot's handle.
type Draft struct {
	Text string `json:"text"`
	Bot  string `json:"bot,omitempty"`
}

// NewChat returns the chat adapter; add it to the engine (Engine.AddAdapter)
// and give it to Options.Chat.
func NewChat(eng Ingester) *Chat {
	return &Chat{eng: eng, drafts: map[core.ConversationRef]Draft{}, threads: map[core.ConversationRef]core.ThreadID{}}
}

// Account returns ChatAccount.
func (c *Chat) Account() core.AccountID { return ChatAccount }

// Bot returns "*": the chat speaks to the whole team.
func (c *Chat) Bot() string { return "*" }

// Deliver takes a reply: it is in the store, where the page reads it; the
// conversation's draft ends.
func (c *Chat) Deliver(_ context.Context, d core.Delivery) (string, error) {
	c.mu.Lock()
	delete(c.drafts, d.Conversation)
	c.mu.Unlock()
	return "web-" + strconv.FormatUint(c.seq.Add(1), 10), nil
}

// StreamInterval is how often core updates a reply being written.
func (c *Chat) StreamInterval() time.Duration { return chatStreamEvery }

// Stream keeps the reply so far of its conversation (none once s.Text is
// empty).
func (c *Chat) Stream(_ context.Context, s core.StreamDelivery) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.Text == "" {
		delete(c.drafts, s.Conversation)
		return nil, nil
	}
	if _, ok := c.drafts[s.Conversation]; !ok && len(c.drafts) >= maxDrafts {
		for k := range c.drafts { // drop one: a page shows the final reply anyway
			delete(c.drafts, k)
			break
		}
	}
	c.drafts[s.Conversation] = Draft{Text: s.Text, Bot: s.Sender.Handle}
	return []string{"draft"}, nil
}

// draft is the reply being written in thread, if any.
func (c *Chat) draft(thread core.ThreadID) Draft {
	c.mu.Lock()
	defer c.mu.Unlock()
	for conv, d := range c.drafts {
		if c.threads[conv] == thread {
			return d
		}
	}
	return Draft{}
}

// post sends text from by into thread (0: a new thread whose default bot is
// bot) and returns where it went and whom it woke.
func (c *Chat) post(ctx context.Context, thread core.ThreadID, bot, text string, by core.By) (core.IngestResult, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	key := "web:" + id
	if thread != 0 {
		key = "web:" + strconv.FormatUint(uint64(thread), 10)
	}
	conv := core.ConversationRef(key)
	in := core.Inbound{Account: ChatAccount, Platform: "console", DedupKey: "console:web:msg:" + id,
		ThreadKey: "console:" + key, Conversation: conv, PlatformID: id, SenderID: by.Actor, SenderName: by.Name,
		Text: text, StartThread: thread == 0, Thread: thread, DefaultBot: bot, Received: time.Now()}
	// Known before the run can stream: the reply's draft finds its thread.
	if thread != 0 {
		c.mu.Lock()
		c.threads[conv] = thread
		c.mu.Unlock()
	}
	res, err := c.eng.Ingest(ctx, in)
	if err != nil {
		return res, err
	}
	if res.Dropped {
		return res, errors.New("the message was not taken: name a bot with @handle")
	}
	c.mu.Lock()
	if len(c.threads) >= 4*maxDrafts {
		clear(c.threads)
	}
	c.threads[conv] = res.Thread
	c.mu.Unlock()
	return res, nil
}

// chatRoutes adds POST /api/v1/chat and GET /api/v1/threads/{id}/draft when
// Options.Chat is set.
func (s *Server) chatRoutes() {
	c := s.opts.Chat
	if c == nil {
		return
	}
	s.mux.HandleFunc("POST /api/v1/chat", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Thread core.ThreadID `json:"thread"`
			Bot    string        `json:"bot"`
			Text   string        `json:"text"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, maxChatText+1024)).Decode(&body); err != nil {
			writeError(w, http.StatusBadRequest, "want a JSON body with text and thread or bot")
			return
		}
		body.Text = strings.TrimSpace(body.Text)
		if body.Text == "" || len(body.Text) > maxChatText || !utf8.ValidString(body.Text) {
			writeError(w, http.StatusBadRequest, "text: want 1 to 16384 bytes of UTF-8")
			return
		}
		if body.Thread == 0 && body.Bot == "" {
			writeError(w, http.StatusBadRequest, "bot: name the bot a new thread talks to")
			return
		}
		res, err := c.post(r.Context(), body.Thread, strings.TrimPrefix(body.Bot, "@"), body.Text, s.by())
		if errors.Is(err, core.ErrNotFound) {
			writeError(w, http.StatusNotFound, "not found")
			return
		}
		if err != nil {
			writeError(w, http.StatusUnprocessableEntity, core.ForPeople(err.Error()))
			return
		}
		woken := res.Woken
		if woken == nil {
			woken = []string{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"thread": res.Thread, "woken": woken})
	})
	s.mux.HandleFunc("GET /api/v1/threads/{id}/draft", func(w http.ResponseWriter, r *http.Request) {
		id, ok := pathID(w, r)
		if !ok {
			return
		}
		writeJSON(w, http.StatusOK, c.draft(core.ThreadID(id)))
	})
}
