package feishu

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"openbot/adapters/internal/ingress"
	"openbot/adapters/internal/stream"
	"openbot/core"
	"openbot/internal/lru"

	"openbot/internal/waitctx"
)

// Engine is the part of *core.Engine the adapter uses.
type Engine interface {
	// Ingest stores one inbound human message and routes it in one transaction
	// (core.Engine.Ingest); the platform is acknowledged only after it returns nil.
	Ingest(ctx context.Context, in core.Inbound) (core.IngestResult, error)
	// Answer records a verified button click on a question card in one short
	// transaction (core.Engine.Answer, DESIGN.md §5); the card response is sent after it
	// returns, and the card itself is updated later by ResolveQuestion.
	Answer(ctx context.Context, a core.Answer) (core.AnswerResult, error)
}

// Cursors persists small flags durably (core.Cursors: Cursor returns "" for a
// name never set; both honour ctx). cmd passes core.StoreCursors(store); adapters
// never import the store.
type Cursors = core.Cursors

// Modes of receiving events (DESIGN.md §2: webhook or long connection).
const (
	ModeWebsocket = "websocket" // long connection; no public URL needed
	ModeWebhook   = "webhook"   // events POSTed to the shared HTTP listener
)

// DM policies: core's (core/pairing.go), as for Telegram.
const (
	DMPairing   = core.DMPairing   // unknown people get a pairing code (the default)
	DMAllowlist = core.DMAllowlist // only AllowUsers, owners and paired people in p2p chats
	DMOpen      = core.DMOpen      // anyone who can reach the app may
	DMDisabled  = core.DMDisabled  // nobody may
)

// DefaultBaseURL is the Feishu open platform; Lark tenants use LarkBaseURL.
const (
	DefaultBaseURL = "https://open.feishu.cn"
	LarkBaseURL    = "https://open.larksuite.com"
)

// Options configures an Adapter.
type Options struct {
	// Name is the account name; the account is "feishu/<Name>" and webhooks are
	// mounted under /feishu/<Name>/. Required.
	Name string
	// Bot is the handle this app speaks as, or "*" for the whole team. Required.
	Bot string
	// AppID and AppSecret are the app's credentials. Required.
	AppID, AppSecret string
	// Mode is ModeWebsocket (default) or ModeWebhook.
	Mode string
	// VerificationToken is compared with the token of every webhook event. In
	// webhook mode it or EncryptKey is required.
	VerificationToken string
	// EncryptKey, when set, makes webhook bodies AES-256-CBC encrypted and signed.
	EncryptKey string
	// BaseURL is the Open API origin: DefaultBaseURL, LarkBaseURL, or a fake's URL.
	BaseURL string
	// AllowUsers are the open_ids (or user_ids) allowed in p2p chats under
	// DMAllowlist.
	AllowUsers []string
	// DMPolicy is one of core.DMPolicies, default DMPairing; the engine
	// decides (core.AdmitDM).
	DMPolicy string
	// Bots are the configured bots, so a text "@handle" in a group counts as a
	// mention that may start a thread.
	Bots []core.BotProfile
	// Engine receives inbound messages. Required.
	Engine Engine
	// Cursors persists a pending "/new" per conversation (core.StoreCursors), so a
	// restart does not forget it. Without it the flag is kept in memory only.
	Cursors Cursors
	// Logger defaults to discarding; HTTPClient to a client with no timeout of its
	// own (every call has one); Clock to the system clock.
	Logger     *slog.Logger
	HTTPClient *http.Client
	Clock      core.Clock
	// Streaming shows a bot's reply while it is written, by updating its card
	// (core.Streamer, DESIGN.md §6); config feishu[].streaming.
	Streaming bool
	// StreamInterval is the least time between two updates of one conversation's
	// streamed reply; default DefaultStreamInterval.
	StreamInterval time.Duration
	// WorkingEmoji is the reaction (emoji_type) put on the message a bot works on
	// (core.WorkIndicator); default DefaultWorkingEmoji, "-" shows none.
	WorkingEmoji string
}

