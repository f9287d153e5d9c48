package agents

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"openbot/core"
)

// historyPage is how many messages one RunEnv read returns while unrolling.
const historyPage = 50

// historyScanLimit bounds how many messages unrolling reads for a scoped bot that
// skips most of a long thread.
const historyScanLimit = 2000

// view is the unrolled thread of one run (seed §6): the messages shown, oldest
// first, and counts of what is not shown.
type view struct {
	shown    []core.Message
	triggers map[core.MessageID]bool
	total    int // messages in the thread
	// other counts messages seen while scanning that a scoped bot does not get
	// (not sent by it, not mentioning it, not a trigger).
	other int
	// older counts messages older than the cut that were not shown (for a scoped
	// bot: not examined, so addressed to it or not).
	older int
	// summary is the bot's newest summary of the thread (KindSummary), shown
	// first; nil when it has none. covered counts the messages it stands for.
	summary *core.Message
	covered int
	// cut: the budget or the message cap left older messages out (besides
	// those the summary covers): the history has passed its share.
	cut bool
}

// notShown is every message of the thread the model does not see.
func (v *view) notShown() int { return v.other + v.older }

// unroll reads the thread backwards from the newest message until the token
// budget (chars/4) or the message cap is reached. A scoped bot's candidates are
// only the messages it sent, those mentioning it, and this run's triggers; the
// triggers are always shown.
func unroll(ctx context.Context, job *core.Job, lim core.Limits) (*view, error) {
	v := &view{triggers: map[core.MessageID]bool{}}
	for _, m := range job.Triggers {
		v.triggers[m.ID] = true
	}
	total, err := job.Env.Count(ctx)
	if err != nil {
		return nil, fmt.Errorf("count messages: %w", err)
	}
	v.total = total
	budget := lim.HistoryTokenBudget * 4
	used := 0
	picked := map[core.MessageID]bool{}
	var sel []core.Message          // newest first
	pos := map[core.MessageID]int{} // place in the thread, 1 the oldest
	before := core.MessageID(0)
	scanned := 0
	cut := 0       // place of the newest message left out for the budget
	summaries := 0 // summary messages seen
scan:
	for scanned < historyScanLimit {
		page, err := job.Env.MessagesBefore(ctx, before, historyPage)
		if err != nil {
			return nil, fmt.Errorf("read messages: %w", err)
		}
		for _, m := range page {
			scanned++
			before = m.ID
			trig := v.triggers[m.ID]
			if m.Kind == core.KindSummary {
				// A summary is not part of the conversation; the bot's
				// newest one stands for the messages it covers.
				if v.summary == nil && m.Sender == job.Bot.ID() {
					v.summary = &m
					used += messageCost(m)
				}
				summaries++
				continue
			}
			if v.summary != nil && m.ID <= v.summary.Covers && !trig {
				v.covered = total - scanned + 1 - summaries
				break scan
			}
			if job.Scoped && !trig && !addressedTo(m, job.Bot) {
				v.other++
				continue
			}
			cost := messageCost(m)
			if !trig && (len(sel) >= lim.HistoryMaxMessages || used+cost > budget) {
				cut = total - scanned + 1
				v.cut = true
				break scan
			}
			sel = append(sel, m)
			picked[m.ID] = true
			pos[m.ID] = total - scanned + 1
			used += cost
		}
		if len(page) < historyPage {
			break
		}
	}
	// The oldest message shown moves in blocks, so the history's leading bytes
	// stay the same from run to run until it next jumps (the prompt cache).
	if block := max(1, min(lim.HistoryMaxMessages/4, len(sel)/2)); cut > 0 {
		start := (cut+block-1)/block*block + 1
		sel = slices.DeleteFunc(sel, func(m core.Message) bool {
			return !v.triggers[m.ID] && pos[m.ID] < start
		})
	}
	// Triggers are shown even when the scan did not reach them.
	for _, m := range job.Triggers {
		if !picked[m.ID] {
			sel = append(sel, m)
			picked[m.ID] = true
		}
	}
	slices.SortFunc(sel, func(a, b core.Message) int { return cmp.Compare(a.ID, b.ID) })
	// History never starts with the bot's own reply (strict chat templates
	// reject it): the summary goes first, else leading replies go.
	v.older = max(0, total-len(sel)-v.other-v.covered-summaries)
	if v.summary == nil && v.older > 0 {
		for len(sel) > 0 && sel[0].Sender == job.Bot.ID() && !v.triggers[sel[0].ID] {
			sel = sel[1:]
			v.older++
		}
	}
	v.shown = sel
	return v, nil
}

