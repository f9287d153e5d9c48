// Package split cuts a formatted reply into messages no longer than a
// platform's limit (DESIGN.md §4), for the Markdown-like formats with fenced
// code blocks (Slack's mrkdwn, Feishu's card Markdown); what a fence is stays
// with each adapter (Rules).
package split

import (
	"strings"
	"unicode/utf8"
)

// Fence is how a format reads the opening line of a fenced code block.
type Fence struct {
	Reopen string // the line each piece of a cut block starts with
	Close  string // the line each piece ends with
	Body   string // the part of the opening line that is the block's content ("" for none)
	Whole  bool   // the line opens and closes the block by itself
}

// Rules are a format's fences: Open reports whether line, as written, opens a
// code block; Closes whether a line inside the block opened with f ends it.
type Rules struct {
	Open   func(line string) (Fence, bool)
	Closes func(f Fence, line string) bool
}

// Split cuts text into chunks of at most limit runes (a limit too small for
// a fence and a line of code is the caller's to raise). Text
// of at most limit runes is returned as it is. Otherwise it cuts between
// paragraphs when it can, keeping the blank lines between those that share a
// chunk, and never inside a code block that fits in a chunk; a longer paragraph
// is cut between lines, then between words, then anywhere (not inside a run of
// backticks); a longer code block is cut between lines and every piece is
// closed and reopened (Fence) so it renders on its own. Leading and trailing
// newlines of each chunk are dropped, and so are chunks left blank.
func Split(text string, limit int, r Rules) []string {
	if runes(text) <= limit {
		return []string{text}
	}
	var chunks []string
	cur := ""
	flush := func() {
		if s := strings.Trim(cur, "\n"); strings.TrimSpace(s) != "" {
			chunks = append(chunks, s)
		}
		cur = ""
	}
	for _, b := range blocks(text, r) {
		if cur != "" && runes(cur)+runes(b.sep)+runes(b.text) <= limit {
			cur += b.sep + b.text
			continue
		}
		flush()
		if runes(b.text) <= limit {
			cur = b.text
			continue
		}
		var pieces []string
		if b.code {
			pieces = splitCode(b, limit, r)
		} else {
			pieces = splitLines(b.text, limit)
		}
		for _, p := range pieces[:len(pieces)-1] {
			cur = p
			flush()
		}
		cur = pieces[len(pieces)-1]
	}
	flush()
	return chunks
}

func runes(s string) int { return utf8.RuneCountInString(s) }

// block is a paragraph (a run of non-blank lines) or a whole code block, with
// the newlines that came before it.
type block struct {
	sep, text string
	code      bool
	fence     Fence
}

func blocks(text string, r Rules) []block {
	var (
		out     []block
		cur     []string
		newline = 0 // newlines since the last block
		in      *Fence
		fence   Fence
	)
	emit := func() {
		if len(cur) > 0 {
			out = append(out, block{sep: strings.Repeat("\n", max(newline, 1)), text: strings.Join(cur, "\n"), code: in != nil, fence: fence})
			cur, newline, in = nil, 1, nil
		}
	}
	for _, l := range strings.Split(text, "\n") {
		if in != nil {
			cur = append(cur, l)
			if r.Closes(*in, l) {
				emit()
			}
			continue
		}
		if f, ok := r.Open(l); ok {
			emit()
			fence, in, cur = f, &f, []string{l}
			if f.Whole {
				emit()
			}
			continue
		}
		if strings.TrimSpace(l) == "" {
			emit()
			newline++
			continue
		}
		cur = append(cur, l)
	}
	emit()
	return out
}

// splitCode cuts an overlong code block between lines, closing and reopening it.
func splitCode(b block, limit int, r Rules) []string {
	body := strings.Split(b.text, "\n")[1:]
	if n := len(body); n > 0 && r.Closes(b.fence, body[n-1]) {
		// Each piece gets its own closing line; text after the fence stays.
		if rest := strings.Trim(strings.TrimSpace(body[n-1]), "`~"); rest != "" {
			body[n-1] = rest
		} else {
			body = body[:n-1]
		}
	}
	if b.fence.Body != "" {
		body = append([]string{b.fence.Body}, body...)
	}
	room := max(limit-runes(b.fence.Reopen)-runes(b.fence.Close)-2, 1)
	var out []string
	for _, piece := range splitLines(strings.Join(body, "\n"), room) {
		out = append(out, b.fence.Reopen+"\n"+piece+"\n"+b.fence.Close)
	}
	return out
}

// splitLines cuts s between lines, then words, then anywhere, into pieces of
// at most limit runes.
func splitLines(s string, limit int) []string {
	return pack(strings.Split(s, "\n"), "\n", limit, func(l string) []string {
		return pack(strings.Split(l, " "), " ", limit, func(w string) []string { return hardCut(w, limit) })
	})
}

// pack joins parts with sep into pieces of at most limit runes; a part longer
// than limit is cut by cut first.
func pack(parts []string, sep string, limit int, cut func(string) []string) []string {
	var out []string
	cur, started := "", false
	for _, p := range parts {
		if started && runes(cur)+runes(sep)+runes(p) <= limit {
			cur += sep + p
			continue
		}
		if started {
			out = append(out, cur)
		}
		cur, started = p, true
		if runes(p) > limit {
			pieces := cut(p)
			out = append(out, pieces[:len(pieces)-1]...)
			cur = pieces[len(pieces)-1]
		}
	}
	return append(out, cur)
}

// hardCut cuts s into pieces of at most limit runes, not inside a run of
// backticks (a fence) when the run can go whole into the next piece.
func hardCut(s string, limit int) []string {
	var out []string
	for runes(s) > limit {
		n, i := 0, 0
		for n < limit {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			n++
		}
		if s[i-1] == '`' && s[i] == '`' {
			k := i - 1
			for k > 0 && s[k-1] == '`' {
				k--
			}
			if k > 0 {
				i = k
			}
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return append(out, s)
}
