package telegram

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"openbot/adapters/internal/ingress"
	"openbot/adapters/internal/stream"
	"openbot/core"
	"openbot/internal/lru"
)

// Engine is the part of core.Engine an adapter uses: Ingest stores one inbound
// message in one transaction (exactly once per DedupKey) and returns nil only once it
// is durable; Answer records a button click on a question in one short transaction
// (the first valid answer wins; core checks the approvers) and returns nil only once
// the outcome is durable (DESIGN.md §5).
type Engine interface {
	Ingest(ctx context.Context, in core.Inbound) (core.IngestResult, error)
	Answer(ctx context.Context, a core.Answer) (core.AnswerResult, error)
}

// Cursors persists small adapter positions durably (core.Store's Cursor/SetCursor;
// cmd implements it, adapters never import the store). Cursor returns "" when the
// name was never set. Both honour ctx.
type Cursors = core.Cursors

// Modes of receiving updates (DESIGN.md §2).
const (
	ModePolling = "polling" // our own getUpdates loop (the default)
	ModeWebhook = "webhook" // setWebhook plus POST /telegram/<name>/webhook
)

// DM policies: core's (core/pairing.go).
const (
	DMPairing   = core.DMPairing   // unknown people get a pairing code (the default)
	DMAllowlist = core.DMAllowlist // only AllowUsers, owners and paired people may DM the bot
	DMOpen      = core.DMOpen      // anyone may
	DMDisabled  = core.DMDisabled  // nobody may
)

// DefaultPollTimeout is the getUpdates long-poll timeout when Options.PollTimeout is 0.
const DefaultPollTimeout = 30 * time.Second

// Options configures one Telegram account (config list "telegram:").
type Options struct {
	// Name is the account name: AccountID "telegram/<Name>", webhook path
	// "/telegram/<Name>/webhook", cursor "telegram/<Name>/offset". Required.
	Name string
	// Bot is the handle this account speaks as, or "*" to speak for the whole team
	// (each reply then starts with the bot's name in bold). Required.
	Bot string
	// Token is the BotFather token. Required; never logged.
	Token string
	// Mode is ModePolling (default) or ModeWebhook.
	Mode string
	// WebhookURL is the public HTTPS URL Telegram posts to (webhook mode; required
	// there). It should end in "/telegram/<Name>/webhook".
	WebhookURL string
	// SecretToken is setWebhook's secret_token, 1-256 characters of A-Z a-z 0-9 _ -,
	// checked on every webhook POST (required in webhook mode).
	SecretToken string
	// APIEndpoint is the Bot API server: a base URL ("http://127.0.0.1:8081") or a
	// format string with two %s for token and method as telegram-bot-api takes it.
	// Default "https://api.telegram.org/bot%s/%s".
	APIEndpoint string
	// AllowUsers may DM the bot under DMPairing and DMAllowlist: numeric user
	// ids or usernames (with or without "@", case-insensitive).
	AllowUsers []string
	// DMPolicy is one of core.DMPolicies, default DMPairing; the engine decides
	// (core.AdmitDM). Group messages are not subject to it.
	DMPolicy string
	// Bots is the team, listed by /help and used to check Bot.
	Bots []core.BotProfile
	// Peers, shared by all Telegram accounts of this openbot, tells a mention of
	// another of the team's bot accounts from a mention of a person. Nil: every
	// other @username counts as a person.
	Peers *Peers
	// Engine receives inbound messages. Required.
	Engine Engine
	// Cursors stores the polling offset. Required in polling mode.
	Cursors Cursors
	// Logger defaults to discarding.
	Logger *slog.Logger
	// HTTPClient is used for every Bot API call; default a new http.Client. Calls
	// are bounded by their own timeouts, so it needs none.
	HTTPClient *http.Client
	// PollTimeout is getUpdates' long-poll timeout (whole seconds, at least 1);
	// default DefaultPollTimeout.
	PollTimeout time.Duration
	// Streaming shows a bot's reply while it is written, through editMessageText
	// (core.Streamer, DESIGN.md §6); config telegram[].streaming.
	Streaming bool
	// StreamInterval is the least time between two edits of one chat's streamed
	// reply; default DefaultStreamInterval.
	StreamInterval time.Duration
}

// Adapter is one Telegram bot account. It implements core.Adapter, core.Runner,
// core.WebhookMounter, core.QuestionAdapter, core.WorkIndicator and core.Streamer. Create it with
// New; Run learns the bot's identity (getMe) before any update is handled.
type Adapter struct {
	ingress    ingress.State // IngressReady, IngressDown (live.go)
	name       string
	account    core.AccountID
	bot        string
	token      string
	mode       string
	hookURL    string
	secret     string
	endpoint   string
	allow      map[string]bool                   // user ids and lowercased usernames
	policy     string                            // dm_policy
	bots       atomic.Pointer[[]core.BotProfile] // SetBots swaps it
	peers      *Peers
	engine     Engine
	cursors    Cursors
	log        *slog.Logger
	hc         *http.Client
	pollWait   time.Duration
	pulse      atomic.Int64                       // Pulse, in Unix nanoseconds
	abandon    atomic.Pointer[context.CancelFunc] // Reconnect: ends the getUpdates in flight
	posted     atomic.Int64                       // LastPost, in Unix nanoseconds
	limited    atomic.Int64                       // RateLimited: 429 answers
	limitedFor atomic.Int64                       // RateLimited: the retry_after they asked for, in nanoseconds

	pace stream.Pace

	mu sync.Mutex
	me *tgbotapi.User // set by Run after getMe
	// newPending remembers a bare /new per conversation when there is no Cursors
	// store (webhook mode without one): at most maxPendingNew, for pendingNewTTL.
	newPending *lru.Cache[Conversation, bool]
	progress   *lru.Cache[core.OutboxID, sent] // parts of a split message already sent
	typing     *typing                         // conversations bots work in (typing.go)

}

