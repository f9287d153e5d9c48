package slack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"openbot/core"
)

// deliveryError is a core.DeliveryError for a Slack Web API failure.
type deliveryError struct {
	err        error
	permanent  bool
	retryAfter time.Duration
}

func (e *deliveryError) Error() string             { return e.err.Error() }
func (e *deliveryError) Unwrap() error             { return e.err }
func (e *deliveryError) Permanent() bool           { return e.permanent }
func (e *deliveryError) RetryAfter() time.Duration { return e.retryAfter }

var _ core.DeliveryError = (*deliveryError)(nil)

// permanentErrors are Slack error codes that retrying cannot fix (fixtures
// web_api_errors.json, API_NOTES.md "Errors").
var permanentErrors = map[string]bool{
	"channel_not_found": true, "not_in_channel": true, "is_archived": true,
	"invalid_auth": true, "account_inactive": true, "token_revoked": true, "token_expired": true,
	"not_authed": true, "missing_scope": true, "no_permission": true, "restricted_action": true,
	"msg_too_long": true, "no_text": true, "invalid_blocks": true, "msg_blocks_too_long": true,
	"invalid_arguments": true, "team_access_not_granted": true, "ekm_access_denied": true,
	"too_many_attachments": true, "invalid_thread_ts": true, "cannot_reply_to_message": true,
	"message_not_found": true, "cant_update_message": true, "edit_window_closed": true,
	"user_not_in_channel": true,
}

// mapError turns a slack-go error into a core.DeliveryError: a 429 (slack-go's
// *RateLimitedError) carries Retry-After; the codes in permanentErrors and HTTP 4xx
// other than 429 are permanent; everything else (5xx, network, unknown codes) is
// returned as a temporary error for the lane's backoff.
func mapError(err error) error {
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return &deliveryError{err: err, retryAfter: rl.RetryAfter}
	}
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		if se.Err == "ratelimited" {
			return &deliveryError{err: err}
		}
		return &deliveryError{err: err, permanent: permanentErrors[se.Err]}
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) {
		perm := sc.Code >= 400 && sc.Code < 500 && sc.Code != http.StatusTooManyRequests && sc.Code != http.StatusRequestTimeout
		return &deliveryError{err: err, permanent: perm}
	}
	return err
}

// progress is how far a split reply got (Adapter.progress): an earlier, failed
// attempt for the same outbox entry is not posted again, so a retried Deliver
// (after a 429 on chunk 3) does not post chunks 1 and 2 twice.
type progress struct {
	posted  int    // chunks already posted
	firstTS string // ts of the first chunk, the delivery's platform id
	n       int    // total chunks, to notice a changed text
}

// Deliver posts one reply to its Slack conversation (DESIGN.md §4 delivery lanes; core.Adapter).
// The Markdown is converted with Format and split with Split into chunks of at most
// MaxChunk characters, each posted with chat.postMessage into the thread the
// conversation names (thread_ts = root). When this app posts for a bot other than
// its own (a "*" app, or a fallback), the message shows that bot's name and icon
// (username and icon_emoji, needs chat:write.customize). It returns the ts of the
// first chunk. Chunks already posted by an earlier, failed attempt for the same
// outbox entry are not posted again. A reply that was streamed (d.Streamed) edits
// the streamed messages instead (deliverStreamed). Errors are core.DeliveryErrors: 429 with
// RetryAfter, channel_not_found, not_in_channel, invalid_auth, … permanent.
func (a *Adapter) Deliver(ctx context.Context, d core.Delivery) (string, error) {
	conv, err := ParseConversation(d.Conversation)
	if err != nil {
		return "", &deliveryError{err: fmt.Errorf("%w: %q", err, d.Conversation), permanent: true}
	}
	if strings.TrimSpace(d.Text) == "" {
		return "", &deliveryError{err: errors.New("slack: empty message"), permanent: true}
	}
	if len(d.Streamed) > 0 {
		return a.deliverStreamed(ctx, conv, d)
	}
	chunks := Split(Format(d.Text), MaxChunk)
	pr, _ := a.progress.Get(d.Outbox, a.clock.Now())
	if pr.n != len(chunks) {
		pr = progress{n: len(chunks)}
	}
	opts := a.senderOptions(d.Sender)
	for i := pr.posted; i < len(chunks); i++ {
		msgOpts := append([]slack.MsgOption{
			slack.MsgOptionText(chunks[i], false),
			slack.MsgOptionDisableLinkUnfurl(),
			slack.MsgOptionDisableMediaUnfurl(),
		}, opts...)
		if conv.ThreadTS != "" {
			msgOpts = append(msgOpts, slack.MsgOptionTS(conv.ThreadTS))
		}
		cctx, cancel := context.WithTimeout(ctx, apiTimeout)
		_, ts, err := a.api.PostMessageContext(cctx, conv.Channel, msgOpts...)
		cancel()
		if err != nil {
			if d.Outbox != 0 {
				a.progress.Put(d.Outbox, pr, a.clock.Now())
			}
			derr := mapError(err)
			a.log.Warn("slack post failed", "channel", conv.Channel, "chunk", i+1, "of", len(chunks), "err", err)
			return "", derr
		}
		a.sent()
		if i == 0 {
			pr.firstTS = ts
		}
		pr.posted = i + 1
	}
	a.progress.Delete(d.Outbox)
	return pr.firstTS, nil
}

var _ core.MessageKeyer = (*Adapter)(nil)

// MessageKey is the platform identity of a message Deliver posted (the DedupKey
// format "slack:<team>:<channel>:<ts>"), so a reply in the Slack thread it roots
// joins its openbot thread (see joinBotParent; core.MessageKeyer). "" for a
// conversation ref this adapter did not build.
func (a *Adapter) MessageKey(ref core.ConversationRef, platformID string) string {
	c, err := ParseConversation(ref)
	if err != nil || platformID == "" {
		return ""
	}
	return DedupKey(c.Team, c.Channel, platformID)
}

var _ core.ThreadOpener = (*Adapter)(nil)

// OpenThread is the Slack thread under a message posted at the top level of a
// conversation (core.ThreadOpener): "<team>:<channel>:<root ts>" with the
// thread key a person's reply in it carries. ok is false for a ref that names a
// thread already, or that this adapter did not build.
func (a *Adapter) OpenThread(ref core.ConversationRef, root string) (core.ConversationRef, string, bool) {
	c, err := ParseConversation(ref)
	if err != nil || c.ThreadTS != "" || root == "" {
		return "", "", false
	}
	c.ThreadTS = root
	return c.Ref(), ThreadKey(c.Team, c.Channel, root, root, false), true
}

// senderOptions shows the speaking bot's name when this app is not that bot.
func (a *Adapter) senderOptions(s core.Sender) []slack.MsgOption {
	switch {
	case s.Handle != "" && s.Handle == a.bot:
		return nil
	case s.Handle != "":
		name := cmp.Or(s.Name, s.Handle)
		icon := ":robot_face:"
		if e := a.icons[s.Handle]; e != "" {
			icon = e
		}
		return []slack.MsgOption{slack.MsgOptionUsername(name), slack.MsgOptionIconEmoji(icon)}
	case s.System():
		if a.bot == "*" {
			return []slack.MsgOption{slack.MsgOptionUsername("openbot"), slack.MsgOptionIconEmoji(":gear:")}
		}
		return nil
	default: // a human mirrored from another platform
		if s.Name == "" {
			return nil
		}
		return []slack.MsgOption{slack.MsgOptionUsername(s.Name), slack.MsgOptionIconEmoji(":bust_in_silhouette:")}
	}
}