// Adapter is one Feishu app. It implements core.Adapter (Deliver), core.Runner (Run:
// the long connection, or waiting in webhook mode), core.WebhookMounter,
// core.Streamer (stream.go) and core.WorkIndicator (working.go). All
// methods are safe for concurrent use.
type Adapter struct {
	ingress    ingress.State // IngressReady, IngressDown (live.go)
	pulse      atomic.Int64  // Pulse, in Unix nanoseconds (live.go)
	name       string
	account    core.AccountID
	bot        string
	mode       string
	token      string
	encryptKey string
	dmPolicy   string
	allow      map[string]bool
	bots       atomic.Pointer[[]core.BotProfile] // SetBots swaps it
	engine     Engine
	cursors    Cursors
	log        *slog.Logger
	clock      core.Clock
	http       *http.Client
	api        *apiClient

	pace    stream.Pace
	working *working // reactions on messages bots work on (working.go)

	notices chan notice // short replies sent by Run's notice loop; bounded
	// reconnectFloor is the smallest wait between long-connection attempts, so a
	// server that says "0 s" never makes a hot loop.
	reconnectFloor time.Duration
	// abandon ends the long connection of the moment (Reconnect, live.go).
	abandon atomic.Pointer[context.CancelFunc]

	mu        sync.Mutex // guards botOpenID
	botOpenID string
	fresh     *lru.Cache[core.ConversationRef, bool] // conversations whose next message starts a new thread (/new), when there are no Cursors; bounded (commands.go)
	names     *lru.Cache[string, string]             // sender display names by open_id ("" when the lookup failed); bounded (names.go)

}

var (
	_ core.Adapter        = (*Adapter)(nil)
	_ core.Runner         = (*Adapter)(nil)
	_ core.WebhookMounter = (*Adapter)(nil)
	_ core.MessageKeyer   = (*Adapter)(nil)
)

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// noticeQueue bounds the short replies (not-allowed, unsupported type) waiting to be
// sent; more are dropped with a log line.
const noticeQueue = 64

// New validates opts and returns an Adapter. It does no I/O.
func New(opts Options) (*Adapter, error) {
	var missing []string
	for name, v := range map[string]string{"Name": opts.Name, "Bot": opts.Bot, "AppID": opts.AppID, "AppSecret": opts.AppSecret} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if opts.Engine == nil {
		missing = append(missing, "Engine")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("feishu: Options %s required", strings.Join(missing, ", "))
	}
	switch opts.Mode {
	case "":
		opts.Mode = ModeWebsocket
	case ModeWebsocket, ModeWebhook:
	default:
		return nil, fmt.Errorf("feishu: unknown mode %q", opts.Mode)
	}
	if opts.Mode == ModeWebhook && opts.VerificationToken == "" && opts.EncryptKey == "" {
		return nil, errors.New("feishu: webhook mode needs VerificationToken or EncryptKey")
	}
	switch opts.DMPolicy {
	case "", DMPairing, DMAllowlist, DMOpen, DMDisabled:
	default:
		return nil, fmt.Errorf("feishu: unknown dm policy %q", opts.DMPolicy)
	}
	opts.BaseURL = cmp.Or(opts.BaseURL, DefaultBaseURL)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	if opts.Clock == nil {
		opts.Clock = systemClock{}
	}
	log := opts.Logger.With("account", "feishu/"+opts.Name)
	a := &Adapter{
		name:           opts.Name,
		account:        core.AccountID("feishu/" + opts.Name),
		bot:            opts.Bot,
		mode:           opts.Mode,
		token:          opts.VerificationToken,
		encryptKey:     opts.EncryptKey,
		dmPolicy:       cmp.Or(opts.DMPolicy, DMPairing),
		allow:          map[string]bool{},
		engine:         opts.Engine,
		cursors:        opts.Cursors,
		log:            log,
		clock:          opts.Clock,
		http:           opts.HTTPClient,
		notices:        make(chan notice, noticeQueue),
		fresh:          lru.New[core.ConversationRef, bool](maxFresh, freshTTL),
		names:          lru.New[string, string](maxNames, nameTTL),
		api:            newAPIClient(opts.BaseURL, opts.AppID, opts.AppSecret, opts.HTTPClient, opts.Clock, log),
		reconnectFloor: 100 * time.Millisecond,
	}
	a.pace, a.working = stream.NewPace(opts.Streaming, opts.StreamInterval, DefaultStreamInterval), newWorking(opts.WorkingEmoji)
	for _, u := range opts.AllowUsers {
		a.allow[u] = true
	}
	a.SetBots(opts.Bots)
	return a, nil
}

