package feishu

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"time"

	larkcallback "github.com/larksuite/oapi-sdk-go/v3/event/dispatcher/callback"

	"openbot/core"
)

// answerTimeout bounds one Engine.Answer so that, with the clicker's name lookup
// (nameLookupWait), the platform gets its card response within 3 s.
const answerTimeout = 2 * time.Second

// maxTokenLen bounds a question token taken from a button value (core.Question.Token
// is at most 16 characters).
const maxTokenLen = 16

// Toast types of a card callback response
// (fixtures feishu/card_action_trigger_v2.expected_responses.json).
const (
	ToastSuccess = "success"
	ToastInfo    = "info"
	ToastWarning = "warning"
	ToastError   = "error"
)

// Toast is the short notice the clicker alone sees after a card button click.
type Toast struct {
	Type    string `json:"type"`
	Content string `json:"content"`
}

// CardResponse is the body of a card callback response: HTTP 200 on the request URL,
// or the base64 "data" of the long-connection ack. A nil Toast means "no change".
type CardResponse struct {
	Toast *Toast `json:"toast,omitempty"`
}

// cardAction is the clicked element: its tag and the callback value we put on it.
type cardAction struct {
	Tag   string          `json:"tag"`
	Value json.RawMessage `json:"value"`
}

// click is a parsed card button click, from either callback format.
type click struct {
	openID    string
	messageID string
	value     json.RawMessage
}

// isCardAction reports whether env is a card callback: a v2 card.action.trigger
// event, or a legacy (flat) card callback with an action. A callback that does not
// name its clicker is still one: cardAction refuses it rather than dropping it.
func isCardAction(env *envelope) bool {
	if env.Schema == "2.0" {
		return env.Header.EventType == "card.action.trigger"
	}
	return env.Action != nil
}

// parseClick extracts the click from a card callback envelope; ok is false for a
// malformed one. The clicker's open_id may be empty.
func parseClick(env *envelope) (click, bool) {
	if env.Schema != "2.0" {
		if env.Action == nil {
			return click{}, false
		}
		return click{openID: env.OpenID, messageID: env.OpenMessageID, value: env.Action.Value}, true
	}
	// The "event" of card.action.trigger (callback v2), decoded into the SDK's type,
	// https://open.feishu.cn/document/uAjLw4CM/ukzMukzMukzM/feishu-cards/card-callback-communication
	var ev larkcallback.CardActionTriggerRequest
	if err := json.Unmarshal(env.Event, &ev); err != nil || ev.Action == nil {
		return click{}, false
	}
	value, err := json.Marshal(ev.Action.Value)
	if err != nil {
		return click{}, false
	}
	c := click{value: value}
	if ev.Operator != nil {
		c.openID = ev.Operator.OpenID
	}
	if ev.Context != nil {
		c.messageID = ev.Context.OpenMessageID
	}
	return c, true
}

// ParseButtonValue decodes a button's callback value as QuestionCard writes it,
// {"q":"<token>","i":<index>}; the index may also be a decimal string. ok is false
// for a value that is not a question button (another card's button, a forged or
// oversized token, a negative index).
func ParseButtonValue(raw json.RawMessage) (ButtonValue, bool) {
	var v struct {
		Q string          `json:"q"`
		I json.RawMessage `json:"i"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil || v.Q == "" || len(v.Q) > maxTokenLen || len(v.I) == 0 {
		return ButtonValue{}, false
	}
	s := strings.Trim(string(v.I), `"`)
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 {
		return ButtonValue{}, false
	}
	return ButtonValue{Q: v.Q, I: i}, true
}

// cardAction answers one verified card button click (DESIGN.md §5): it calls
// Engine.Answer with the clicker "feishu:<open_id>" and returns the toast for the
// outcome. The card itself is patched later by the delivery lanes
// (ResolveQuestion), so the response carries no card. A click on a button that is
// not a question button gets no change; a click that does not say who clicked (no
// open_id) fails closed: nothing is answered and the clicker is told it is not
// allowed; a failed Answer gets an error toast asking to try again.
func (a *Adapter) cardAction(ctx context.Context, env *envelope) CardResponse {
	c, ok := parseClick(env)
	if !ok {
		a.log.Warn("feishu malformed card action ignored", "event_id", env.Header.EventID)
		return CardResponse{}
	}
	v, ok := ParseButtonValue(c.value)
	if !ok {
		a.log.Warn("feishu card action without a question payload ignored", "message_id", c.messageID, "open_id", c.openID)
		return CardResponse{}
	}
	if c.openID == "" {
		a.log.Warn("feishu card action without an operator open_id refused", "message_id", c.messageID)
		return CardResponse{Toast: &Toast{Type: ToastError, Content: "You are not allowed to answer this: Feishu did not say who clicked."}}
	}
	ans := core.Answer{
		Token:   v.Q,
		Choice:  v.I,
		Actor:   ActorID(c.openID),
		Name:    a.senderName(ctx, c.openID),
		Account: a.account,
	}
	ctx, cancel := context.WithTimeout(ctx, answerTimeout)
	defer cancel()
	res, err := a.engine.Answer(ctx, ans)
	if err != nil {
		a.log.Warn("feishu answer not recorded", "message_id", c.messageID, "open_id", c.openID, "err", err)
		return CardResponse{Toast: &Toast{Type: ToastError, Content: "Could not record your answer; please try again."}}
	}
	level := slog.LevelInfo
	if res.Outcome == core.AnswerForbidden {
		level = slog.LevelWarn // a refused click
	}
	a.log.Log(ctx, level, "feishu question answered", "message_id", c.messageID, "open_id", c.openID, "outcome", res.Outcome, "question", res.Question.ID)
	return CardResponse{Toast: answerToast(res)}
}

// answerToast words the clicker's private notice for an Engine.Answer outcome.
func answerToast(res core.AnswerResult) *Toast {
	switch res.Outcome {
	case core.AnswerAccepted:
		return &Toast{Type: ToastSuccess, Content: "Recorded"}
	case core.AnswerForbidden:
		if h := strings.TrimPrefix(string(res.Question.Bot), "bot:"); h != "" {
			return &Toast{Type: ToastError, Content: "Only approvers of @" + h + " can answer this."}
		}
		return &Toast{Type: ToastError, Content: "Only approvers can answer this."}
	case core.AnswerDecided:
		d := cmp.Or(res.Question.Decision(), "this question is closed")
		return &Toast{Type: ToastInfo, Content: "Already decided: " + d}
	}
	return &Toast{Type: ToastWarning, Content: "This question is no longer open."}
}
