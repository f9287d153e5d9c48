package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// ShellTool is the name of the built-in shell tool. An approval of it shows the
// command itself, as it will run, rather than its JSON arguments.
const ShellTool = "shell"

// ApprovalPrompt is what an approval shows on every platform, in parts that each
// adapter formats within its own limits: the tool, what it will run (Body, under
// Label), the warnings about this call and what the call can reach. Nothing in it
// is cut. An adapter that cannot show all of Body says so with NotShown; it never
// leaves characters out silently.
type ApprovalPrompt struct {
	Tool string
	// Label names Body: "Command" for a shell command, else "Arguments".
	Label string
	// Body is the shell command exactly as it will run (decoded from the JSON
	// arguments, see Question.Command), or else the arguments as indented JSON
	// (Question.PrettyArgs).
	Body string
	// Lang is Body's language for code blocks that take one: "sh" or "json".
	Lang string
	// Warnings are the tool's warnings about this call (Question.Warnings), each
	// one sentence; adapters show them above Body, marked with "⚠".
	Warnings []string
	// Reach is what the call can reach (Question.Reach), or "".
	Reach string
}

// Prompt is the approval prompt of q (meaningful for approvals only).
func (q Question) Prompt() ApprovalPrompt {
	p := ApprovalPrompt{Tool: q.Tool, Label: "Arguments", Lang: "json", Reach: strings.TrimSpace(q.Reach)}
	for _, w := range q.Warnings {
		if w = strings.TrimSpace(w); w != "" {
			p.Warnings = append(p.Warnings, w)
		}
	}
	if cmd, ok := q.Command(); ok {
		p.Label, p.Body, p.Lang = "Command", cmd, "sh"
		return p
	}
	p.Body = strings.TrimSpace(q.PrettyArgs())
	if p.Body == "" {
		p.Body = "{}"
	}
	return p
}

// Command is the command of an approval of ShellTool, exactly as the tool will
// run it. ok is false unless Args is a JSON object whose keys are "command" (a
// string) and at most "timeout_seconds" (an integer), each once and spelled
// exactly so: anything else (another key, a key twice or in other letter case,
// which a decoder might read differently) is shown as JSON, whole, instead.
func (q Question) Command() (cmd string, ok bool) {
	if q.Tool != ShellTool || q.Kind != QuestionApproval {
		return "", false
	}
	dec := json.NewDecoder(bytes.NewReader(q.Args))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		key, isKey := t.(string)
		if err != nil || !isKey || seen[key] {
			return "", false
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return "", false
		}
		switch key {
		case "command":
			if json.Unmarshal(raw, &cmd) != nil {
				return "", false
			}
		case "timeout_seconds":
			var n int64
			if json.Unmarshal(raw, &n) != nil {
				return "", false
			}
		default:
			return "", false
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') || !seen["command"] {
		return "", false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) { // text after the object
		return "", false
	}
	return cmd, true
}

// NotShown is the line an adapter puts where it leaves out the last n characters
// (runes) of an approval's Body: how many, and where to read it whole before
// answering.
func (q Question) NotShown(n int) string {
	what := strings.ToLower(q.Prompt().Label)
	return fmt.Sprintf("⚠ %d more characters of the %s are not shown here. Read the whole %s on the dashboard's Approvals page (or GET /api/v1/questions/%d) before you approve.",
		n, what, what, q.ID)
}

// Fold cuts s into pieces that each measure at most limit, where a piece's
// measure is the sum of size over its runes (an adapter's own measure: runes,
// UTF-16 units, escaped bytes), so a long text can go into several blocks or
// messages. The pieces joined are exactly s: nothing is left out or added. Each
// piece is cut as Cut cuts (a limit below 1 counts as 1). Pure.
func Fold(s string, limit int, size func(rune) int) []string {
	limit = max(limit, 1)
	var out []string
	for s != "" {
		var piece string
		piece, s = Cut(s, limit, size)
		out = append(out, piece)
	}
	return out
}

// Cut splits off the beginning of s that measures at most limit (see Fold):
// head joined with rest is s. It cuts after a line break when one falls in the
// second half of head, else between two runes; a first rune larger than limit
// makes a head of its own, and a limit below 1 an empty head.
func Cut(s string, limit int, size func(rune) int) (head, rest string) {
	if limit < 1 {
		return "", s
	}
	n, end, nl := 0, len(s), -1
	for i, r := range s {
		w := size(r)
		if n+w > limit && i > 0 {
			end = i
			break
		}
		n += w
		if r == '\n' && n >= limit/2 {
			nl = i + 1
		}
	}
	if end < len(s) && nl > 0 {
		end = nl
	}
	return s[:end], s[end:]
}

// FoldShown is Fold keeping at most maxPieces pieces: the pieces shown and how
// many characters (runes) of s they leave out.
func FoldShown(s string, limit, maxPieces int, size func(rune) int) (pieces []string, notShown int) {
	pieces = Fold(s, limit, size)
	if len(pieces) <= maxPieces {
		return pieces, 0
	}
	for _, p := range pieces[maxPieces:] {
		notShown += utf8.RuneCountInString(p)
	}
	return pieces[:maxPieces], notShown
}

// Fence is the Markdown code fence for text: three backticks, or one more than
// the longest run of backticks in it, so the text cannot close its block early.
func Fence(text string) string {
	longest, run := 0, 0
	for _, r := range text {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

// QuestionText renders a question as plain text (Markdown), for adapters without
// buttons: the question, for an approval the warnings, the tool, the command or
// arguments whole in a code block and the reach, then the options and how to
// answer. Nothing is cut: the adapter's Deliver splits a long text into messages.
func QuestionText(q Question, bot string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "❓ @%s asks (question %d): %s", bot, q.ID, q.Text)
	if q.Kind == QuestionApproval {
		p := q.Prompt()
		for _, w := range p.Warnings {
			fmt.Fprintf(&b, "\n⚠ %s", w)
		}
		fence := Fence(p.Body)
		fmt.Fprintf(&b, "\nTool: %s\n%s:\n%s%s\n%s\n%s", p.Tool, p.Label, fence, p.Lang, p.Body, fence)
		if p.Reach != "" {
			fmt.Fprintf(&b, "\nReach: %s", p.Reach)
		}
	}
	if opts := q.Options(); len(opts) > 0 {
		fmt.Fprintf(&b, "\nOptions: %s", strings.Join(opts, " / "))
	} else {
		b.WriteString("\nReply in this thread to answer.")
	}
	return b.String()
}