// Account returns "feishu/<name>".
func (a *Adapter) Account() core.AccountID { return a.account }

// Bot returns the handle this app speaks as, or "*".
func (a *Adapter) Bot() string { return a.bot }

// BotOpenID returns the app's bot open_id once Run has learned it, else "".
func (a *Adapter) BotOpenID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.botOpenID
}

// Run learns the bot's open_id (GET /open-apis/bot/v3/info, retried with backoff),
// then in websocket mode runs the long connection until ctx is done, and in webhook
// mode waits for ctx (the handlers run on the shared listener). It also sends the
// queued short notices. It returns nil when ctx is done, or an error when the app's
// credentials or long-connection permission are refused for good.
func (a *Adapter) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.noticeLoop(ctx)
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()

	if err := a.learnBot(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if a.mode == ModeWebhook {
		<-ctx.Done()
		return nil
	}
	return a.runLongConnection(ctx)
}

// learnBot fetches the bot's open_id, retrying temporary failures with backoff.
func (a *Adapter) learnBot(ctx context.Context) error {
	wait := time.Second
	for {
		id, name, err := a.api.botInfo(ctx)
		if err == nil {
			a.mu.Lock()
			a.botOpenID = id
			a.mu.Unlock()
			a.log.Info("feishu bot identified", "open_id", id, "app_name", name)
			return nil
		}
		var ae *APIError
		if errors.As(err, &ae) && ae.Permanent() {
			return fmt.Errorf("feishu: learning the bot's open_id: %w", err)
		}
		a.log.Warn("feishu bot info failed; retrying", "err", err, "wait", wait)
		if err := waitctx.Sleep(ctx, wait+rand.N(wait/2+1)); err != nil {
			return err
		}
		wait = min(2*wait, time.Minute)
	}
}

// notice is a short reply to one message that starts no run. inThread replies in
// the message's topic thread (group messages), as Deliver does.
type notice struct {
	replyTo  string
	text     string
	inThread bool
}

// queueNotice queues a short text reply to messageID; it never blocks.
func (a *Adapter) queueNotice(messageID, text string, inThread bool) {
	select {
	case a.notices <- notice{messageID, text, inThread}:
	default:
		a.log.Warn("feishu notice queue full; dropping", "message_id", messageID)
	}
}

func (a *Adapter) noticeLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-a.notices:
			if _, err := a.api.replyMessage(ctx, n.replyTo, "text", textContent(n.text), n.inThread, ""); err != nil {
				a.log.Warn("feishu notice failed", "message_id", n.replyTo, "err", err)
			}
		}
	}
}

// permanentError marks a Deliver failure that retrying cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string             { return e.err.Error() }
func (e permanentError) Unwrap() error             { return e.err }
func (e permanentError) Permanent() bool           { return true }
func (e permanentError) RetryAfter() time.Duration { return 0 }

