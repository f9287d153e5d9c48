package feishu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"openbot/core"
)

// var _ core.QuestionAdapter is checked here, next to the implementation.
var _ core.QuestionAdapter = (*Adapter)(nil)

// maxArgsShown bounds the tool arguments shown on an approval card, in bytes; longer
// arguments are cut with "…" (the decision still applies to the exact, stored ones).
const maxArgsShown = 1500

// maxReachText bounds the tool's reach sentence (core.Question.Reach), in runes.
const maxReachText = 300

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

// QuestionCard returns the interactive card JSON (msg_type "interactive") that shows
// q (DESIGN.md §5): a header, the question in Markdown (with name in bold
// on top when not empty, for "*" accounts and mirrored bots), for an approval the
// tool and its arguments in a code block cut at maxArgsShown bytes, then either one
// button per q.Options() whose callback value is ButtonValue{q.Token, index}
// (Approve primary, Reject danger), a hint to reply in the topic for a free-text
// ask, or, once q is decided, q.Decision() in place of the buttons. It is pure.
func QuestionCard(q core.Question, name string, p2p bool) string {
	c := questionCard{Schema: "2.0", Config: cardConfig{UpdateMulti: true, WidthMode: "fill"}}
	c.Header = questionHeader(q)
	text := Format(q.Text)
	if name != "" {
		text = "**" + Format(name) + "**\n" + text
	}
	c.Body.Elements = append(c.Body.Elements, cardMarkdown{Tag: "markdown", Content: text})
	if q.Kind == core.QuestionApproval {
		c.Body.Elements = append(c.Body.Elements, cardMarkdown{Tag: "markdown", Content: argsBlock(q.Tool, q.PrettyArgs())})
		if r := strings.TrimSpace(q.Reach); r != "" {
			if rs := []rune(r); len(rs) > maxReachText {
				r = string(rs[:maxReachText]) + "…"
			}
			c.Body.Elements = append(c.Body.Elements, cardMarkdown{Tag: "markdown", Content: "**Reach:** " + Format(r)})
		}
	}
	opts := q.Options()
	switch {
	case q.Status != core.QuestionPending:
		c.Body.Elements = append(c.Body.Elements, cardMarkdown{Tag: "markdown", Content: decisionMark(q) + " " + Format(q.Decision())})
	case len(opts) == 0:
		where := "topic"
		if p2p {
			where = "chat"
		}
		c.Body.Elements = append(c.Body.Elements, cardMarkdown{Tag: "markdown", Content: "*Reply in this " + where + " to answer.*"})
	default:
		set := cardColumnSet{Tag: "column_set", FlexMode: "none", HorizontalSpacing: "8px"}
		for i, o := range opts {
			typ := "default"
			if q.Kind == core.QuestionApproval {
				typ = map[int]string{core.ChoiceApprove: "primary_filled", core.ChoiceReject: "danger"}[i]
			}
			set.Columns = append(set.Columns, cardColumn{Tag: "column", Width: "auto", Elements: []cardButton{{
				Tag:       "button",
				Text:      cardText{Tag: "plain_text", Content: o},
				Type:      typ,
				Behaviors: []cardBehavior{{Type: "callback", Value: ButtonValue{Q: q.Token, I: i}}},
				ElementID: fmt.Sprintf("btn_%d", i),
			}}})
		}
		c.Body.Elements = append(c.Body.Elements, set)
	}
	b, _ := json.Marshal(c)
	return string(b)
}

// questionHeader titles and colours the card by kind and status.
func questionHeader(q core.Question) cardHeader {
	title, tmpl := "Question", "blue"
	if q.Kind == core.QuestionApproval {
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

// argsBlock shows an approval's tool and its arguments (core.Question.PrettyArgs)
// in a code block; arguments longer than maxArgsShown are cut at a rune boundary with "…",
// and a "```" inside them cannot close the block.
func argsBlock(tool string, s string) string {
	if len(s) > maxArgsShown {
		cut := maxArgsShown
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "\n…"
	}
	s = strings.ReplaceAll(s, "```", "`\u200b``")
	return "Tool `" + strings.ReplaceAll(tool, "`", "'") + "`\n```json\n" + s + "\n```"
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

// PostQuestion shows d.Question as an interactive card with buttons (DESIGN.md §5,
// core.QuestionAdapter): in a group topic it replies to d.ReplyTo (else the topic
// root) in the thread; in a p2p chat it replies to d.ReplyTo when set, else creates
// the card in the chat. The send carries a uuid derived from the outbox id, so a
// retried delivery is not posted twice. It returns the card's message_id; errors
// are *APIError (a core.DeliveryError) or transport errors.
func (a *Adapter) PostQuestion(ctx context.Context, d core.QuestionDelivery) (string, error) {
	conv, err := ParseConversation(d.Conversation)
	if err != nil {
		return "", permanentError{err}
	}
	if d.Question.Token == "" && len(d.Question.Options()) > 0 {
		return "", permanentError{errors.New("feishu: question without a token")}
	}
	uuid := ""
	if d.Outbox != 0 {
		uuid = fmt.Sprintf("openbot-q-%d", d.Outbox)
	}
	card := QuestionCard(d.Question, a.questionName(d.Sender), conv.Root == "")
	return a.post(ctx, conv, d.ReplyTo, "interactive", card, uuid)
}

// ResolveQuestion replaces the card d.PlatformID with the same question and
// d.Question.Decision() in place of the buttons (PATCH /open-apis/im/v1/messages/:id,
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