// trim drops the oldest half of the shown messages that are not triggers, for a
// retry after a context-length error. It reports whether anything was dropped.
func (v *view) trim() bool {
	var keep []core.Message
	drop := 0
	for _, m := range v.shown {
		if !v.triggers[m.ID] {
			drop++
		}
	}
	drop /= 2
	if drop == 0 {
		return false
	}
	dropped := 0
	for _, m := range v.shown {
		if dropped < drop && !v.triggers[m.ID] {
			dropped++
			continue
		}
		keep = append(keep, m)
	}
	v.shown = keep
	v.older += dropped
	return true
}

// addressedTo reports whether a scoped bot sees m: it sent it or is mentioned in it.
func addressedTo(m core.Message, bot core.BotProfile) bool {
	return m.Sender == bot.ID() || slices.Contains(m.Mentions, bot.Handle)
}

func messageCost(m core.Message) int { return len(m.Text) + len(m.SenderName) + 16 }

// render turns the shown messages into chat messages: the bot's own replies are
// assistant messages; everything else is a user message "[name]: text" (triggers
// "[name] (new): text"), with consecutive foreign messages merged. Text from people
// and other bots is wrapped untrusted; system notices render as "[system]: text".
// The result always ends with a user message.
func render(v *view, bot core.BotProfile, maxChars int) []openai.ChatCompletionMessage {
	var out []openai.ChatCompletionMessage
	var buf []string
	flush := func() {
		if len(buf) > 0 {
			out = append(out, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: strings.Join(buf, "\n\n")})
			buf = nil
		}
	}
	if v.summary != nil {
		buf = append(buf, fmt.Sprintf("[system]: Your summary of this thread up to message #%d (read_history pages through those messages word for word):\n%s",
			v.summary.Covers, v.summary.Text))
	}
	for _, m := range v.shown {
		text := m.Text
		if len(text) > maxChars {
			text = cutString(text, maxChars) + fmt.Sprintf("\n[message truncated: %d of %d characters shown; read_history shows message #%d]", maxChars, len(m.Text), m.ID)
		}
		if m.Sender == bot.ID() {
			flush()
			if text != "" {
				out = append(out, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: text})
			}
			continue
		}
		buf = append(buf, renderForeign(m, text, v.triggers[m.ID]))
	}
	flush()
	if len(out) == 0 || out[len(out)-1].Role != openai.ChatMessageRoleUser {
		// The bot spoke last. Triggers that arrived before that reply (queued while
		// its thread was parked or busy) are still what this run answers: repeat them.
		var pending []string
		for _, m := range v.shown {
			if v.triggers[m.ID] && m.Sender != bot.ID() {
				text := m.Text
				if len(text) > maxChars {
					text = cutString(text, maxChars)
				}
				pending = append(pending, renderForeign(m, text, true))
			}
		}
		content := "[system]: There is nothing new since your last reply. Continue the task if it is unfinished; otherwise reply briefly."
		if len(pending) > 0 {
			content = "[system]: These messages arrived while you were busy with your last reply and you have not answered them yet; answer them now:\n\n" + strings.Join(pending, "\n\n")
		}
		out = append(out, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: content})
	}
	return out
}

// renderForeign renders one message not sent by the bot itself.
func renderForeign(m core.Message, text string, trigger bool) string {
	mark := ""
	if trigger {
		mark = " (new)"
	}
	if m.Sender == core.SystemActor {
		return "[system]" + mark + ": " + text
	}
	return "[" + senderName(m) + "]" + mark + ": " + untrusted(string(m.Sender), text)
}

func senderName(m core.Message) string {
	switch {
	case m.Sender == core.SystemActor:
		return "system"
	case m.SenderName != "":
		return m.SenderName
	default:
		return string(m.Sender)
	}
}

// sourceCleaner makes a source name safe inside the wrapper's attribute; built
// once (a Replacer is safe for concurrent use), not per message.
var sourceCleaner = strings.NewReplacer(`"`, "'", "<", "", ">", "", "\n", " ")

// untrusted wraps text from outside the prompt (people, other bots, tool output)
// so the model can tell data from instructions (octopus-architecture
// "untrusted-content wrapping"). Tags inside the text are defused so it cannot
// close the wrapper early.
func untrusted(source, text string) string {
	text = strings.ReplaceAll(text, "</untrusted", "<\\/untrusted")
	text = strings.ReplaceAll(text, "<untrusted", "<\\untrusted")
	source = sourceCleaner.Replace(source)
	return `<untrusted source="` + source + `">` + text + `</untrusted>`
}

// cutString returns at most n bytes of s, cut on a rune boundary.
func cutString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
