package feishu

import (
	"context"
	"errors"
	"fmt"

	"openbot/core"
)

// var _ core.QuestionAdapter is checked here, next to the implementation.
var _ core.QuestionAdapter = (*Adapter)(nil)

// Size budgets of a question card.
const (
	// maxCardWire bounds one question card as it travels: its JSON escaped once
	// more as the "content" string of the request. Feishu takes a card request
	// body of at most 30 KB; the rest of the body stays well within what is left.
	maxCardWire = 28 << 10
	// maxQuestionCards bounds the cards of one question: the parts of a long
	// command posted first, then the card with the buttons. What does not fit is
	// left out with a line saying how much and where to read it.
	maxQuestionCards = 4
	// maxDecisionWire is the room a card keeps for the decision line that
	// replaces its buttons (a long answerer's name included).
	maxDecisionWire = 2 << 10
	// maxReachText bounds the tool's reach sentence (core.Question.Reach), in runes.
	maxReachText = 600
	// maxWarningText bounds one warning about the call, in runes.
	maxWarningText = 400
)

// ButtonValue is the callback value of a question button (DESIGN.md §5: a
// short opaque token, never the payload): the question's Token and the index of the option in
// core.Question.Options(). Feishu hands it back unchanged in action.value.
type ButtonValue struct {
	Q string `json:"q"`
	I int    `json:"i"`
}

// questionCard is a card JSON 2.0 with a header and mixed elements
// (fixtures feishu/card_v2_with_buttons.json and card_v2_approved.json).
type questionCard struct {
	Schema string     `json:"schema"`
	Config cardConfig `json:"config"`
	Header cardHeader `json:"header"`
	Body   struct {
		Elements []any `json:"elements"`
	} `json:"body"`
}

type cardHeader struct {
	Title    cardText `json:"title"`
	Template string   `json:"template"` // header colour: blue, green, red, grey, orange
}

type cardText struct {
	Tag     string `json:"tag"` // "plain_text"
	Content string `json:"content"`
}

type cardColumnSet struct {
	Tag               string       `json:"tag"` // "column_set"
	FlexMode          string       `json:"flex_mode"`
	HorizontalSpacing string       `json:"horizontal_spacing"`
	Columns           []cardColumn `json:"columns"`
}

type cardColumn struct {
	Tag      string       `json:"tag"` // "column"
	Width    string       `json:"width"`
	Elements []cardButton `json:"elements"`
}

type cardButton struct {
	Tag       string         `json:"tag"` // "button"
	Text      cardText       `json:"text"`
	Type      string         `json:"type"` // primary_filled, danger, default
	Behaviors []cardBehavior `json:"behaviors"`
	ElementID string         `json:"element_id"`
}

type cardBehavior struct {
	Type  string      `json:"type"` // "callback"
	Value ButtonValue `json:"value"`
}

// questionHeader titles and colours the card by kind and status.
func questionHeader(q core.Question) cardHeader {
	title, tmpl := "Question", "blue"
	switch {
	case q.Kind == core.QuestionApproval && len(q.Warnings) > 0:
		title, tmpl = "Approval needed: ⚠ read the warning", "red"
	case q.Kind == core.QuestionApproval:
		title, tmpl = "Approval needed", "orange"
	}
	switch {
	case q.Status == core.QuestionExpired:
		title, tmpl = "Expired", "grey"
	case q.Status != core.QuestionAnswered:
	case q.Kind != core.QuestionApproval:
		title, tmpl = "Answered", "green"
	case q.Approved():
		title, tmpl = "Approved", "green"
	default:
		title, tmpl = "Rejected", "red"
	}
	return cardHeader{Title: cardText{Tag: "plain_text", Content: title}, Template: tmpl}
}

func decisionMark(q core.Question) string {
	switch {
	case q.Status == core.QuestionExpired:
		return "⌛"
	case q.Kind == core.QuestionApproval && !q.Approved():
		return "❌"
	}
	return "✅"
}

// questionName is the bold name shown on top of a question card: the asking bot's,
// when this app does not speak as that bot (a "*" account or a mirrored bot), as
// Deliver does.
func (a *Adapter) questionName(s core.Sender) string {
	if s.Handle == "" || (a.bot != "*" && s.Handle == a.bot) {
		return ""
	}
	if s.Name != "" {
		return s.Name
	}
	return s.Handle
}

// PostQuestion shows d.Question as interactive cards (QuestionCards; DESIGN.md
// §5, core.QuestionAdapter): in a group topic each replies to d.ReplyTo (else the
// topic root) in the thread; in a p2p chat each replies to d.ReplyTo when set,
// else is created in the chat. Every card carries a uuid derived from the outbox
// id, so a retried delivery does not post a card twice. It returns the message_id
// of the last card, the one with the buttons; errors are *APIError (a
// core.DeliveryError) or transport errors.
func (a *Adapter) PostQuestion(ctx context.Context, d core.QuestionDelivery) (string, error) {
	conv, err := ParseConversation(d.Conversation)
	if err != nil {
		return "", permanentError{err}
	}
	if d.Question.Token == "" && len(d.Question.Options()) > 0 {
		return "", permanentError{errors.New("feishu: question without a token")}
	}
	cards := QuestionCards(d.Question, a.questionName(d.Sender), conv.Root == "")
	var id string
	for i, card := range cards {
		uuid := ""
		if d.Outbox != 0 {
			uuid = fmt.Sprintf("openbot-q-%d", d.Outbox)
			if i < len(cards)-1 {
				uuid += fmt.Sprintf("-%d", i+1)
			}
		}
		if id, err = a.post(ctx, conv, d.ReplyTo, "interactive", card, uuid); err != nil {
			return "", err
		}
	}
	return id, nil
}

// ResolveQuestion replaces the card d.PlatformID (the question's last card) with
// the same card and d.Question.Decision() in place of the buttons (PATCH /open-apis/im/v1/messages/:id,
// core.QuestionAdapter). It is idempotent; errors are *APIError or transport errors.
func (a *Adapter) ResolveQuestion(ctx context.Context, d core.QuestionDelivery) error {
	if d.PlatformID == "" {
		return permanentError{errors.New("feishu: resolve without a platform message id")}
	}
	conv, err := ParseConversation(d.Conversation)
	if err != nil {
		return permanentError{err}
	}
	return a.api.patchCard(ctx, d.PlatformID, QuestionCard(d.Question, a.questionName(d.Sender), conv.Root == ""))
}
