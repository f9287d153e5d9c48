// Package slack puts openbot's bot team into Slack (DESIGN.md §§1-4, 9)
// through github.com/slack-go/slack. One Adapter is one Slack app (an account): it
// speaks as one bot or, with Bot "*", for the whole team.
//
// The package splits as STYLE.md's adapter boundary asks: transport (socket.go for
// Socket Mode, http.go for the Events API, inbound.go turning events into
// core.Inbound, outbound.go for Deliver), an id codec (ids.go), a pure Markdown to
// mrkdwn formatter (format.go) and a splitter (split.go). It imports core and SDKs
// only, never agents, store or config.
package slack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slack-go/slack"

	"openbot/adapters/internal/ingress"
	"openbot/adapters/internal/stream"
	"openbot/core"
	"openbot/internal/lru"
	"openbot/internal/waitctx"
)

// Modes of ingress.
const (
	ModeSocket = "socket" // Socket Mode websocket (default); needs AppToken
	ModeHTTP   = "http"   // Events API on the shared listener; needs SigningSecret
)

// Engine is the part of core.Engine the adapter needs: the durable, exactly-once
// ingestion of one inbound message (DESIGN.md §4) and the answer to a question from
// a verified button click (DESIGN.md §5), each one short store
// transaction. Both must be safe for concurrent use.
type Engine interface {
	Ingest(ctx context.Context, in core.Inbound) (core.IngestResult, error)
	Answer(ctx context.Context, ans core.Answer) (core.AnswerResult, error)
}

// Options configures an Adapter (one Slack account, DESIGN.md §1). Name, BotToken and Engine are
// required; so is AppToken in socket mode and SigningSecret in http mode.
type Options struct {
	// Name is the account name from config; the AccountID is "slack/<Name>" and the
	// HTTP endpoints are /slack/<Name>/events and /slack/<Name>/interactive.
	Name string
	// Bot is the handle of the bot this app speaks as, or "*" for the whole team.
	Bot string
	// Mode is ModeSocket (default) or ModeHTTP.
	Mode string
	// AppToken is the app-level token (xapp-…) for Socket Mode.
	AppToken string
	// BotToken is the bot token (xoxb-…) for the Web API.
	BotToken string
	// SigningSecret verifies Events API and interactivity requests (v0 signatures).
	SigningSecret string
	// APIURL overrides the Web API base (default https://slack.com/api/); it must end
	// in "/". Used for proxies and the slacktest fake.
	APIURL string
	// AllowChannels and AllowUsers, when not empty, are the only channel ids and user
	// ids whose messages are ingested; others are ignored (logged at debug).
	AllowChannels []string
	AllowUsers    []string
	// DMPolicy is one of core.DMPolicies, default core.DMPairing: who may write
	// to the app in a DM, decided by the engine (core.AdmitDM). AllowUsers, when
	// set, still refuses everyone else first.
	DMPolicy string
	// Bots are the configured bots: their handles make "@handle" a mention that can
	// start a thread, and a Slack bot user whose name matches a bot becomes @handle.
	Bots []core.BotProfile
	// IconEmoji maps a bot handle to the icon_emoji shown when this app posts for a
	// bot other than its own (needs chat:write.customize); default ":robot_face:".
	IconEmoji map[string]string
	// Engine receives inbound messages.
	Engine Engine
	// State persists a pending /new per DM and finds the bot message a Slack
	// thread hangs under; cmd passes StoreState(store). Nil keeps a pending /new in
	// memory only and does not recognize replies to bot messages.
	State State
	// Logger defaults to a discarding logger.
	Logger *slog.Logger
	// HTTPClient is used for the Web API; default a client with a 30 s timeout.
	HTTPClient *http.Client
	// Clock is used for the signature window and caches; default the system clock.
	Clock core.Clock
	// Streaming shows a bot's reply while it is written, through chat.update
	// (core.Streamer, DESIGN.md §6); config slack[].streaming.
	Streaming bool
	// StreamInterval is the least time between two edits of one conversation's
	// streamed reply; default DefaultStreamInterval.
	StreamInterval time.Duration
}

// Errors returned by New.
var (
	ErrNoName   = errors.New("slack: account name is empty")
	ErrNoToken  = errors.New("slack: bot token is empty")
	ErrNoEngine = errors.New("slack: engine is nil")
	// ErrNoAppToken is returned by New in socket mode without an app-level token.
	ErrNoAppToken = errors.New("slack: socket mode needs an app-level token (xapp-…)")
	// ErrNoSigningSecret is returned by New in http mode without a signing secret.
	ErrNoSigningSecret = errors.New("slack: http mode needs a signing secret")
	// ErrBadMode is returned by New for a mode other than "socket" and "http".
	ErrBadMode = errors.New(`slack: mode must be "socket" or "http"`)
)

