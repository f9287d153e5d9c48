package feishu

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"openbot/core"
)

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

// argsBlock shows an approval's tool and a piece of its command or arguments
// (core.Question.Prompt) in a code block of language lang; what names the piece
// ("command", "arguments (part 1 of 2)"). A "```" inside cannot close the block.
func argsBlock(tool, what, lang, piece string) string {
	piece = strings.ReplaceAll(strings.TrimSuffix(piece, "\n"), "```", "`\u200b``")
	return "Tool `" + strings.ReplaceAll(tool, "`", "'") + "` " + what + ":\n```" + lang + "\n" + piece + "\n```"
}
