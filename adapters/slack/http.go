package slack

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
)

// Request signing (DESIGN.md §9; fixtures request_signing_vectors.json).
const (
	// SignatureWindow is how far a request's X-Slack-Request-Timestamp may be from
	// now, either way; older requests are replays and get 401.
	SignatureWindow = 5 * time.Minute
	// maxBody bounds a request body; Slack's event payloads are far smaller.
	maxBody = 1 << 20
)

// Errors of VerifySignature.
var (
	ErrMissingSignature = errors.New("slack: missing X-Slack-Signature or X-Slack-Request-Timestamp")
	ErrExpiredTimestamp = errors.New("slack: request timestamp outside the 5-minute window")
	ErrBadSignature     = errors.New("slack: request signature mismatch")
)

// VerifySignature checks a Slack v0 request signature: X-Slack-Signature must be
// "v0=" + hex(HMAC-SHA256(secret, "v0:" + timestamp + ":" + body)) over the exact
// body bytes, compared in constant time, and X-Slack-Request-Timestamp must be
// within SignatureWindow of now. It returns ErrMissingSignature,
// ErrExpiredTimestamp or ErrBadSignature.
func VerifySignature(h http.Header, body []byte, secret string, now time.Time) error {
	sig, ts := h.Get("X-Slack-Signature"), h.Get("X-Slack-Request-Timestamp")
	if sig == "" || ts == "" || secret == "" {
		return ErrMissingSignature
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); d > SignatureWindow || d < -SignatureWindow {
		return ErrExpiredTimestamp
	}
	hexSig, ok := strings.CutPrefix(sig, "v0=")
	if !ok {
		return ErrBadSignature
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return ErrBadSignature
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + ts + ":"))
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return ErrBadSignature
	}
	return nil
}

// signatureReason words a VerifySignature error for the refusal log.
func signatureReason(err error) string {
	switch {
	case errors.Is(err, ErrMissingSignature):
		return "missing signature headers"
	case errors.Is(err, ErrExpiredTimestamp):
		return "stale or future request timestamp"
	default:
		return "bad signature"
	}
}

// MountHTTP registers the Events API endpoints on the shared listener:
// POST /slack/<name>/events, /slack/<name>/interactive and /slack/<name>/commands
// (slash commands). All verify the v0 signature and the 5-minute window before
// parsing anything (401 otherwise, DESIGN.md §9).
// Without a signing secret nothing is mounted.
func (a *Adapter) MountHTTP(mux *http.ServeMux) {
	if a.secret == "" {
		a.log.Info("slack http endpoints not mounted: no signing secret")
		return
	}
	mux.HandleFunc("POST /slack/"+a.name+"/events", a.serveEvents)
	mux.HandleFunc("POST /slack/"+a.name+"/interactive", a.serveInteractive)
	mux.HandleFunc("POST /slack/"+a.name+"/commands", a.serveCommands)
	mux.HandleFunc("/slack/"+a.name+"/", a.serveOther)
	if a.mode == ModeHTTP {
		a.ingress.MarkLive()
	}
}

// serveOther refuses every other method or path under the account's prefix, with a
// WARN line, so a misconfigured request URL shows up in the log.
func (a *Adapter) serveOther(w http.ResponseWriter, r *http.Request) {
	a.refuse("no such endpoint", "method", r.Method, "path", r.URL.Path)
	http.NotFound(w, r)
}

// readVerified reads the body and verifies it; on failure it has answered already.
func (a *Adapter) readVerified(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		a.refuse("body unreadable or too large", "path", r.URL.Path, "limit", maxBody)
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return nil, false
	}
	if err := VerifySignature(r.Header, body, a.secret, a.clock.Now()); err != nil {
		a.refuse(signatureReason(err), "path", r.URL.Path)
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return nil, false
	}
	return body, true
}

// serveEvents answers url_verification and ingests event callbacks. The 200 is sent
// after the durable Ingest (a single store transaction), well inside Slack's 3
// seconds; if storing fails it answers 500 so Slack retries, and a retry
// (X-Slack-Retry-Num) carries the same message ts, which core deduplicates.
func (a *Adapter) serveEvents(w http.ResponseWriter, r *http.Request) {
	body, ok := a.readVerified(w, r)
	if !ok {
		return
	}
	var outer struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
	}
	if err := json.Unmarshal(body, &outer); err != nil {
		a.refuse("event body is not JSON", "path", r.URL.Path, "err", err)
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	switch outer.Type {
	case slackevents.URLVerification:
		if outer.Challenge == "" {
			a.refuse("url_verification without a challenge", "path", r.URL.Path)
			http.Error(w, "missing challenge", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, outer.Challenge)
		return
	case slackevents.CallbackEvent:
	case slackevents.AppRateLimited:
		a.log.Warn("slack is dropping events: the app exceeded the Events API rate limit")
		w.WriteHeader(http.StatusOK)
		return
	default:
		// Not something openbot asked for; 200 stops Slack's retries.
		a.refuse("unknown event envelope type", "path", r.URL.Path, "type", outer.Type)
		w.WriteHeader(http.StatusOK)
		return
	}
	ev, err := slackevents.ParseEvent(json.RawMessage(body), slackevents.OptionNoVerifyToken())
	if err != nil {
		// An event type slack-go does not know, or a payload that does not decode,
		// is nothing openbot can store; 200 stops Slack's retries.
		a.refuse("event payload does not decode", "path", r.URL.Path, "err", err)
		w.WriteHeader(http.StatusOK)
		return
	}
	if n := r.Header.Get("X-Slack-Retry-Num"); n != "" {
		a.log.Debug("slack event retry", "num", n, "reason", r.Header.Get("X-Slack-Retry-Reason"))
	}
	if err := a.handleEvent(r.Context(), ev); err != nil {
		a.log.Error("slack event not stored", "err", err)
		http.Error(w, "not stored", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// serveInteractive handles button clicks (block_actions; DESIGN.md §5). The
// request is verified before anything is parsed; a click on a question button is
// answered through Engine.Answer (one store transaction, no Web API call), then
// Slack gets its 200 well within its 3 seconds, and only after that the private
// notice (not an approver, already decided) is sent, in the adapter's background.
// Every verified, well-formed request gets 200, whatever the outcome.
func (a *Adapter) serveInteractive(w http.ResponseWriter, r *http.Request) {
	body, ok := a.readVerified(w, r)
	if !ok {
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || form.Get("payload") == "" {
		a.refuse("interactive request without a payload field", "path", r.URL.Path)
		http.Error(w, "missing payload", http.StatusBadRequest)
		return
	}
	var cb slack.InteractionCallback
	if err := json.Unmarshal([]byte(form.Get("payload")), &cb); err != nil {
		a.refuse("interactive payload is not JSON", "path", r.URL.Path, "err", err)
		http.Error(w, "bad payload", http.StatusBadRequest)
		return
	}
	notice := a.handleClick(r.Context(), cb, false)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
	a.notify(r.Context(), notice)
}