// Timeouts of the adapter's own calls.
const (
	apiTimeout      = 15 * time.Second // one Web API call
	userInfoTimeout = 2 * time.Second  // users.info while answering an event
)

// Adapter is one Slack app. It implements core.Adapter, core.QuestionAdapter,
// core.Runner, core.WebhookMounter, core.WorkIndicator and core.Streamer. Its methods are safe for
// concurrent use.
type Adapter struct {
	ingress ingress.State // IngressReady, IngressDown (live.go)
	name    string
	bot     string
	mode    string
	appTok  string
	secret  string
	allowCh map[string]bool
	allowU  map[string]bool
	// dmPolicy is Options.DMPolicy with its default.
	dmPolicy string
	bots     atomic.Pointer[map[string]core.BotProfile] // by lower-case handle; SetBots swaps it
	icons    map[string]string
	engine   Engine
	state    State
	log      *slog.Logger
	clock    core.Clock
	api      *slack.Client
	apiOpts  []slack.Option

	pace stream.Pace

	users    *lru.Cache[string, cachedUser]      // users.info answers, for an hour
	progress *lru.Cache[core.OutboxID, progress] // parts of a split reply already posted
	working  *working
	bg       *background
	stops    stopSeen     // plain-text /stop and /usage messages handled lately (stop.go, usage.go)
	pulse    atomic.Int64 // Pulse, in Unix nanoseconds (live.go)
	posted   atomic.Int64 // LastPost, in Unix nanoseconds (live.go)
	// limited and limitedFor are RateLimited's answers and waits (nanoseconds).
	limited, limitedFor atomic.Int64
	// abandon ends the Socket Mode connection of the moment (Reconnect).
	abandon atomic.Pointer[context.CancelFunc]

	idMu sync.Mutex
	id   *identity // nil until auth.test succeeded

}

// identity is what auth.test says about this app.
type identity struct {
	Team    string // team_id
	UserID  string // the app's bot user, "U…"
	BotID   string // "B…"
	BotName string
}

var (
	_ core.Adapter        = (*Adapter)(nil)
	_ core.Runner         = (*Adapter)(nil)
	_ core.WebhookMounter = (*Adapter)(nil)
)

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// New checks opts and builds an Adapter. It does no I/O: auth.test runs in Run (or on
// the first event). Errors: ErrNoName, ErrNoToken, ErrNoEngine, ErrBadMode,
// ErrNoAppToken, ErrNoSigningSecret.
func New(opts Options) (*Adapter, error) {
	switch {
	case opts.Name == "":
		return nil, ErrNoName
	case opts.BotToken == "":
		return nil, ErrNoToken
	case opts.Engine == nil:
		return nil, ErrNoEngine
	}
	opts.Mode = cmp.Or(opts.Mode, ModeSocket)
	switch opts.Mode {
	case ModeSocket:
		if opts.AppToken == "" {
			return nil, ErrNoAppToken
		}
	case ModeHTTP:
		if opts.SigningSecret == "" {
			return nil, ErrNoSigningSecret
		}
	default:
		return nil, fmt.Errorf("%w, got %q", ErrBadMode, opts.Mode)
	}
	if opts.DMPolicy != "" && !slices.Contains(core.DMPolicies, opts.DMPolicy) {
		return nil, fmt.Errorf("slack: dm_policy %q is not one of %s", opts.DMPolicy, strings.Join(core.DMPolicies, ", "))
	}
	opts.Bot = cmp.Or(opts.Bot, "*")
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = systemClock{}
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	a := &Adapter{
		name:     opts.Name,
		bot:      strings.TrimPrefix(opts.Bot, "@"),
		mode:     opts.Mode,
		appTok:   opts.AppToken,
		secret:   opts.SigningSecret,
		allowCh:  set(opts.AllowChannels),
		allowU:   set(opts.AllowUsers),
		dmPolicy: cmp.Or(opts.DMPolicy, core.DMPairing),
		icons:    opts.IconEmoji,
		engine:   opts.Engine,
		state:    opts.State,
		log:      opts.Logger.With("account", string(AccountID(opts.Name))),
		clock:    opts.Clock,
		users:    lru.New[string, cachedUser](1000, time.Hour),
		progress: lru.New[core.OutboxID, progress](1024, 0),
		working:  newWorking(reactionLinger),
		bg:       newBackground(maxBackground),
	}
	if a.state == nil {
		a.state = &memState{}
	}
	a.pace = stream.NewPace(opts.Streaming, opts.StreamInterval, DefaultStreamInterval)
	a.SetBots(opts.Bots)
	a.apiOpts = []slack.Option{
		slack.OptionHTTPClient(limitCounter{c: opts.HTTPClient, limited: &a.limited, limitedFor: &a.limitedFor}),
		slack.OptionAppLevelToken(opts.AppToken),
		slack.OptionLog(slogPrinter{a.log}),
	}
	if opts.APIURL != "" {
		u := opts.APIURL
		if !strings.HasSuffix(u, "/") {
			u += "/"
		}
		a.apiOpts = append(a.apiOpts, slack.OptionAPIURL(u))
	}
	a.api = slack.New(opts.BotToken, a.apiOpts...)
	return a, nil
}

