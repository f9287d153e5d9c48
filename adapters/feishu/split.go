package feishu

import (
	"strings"
	"unicode/utf8"
)

// MaxChunk is the most runes Deliver puts in one message. A card request body may be
// at most 30 KB and a text one 150 KB (fixtures feishu/API_NOTES.md "Outbound Open
// API"); 4,000 runes stay under 30 KB even for CJK text after JSON escaping and the
// card wrapper, and keep one message readable.
const MaxChunk = 4000

// Split cuts text into chunks of at most limit runes (DESIGN.md §4: split at the platform's length limit). It cuts between
// paragraphs when it can and never inside a fenced code block that fits in a chunk; a
// longer paragraph is cut between lines, then between words, then anywhere; a longer
// code block is cut between lines (or anywhere inside an overlong line) and every
// piece is closed and reopened with its fence so each chunk renders on its own. Text
// of at most limit runes is returned unchanged. limit values below 32 are raised to 32.
//
// It is not Slack's Split: card Markdown knows "~~~" fences and fences longer
// than three characters with a language tag, which a cut block must reopen as
// written, while Slack's mrkdwn has only bare "```" blocks; and Telegram's
// splits HTML, keeping tags balanced.
func Split(text string, limit int) []string {
	limit = max(limit, 32)
	if utf8.RuneCountInString(text) <= limit {
		return []string{text}
	}
	var chunks []string
	cur := ""
	flush := func() {
		if s := strings.Trim(cur, "\n"); s != "" {
			chunks = append(chunks, s)
		}
		cur = ""
	}
	for _, b := range blocks(text) {
		if cur != "" && runes(cur)+2+runes(b.text) <= limit {
			cur += "\n\n" + b.text
			continue
		}
		flush()
		if runes(b.text) <= limit {
			cur = b.text
			continue
		}
		var pieces []string
		if b.fence != "" {
			pieces = splitCode(b, limit)
		} else {
			pieces = splitLines(b.text, limit)
		}
		chunks = append(chunks, pieces[:len(pieces)-1]...)
		cur = pieces[len(pieces)-1]
	}
	flush()
	return chunks
}

func runes(s string) int { return utf8.RuneCountInString(s) }

type block struct {
	text  string
	fence string // the opening fence line of a code block, "" for a paragraph
}

// blocks splits text into paragraphs (separated by blank lines) and whole fenced code
// blocks.
func blocks(text string) []block {
	var out []block
	var cur []string
	fence, open := "", ""
	flush := func() {
		if len(cur) > 0 {
			out = append(out, block{text: strings.Join(cur, "\n"), fence: open})
		}
		cur, open = nil, ""
	}
	for _, l := range strings.Split(text, "\n") {
		trim := strings.TrimLeft(l, " ")
		switch {
		case fence != "":
			cur = append(cur, l)
			if strings.HasPrefix(trim, fence) && strings.Trim(trim, "`~") == "" {
				fence = ""
				flush()
			}
		case fenceOpen(trim) != "":
			flush()
			fence, open = fenceOpen(trim), l
			cur = append(cur, l)
		case strings.TrimSpace(l) == "":
			flush()
		default:
			cur = append(cur, l)
		}
	}
	flush()
	return out
}

// splitCode cuts an overlong code block between lines, closing and reopening the fence.
func splitCode(b block, limit int) []string {
	lines := strings.Split(b.text, "\n")
	closing := strings.Repeat(string(strings.TrimLeft(b.fence, " ")[0]), len(fenceOpen(strings.TrimLeft(b.fence, " "))))
	body := lines[1:]
	if n := len(body); n > 0 && strings.HasPrefix(strings.TrimLeft(body[n-1], " "), closing) {
		body = body[:n-1]
	}
	room := limit - runes(b.fence) - runes(closing) - 2
	var out []string
	for _, piece := range splitLines(strings.Join(body, "\n"), room) {
		out = append(out, b.fence+"\n"+piece+"\n"+closing)
	}
	return out
}

// splitLines cuts an overlong paragraph between lines, then words, then anywhere.
func splitLines(s string, limit int) []string {
	var out []string
	cur := ""
	for _, l := range strings.Split(s, "\n") {
		if cur != "" && runes(cur)+1+runes(l) <= limit {
			cur += "\n" + l
			continue
		}
		if cur != "" {
			out = append(out, cur)
			cur = ""
		}
		if runes(l) <= limit {
			cur = l
			continue
		}
		words := splitWords(l, limit)
		out = append(out, words[:len(words)-1]...)
		cur = words[len(words)-1]
	}
	return append(out, cur)
}

func splitWords(l string, limit int) []string {
	var out []string
	cur := ""
	for _, w := range strings.Split(l, " ") {
		if cur != "" && runes(cur)+1+runes(w) <= limit {
			cur += " " + w
			continue
		}
		if cur != "" {
			out = append(out, cur)
			cur = ""
		}
		for runes(w) > limit {
			r := []rune(w)
			out = append(out, string(r[:limit]))
			w = string(r[limit:])
		}
		cur = w
	}
	return append(out, cur)
}