var (
	_ core.Adapter        = (*Adapter)(nil)
	_ core.Runner         = (*Adapter)(nil)
	_ core.WebhookMounter = (*Adapter)(nil)
)

var nameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]+$`) })

// validSecret reports whether s can be Telegram's webhook secret_token: 1 to 256
// of A-Z a-z 0-9 _ -.
func validSecret(s string) bool {
	const allowed = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
	return len(s) >= 1 && len(s) <= 256 && strings.Trim(s, allowed) == ""
}

// New validates opts and returns an Adapter. It does no I/O. Every problem is
// reported, joined.
func New(opts Options) (*Adapter, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("telegram: "+format, args...)) }
	if !nameRe().MatchString(opts.Name) {
		bad("account name %q must be non-empty letters, digits, '_', '.' or '-'", opts.Name)
	}
	if opts.Token == "" {
		bad("account %q: token is required", opts.Name)
	}
	if opts.Engine == nil {
		bad("account %q: Engine is required", opts.Name)
	}
	switch {
	case opts.Bot == "":
		bad("account %q: bot is required (a handle or \"*\")", opts.Name)
	case opts.Bot != "*" && len(opts.Bots) > 0 && !hasBot(opts.Bots, opts.Bot):
		bad("account %q: bot %q is not configured", opts.Name, opts.Bot)
	}
	mode := cmp.Or(opts.Mode, ModePolling)
	switch mode {
	case ModePolling:
		if opts.Cursors == nil {
			bad("account %q: polling needs Cursors to persist the offset", opts.Name)
		}
	case ModeWebhook:
		if !strings.HasPrefix(opts.WebhookURL, "https://") && !strings.HasPrefix(opts.WebhookURL, "http://") {
			bad("account %q: webhook mode needs webhook_url", opts.Name)
		}
		if !validSecret(opts.SecretToken) {
			bad("account %q: webhook mode needs secret_token of 1-256 characters A-Z a-z 0-9 _ -", opts.Name)
		}
	default:
		bad("account %q: mode %q is not %q or %q", opts.Name, opts.Mode, ModePolling, ModeWebhook)
	}
	policy := cmp.Or(opts.DMPolicy, DMPairing)
	if !slices.Contains(core.DMPolicies, policy) {
		bad("account %q: dm_policy %q is not one of %s", opts.Name, opts.DMPolicy, strings.Join(core.DMPolicies, ", "))
	}
	if opts.PollTimeout < 0 {
		bad("account %q: negative poll timeout", opts.Name)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	a := &Adapter{
		newPending: lru.New[Conversation, bool](maxPendingNew, pendingNewTTL),
		name:       opts.Name,
		account:    AccountID(opts.Name),
		bot:        opts.Bot,
		token:      opts.Token,
		mode:       mode,
		hookURL:    opts.WebhookURL,
		secret:     opts.SecretToken,
		endpoint:   endpointFormat(opts.APIEndpoint),
		allow:      map[string]bool{},
		policy:     policy,
		peers:      opts.Peers,
		engine:     opts.Engine,
		cursors:    opts.Cursors,
		log:        opts.Logger,
		hc:         opts.HTTPClient,
		pollWait:   opts.PollTimeout,
		progress:   lru.New[core.OutboxID, sent](maxProgress, 0),
		typing:     newTyping(),
	}
	a.SetBots(opts.Bots)
	for _, u := range opts.AllowUsers {
		if u = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(u), "@")); u != "" {
			a.allow[u] = true
		}
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.log = a.log.With("account", string(a.account))
	if a.hc == nil {
		a.hc = &http.Client{}
	}
	a.pollWait = cmp.Or(a.pollWait, DefaultPollTimeout)
	a.pace = stream.NewPace(opts.Streaming, opts.StreamInterval, DefaultStreamInterval)
	if a.pollWait < time.Second {
		a.pollWait = time.Second
	}
	return a, nil
}

func hasBot(bots []core.BotProfile, handle string) bool {
	for _, b := range bots {
		if strings.EqualFold(b.Handle, handle) {
			return true
		}
	}
	return false
}

// endpointFormat turns Options.APIEndpoint into telegram-bot-api's format string.
func endpointFormat(ep string) string {
	switch {
	case ep == "":
		return tgbotapi.APIEndpoint
	case strings.Contains(ep, "%s"):
		return ep
	default:
		return strings.TrimRight(ep, "/") + "/bot%s/%s"
	}
}

// Account returns "telegram/<name>".
func (a *Adapter) Account() core.AccountID { return a.account }

// Bot returns the handle this account speaks as, or "*".
func (a *Adapter) Bot() string { return a.bot }

// Self returns the bot user learned by getMe, and false before Run has learned it.
func (a *Adapter) Self() (tgbotapi.User, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.me == nil {
		return tgbotapi.User{}, false
	}
	return *a.me, true
}

// mentionHandle is what a native mention of this account means in Inbound.Mentions:
// its bot's handle, or "*" (the thread's default bot) for a whole-team account.
func (a *Adapter) mentionHandle() string { return a.bot }

// StoreCursors adapts a core.Store's Cursor/SetCursor to Cursors, each call one
// transaction, for cmd and end-to-end tests (core.StoreCursors). An unset cursor
// reads as "".
func StoreCursors(s core.Store) Cursors { return core.StoreCursors(s) }

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