func set(xs []string) map[string]bool {
	if len(xs) == 0 {
		return nil
	}
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// Account returns "slack/<name>".
func (a *Adapter) Account() core.AccountID { return AccountID(a.name) }

// Bot returns the handle this app speaks as, or "*".
func (a *Adapter) Bot() string { return a.bot }

// identity returns the app's identity, calling auth.test once it is first needed.
// Concurrent callers wait for the one call in flight.
func (a *Adapter) identity(ctx context.Context) (identity, error) {
	a.idMu.Lock()
	defer a.idMu.Unlock()
	if a.id != nil {
		return *a.id, nil
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	res, err := a.api.AuthTestContext(ctx)
	if err != nil {
		return identity{}, fmt.Errorf("slack auth.test: %w", err)
	}
	a.id = &identity{Team: res.TeamID, UserID: res.UserID, BotID: res.BotID, BotName: res.User}
	a.log.Info("slack account ready", "team", res.TeamID, "bot_user", res.UserID, "mode", a.mode)
	return *a.id, nil
}

// Run learns the app's bot user id through auth.test (retrying transient failures
// with backoff), then in socket mode runs the Socket Mode connection, reconnecting
// with backoff, until ctx is done; in http mode it just waits for ctx (events arrive
// through MountHTTP's handlers). It returns nil when ctx is done and an error when
// the credentials are refused for good (invalid_auth, account_inactive, …). Before
// returning it waits up to 5 s for notices still being sent after button clicks
// and for working reactions still to be taken off (see Working).
func (a *Adapter) Run(ctx context.Context) error {
	a.openWorking()
	defer a.bg.wait(drainGrace)
	defer a.closeWorking(drainGrace)
	bo := newBackoff(time.Second, 5*time.Minute)
	for {
		_, err := a.identity(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		if permanentAuth(err) {
			return err
		}
		d := bo.next()
		a.log.Warn("slack auth.test failed, retrying", "err", err, "in", d)
		if !sleep(ctx, d) {
			return nil
		}
	}
	if a.mode == ModeHTTP {
		<-ctx.Done()
		return nil
	}
	return a.runSocketLoop(ctx)
}

// permanentAuth reports Slack errors that retrying cannot fix.
func permanentAuth(err error) bool {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "invalid_auth", "account_inactive", "not_authed", "token_revoked", "token_expired", "not_allowed_token_type", "missing_scope":
			return true
		}
	}
	switch err.Error() { // socketmode returns these as plain errors
	case "invalid_auth", "account_inactive", "not_authed", "token_revoked":
		return true
	}
	return false
}

// backoff doubles a delay from min up to max; reset starts over. Not safe for
// concurrent use: each loop owns its own.
type backoff struct {
	cur, min, max time.Duration
}

func newBackoff(min, max time.Duration) *backoff { return &backoff{min: min, max: max} }

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(b.cur*2, b.max)
	}
	return b.cur
}

func (b *backoff) reset() { b.cur = 0 }

// sleep waits d or until ctx is done; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool { return waitctx.Sleep(ctx, d) == nil }

// slogPrinter lets slack-go's debug logger write to slog at debug level.
type slogPrinter struct{ l *slog.Logger }

func (p slogPrinter) Output(_ int, s string) error {
	p.l.Debug(strings.TrimSpace(s), "component", "slack-go")
	return nil
}

// SetBots replaces the team the adapter knows (Options.Bots), for a configuration
// reload: "@handle" of a new bot is a mention from now on. Safe for concurrent use.
func (a *Adapter) SetBots(bots []core.BotProfile) {
	m := make(map[string]core.BotProfile, len(bots))
	for _, b := range bots {
		m[strings.ToLower(b.Handle)] = b
	}
	a.bots.Store(&m)
}

// roster returns the current team by lower-case handle.
func (a *Adapter) roster() map[string]core.BotProfile {
	if p := a.bots.Load(); p != nil {
		return *p
	}
	return nil
}