// Deliver posts one message (DESIGN.md §3 "Where replies go", §4). In a group topic it replies to
// d.ReplyTo (else the topic root) with reply_in_thread; in a p2p chat it replies to
// d.ReplyTo when set, else creates a message in the chat. The text is rendered by
// Format into a card markdown element and split by Split; a card the server rejects
// is sent once more as plain text. A bot's name is shown in bold at the top when
// this app does not speak as that bot ("*" accounts, mirrored hand-offs). Every
// chunk carries a uuid derived from the outbox id, so a retried delivery is not
// posted twice within the platform's one-hour window. It returns the first chunk's
// message_id; errors are *APIError (a core.DeliveryError) or transport errors. A
// reply that was streamed (d.Streamed) updates the streamed cards instead
// (deliverStreamed).
func (a *Adapter) Deliver(ctx context.Context, d core.Delivery) (string, error) {
	conv, err := ParseConversation(d.Conversation)
	if err != nil {
		return "", permanentError{err}
	}
	if len(d.Streamed) > 0 {
		return a.deliverStreamed(ctx, conv, d)
	}
	text := d.Text
	if d.Sender.Handle != "" && (a.bot == "*" || d.Sender.Handle != a.bot) {
		name := cmp.Or(d.Sender.Name, d.Sender.Handle)
		text = "**" + name + "**\n" + text
	}
	var first string
	for i, chunk := range Split(Format(text), MaxChunk) {
		uuid := ""
		if d.Outbox != 0 {
			uuid = fmt.Sprintf("openbot-%d-%d-%d", d.Outbox, d.Message, i)
		}
		id, err := a.send(ctx, conv, d.ReplyTo, chunk, uuid)
		if err != nil {
			return first, err
		}
		first = cmp.Or(first, id)
	}
	return first, nil
}

// send posts one chunk as a card, falling back to plain text once when the server
// rejects the card.
func (a *Adapter) send(ctx context.Context, conv Conversation, replyTo, chunk, uuid string) (string, error) {
	id, err := a.post(ctx, conv, replyTo, "interactive", Card(chunk), uuid)
	var ae *APIError
	if errors.As(err, &ae) && ae.rejectedContent() {
		a.log.Warn("feishu card rejected; sending plain text", "err", err)
		if uuid != "" {
			uuid += "-t"
		}
		return a.post(ctx, conv, replyTo, "text", textContent(strings.ReplaceAll(chunk, "&#60;", "<")), uuid)
	}
	return id, err
}

func (a *Adapter) post(ctx context.Context, conv Conversation, replyTo, msgType, content, uuid string) (string, error) {
	var (
		m   sentMessage
		err error
	)
	switch {
	case conv.Root != "":
		replyTo = cmp.Or(replyTo, conv.Root)
		m, err = a.api.replyMessage(ctx, replyTo, msgType, content, true, uuid)
	case replyTo != "":
		m, err = a.api.replyMessage(ctx, replyTo, msgType, content, false, uuid)
	default:
		m, err = a.api.createMessage(ctx, "chat_id", conv.Chat, msgType, content, uuid)
	}
	return m.MessageID, err
}

// MessageKey implements core.MessageKeyer: the platform identity of a message this
// app posted (DedupKey of its message_id, whatever the conversation), so a
// person's reply to it (parent_id) joins its thread (core.Inbound.ReplyToKey;
// DESIGN.md §3).
func (a *Adapter) MessageKey(_ core.ConversationRef, platformID string) string {
	if platformID == "" {
		return ""
	}
	return DedupKey(platformID)
}

// UpdateCard replaces the card of a message this app sent with a card showing the
// Markdown md (PATCH /open-apis/im/v1/messages/:id). It is for later capabilities
// (question buttons replaced by "Approved by ..."); errors are *APIError.
func (a *Adapter) UpdateCard(ctx context.Context, messageID, md string) error {
	return a.api.patchCard(ctx, messageID, Card(Format(md)))
}

// SetBots replaces the team the adapter knows (Options.Bots), for a configuration
// reload. Safe for concurrent use.
func (a *Adapter) SetBots(bots []core.BotProfile) {
	cp := append([]core.BotProfile(nil), bots...)
	a.bots.Store(&cp)
}

// roster returns the current team.
func (a *Adapter) roster() []core.BotProfile {
	if p := a.bots.Load(); p != nil {
		return *p
	}
	return nil
}
