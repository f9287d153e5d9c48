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

// QuestionCard is the last of QuestionCards: the card with the buttons, or
// the decision once q is decided. It is pure.
func QuestionCard(q core.Question, name string, p2p bool) string {
	cards := QuestionCards(q, name, p2p)
	return cards[len(cards)-1]
}

// QuestionCards returns the interactive cards (msg_type "interactive") that show q
// (DESIGN.md §5): a header, the question in Markdown (with name in bold on top
// when not empty, for "*" accounts and mirrored bots), for an approval the
// warnings about the call (core.Question.Prompt), the tool with its command (or
// its arguments as JSON) in a code block and what the call can reach, then either
// one button per q.Options() whose callback value is ButtonValue{q.Token, index}
// (Approve primary, Reject danger), a hint to reply in the topic for a free-text
// ask, or, once q is decided, q.Decision() in place of the buttons. A command
// too long for one card (maxCardWire) is shown over several, the buttons on the
// last; past maxQuestionCards the rest is left out with core.Question.NotShown.
// Every question but such an approval is one card. It is pure.
func QuestionCards(q core.Question, name string, p2p bool) []string {
	if q.Kind != core.QuestionApproval {
		return []string{marshalCard(questionPart(q, name, p2p, cardPart{first: true, last: true}))}
	}
	body := q.Prompt().Body
	// The cards are cut the same whatever the decision, so the resolved last
	// card shows what the pending one did: laid out as pending, with room for a
	// decision line.
	var parts []cardPart
	for i := 0; i == 0 || body != ""; i++ {
		if i == maxQuestionCards {
			parts[i-1].notShown = utf8.RuneCountInString(body)
			break
		}
		// The budget leaves room for everything the last card carries, whichever
		// card turns out last, and for the widest part label.
		probe := cardPart{first: i == 0, last: true, index: maxQuestionCards, count: maxQuestionCards, notShown: 1 << 30}
		budget := maxCardWire - maxDecisionWire - wireLen(marshalCard(questionPart(pending(q), name, p2p, probe)))
		var piece string
		piece, body = core.Cut(body, budget, wireSize)
		parts = append(parts, cardPart{first: i == 0, piece: piece})
	}
	parts[len(parts)-1].last = true
	cards := make([]string, len(parts))
	for i, p := range parts {
		p.index, p.count = i+1, len(parts)
		cards[i] = marshalCard(questionPart(q, name, p2p, p))
	}
	return cards
}

// pending is q as it was before it was decided.
func pending(q core.Question) core.Question {
	q.Status, q.Choice = core.QuestionPending, -1
	return q
}

// cardPart is one card of a question: the first carries the question and the
// warnings, the last the reach, the buttons or decision and the note of what is
// not shown; each carries its piece of the command (index of count).
type cardPart struct {
	first, last  bool
	index, count int
	piece        string
	notShown     int
}

// questionPart builds the card of part p of question q.
func questionPart(q core.Question, name string, p2p bool, p cardPart) questionCard {
	c := questionCard{Schema: "2.0", Config: cardConfig{UpdateMulti: true, WidthMode: "fill"}}
	c.Header = questionHeader(q)
	if !p.last {
		c.Header = questionHeader(pending(q))
		c.Header.Title.Content += fmt.Sprintf(" (part %d of %d)", p.index, p.count)
	}
	md := func(s string) { c.Body.Elements = append(c.Body.Elements, cardMarkdown{Tag: "markdown", Content: s}) }
	if p.first {
		text := Format(q.Text)
		if name != "" {
			text = "**" + Format(name) + "**\n" + text
		}
		md(text)
	}
	if q.Kind == core.QuestionApproval {
		pr := q.Prompt()
		if p.first && len(pr.Warnings) > 0 {
			var w []string
			for _, s := range pr.Warnings {
				w = append(w, "⚠️ **"+Format(trimRunes(s, maxWarningText))+"**")
			}
			md(strings.Join(w, "\n"))
		}
		label := ""
		if p.count > 1 {
			label = fmt.Sprintf(" (part %d of %d)", p.index, p.count)
		}
		md(argsBlock(pr.Tool, strings.ToLower(pr.Label)+label, pr.Lang, p.piece))
		if p.last && p.notShown > 0 {
			md("**" + Format(q.NotShown(p.notShown)) + "**")
		}
		if p.last && pr.Reach != "" {
			md("**Reach:** " + Format(trimRunes(pr.Reach, maxReachText)))
		}
	}
	if !p.last {
		return c
	}
	opts := q.Options()
	switch {
	case q.Status != core.QuestionPending:
		md(decisionMark(q) + " " + Format(q.Decision()))
	case len(opts) == 0:
		where := "topic"
		if p2p {
			where = "chat"
		}
		md("*Reply in this " + where + " to answer.*")
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
	return c
}

func marshalCard(c questionCard) string {
	b, _ := json.Marshal(c)
	return string(b)
}

// wireLen is how many bytes s takes as a JSON string value, quotes left out:
// how a card's JSON travels as the "content" of a request.
func wireLen(s string) int {
	b, _ := json.Marshal(s)
	return len(b) - 2
}

// wireSize is how many bytes a rune of a command takes on the wire: in the
// card's JSON, escaped once more in the request (a backtick counts the zero-width
// space argsBlock may put after it too).
func wireSize(r rune) int {
	switch {
	case r == '"' || r == '\\':
		return 4 // \" then \\\"
	case r == '\n' || r == '\r' || r == '\t':
		return 3 // \n then \\n
	case r == '<' || r == '>' || r == '&' || r < 0x20 || r == 0x2028 || r == 0x2029:
		return 7 // \u003c then \\u003c
	case r == '`':
		return 1 + len("\u200b")
	}
	if n := utf8.RuneLen(r); n > 0 {
		return n
	}
	return len(string(utf8.RuneError))
}

// trimRunes cuts s to at most n runes, ending in "…" when cut.
func trimRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
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

// argsBlock shows an approval's tool and a piece of its command or arguments
// (core.Question.Prompt) in a code block of language lang; what names the piece
// ("command", "arguments (part 1 of 2)"). A "```" inside cannot close the block.
func argsBlock(tool, what, lang, piece string) string {
	piece = strings.ReplaceAll(strings.TrimSuffix(piece, "\n"), "```", "`\u200b``")
	return "Tool `" + strings.ReplaceAll(tool, "`", "'") + "` " + what + ":\n```" + lang + "\n" + piece + "\n```"
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
