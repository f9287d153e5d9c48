package slack

import (
	"strings"
	"unicode/utf8"
)

// MaxChunk is the most characters (runes) Deliver puts in one chat.postMessage text.
// Slack truncates text above 40,000 characters and recommends staying under 4,000
// for readability (fixtures API_NOTES.md "Limits"); 3,900 leaves room for the
// fences Split adds when it has to cut a code block.
const MaxChunk = 3900

// Split cuts mrkdwn text into chunks of at most limit runes (DESIGN.md §4: split at the platform's length limit). It cuts
// only between paragraphs or around code blocks when it can, so a code block that
// fits in one chunk is never divided; a paragraph longer than limit is cut between
// lines, then between words, then anywhere; a code block longer than limit is cut
// between lines and every piece is closed and reopened with ``` so each chunk
// renders on its own. Text of at most limit runes is returned as it is. Leading and
// trailing blank lines of each chunk are dropped; nothing else is. limit values
// below 16 are raised to 16. Feishu's Split differs where the formats do (see
// there).
func Split(text string, limit int) []string {
	limit = max(limit, 16)
	if utf8.RuneCountInString(text) <= limit {
		return []string{text}
	}
	var (
		chunks []string
		cur    strings.Builder
		curLen int
	)
	flush := func() {
		if s := strings.Trim(cur.String(), "\n"); s != "" {
			chunks = append(chunks, s)
		}
		cur.Reset()
		curLen = 0
	}
	add := func(sep, s string) {
		if curLen == 0 {
			sep = ""
		}
		cur.WriteString(sep)
		cur.WriteString(s)
		curLen += utf8.RuneCountInString(sep) + utf8.RuneCountInString(s)
	}
	for _, u := range splitUnits(text) {
		n := utf8.RuneCountInString(u.text)
		sepLen := utf8.RuneCountInString(u.sep)
		if curLen > 0 && curLen+sepLen+n <= limit {
			add(u.sep, u.text)
			continue
		}
		flush()
		if n <= limit {
			add("", u.text)
			continue
		}
		var pieces []string
		if u.code {
			pieces = splitCode(u.text, limit)
		} else {
			pieces = splitLong(u.text, limit)
		}
		for i, p := range pieces {
			add("", p)
			if i < len(pieces)-1 {
				flush()
			}
		}
	}
	flush()
	return chunks
}

// unit is a paragraph or a whole code block, with the newlines that preceded it.
type unit struct {
	sep  string
	text string
	code bool
}

// splitUnits breaks text into paragraphs (runs of non-blank lines) and fenced code
// blocks (from ``` to ```, blank lines included).
func splitUnits(text string) []unit {
	lines := strings.Split(text, "\n")
	var (
		units   []unit
		pending = 0 // newlines since the last unit
		cur     []string
		inCode  bool
	)
	emit := func(code bool) {
		if len(cur) == 0 {
			return
		}
		sep := strings.Repeat("\n", max(pending, 1))
		units = append(units, unit{sep: sep, text: strings.Join(cur, "\n"), code: code})
		cur = nil
		pending = 0
	}
	for _, line := range lines {
		fence := strings.HasPrefix(strings.TrimLeft(line, " \t"), "```")
		switch {
		case inCode:
			cur = append(cur, line)
			if fence {
				inCode = false
				emit(true)
				pending = 1
			}
		case fence:
			emit(false)
			if len(units) > 0 && pending == 0 {
				pending = 1
			}
			cur = append(cur, line)
			// "```code```" on one line opens and closes at once.
			if t := strings.TrimSpace(line); len(t) > 6 && strings.HasSuffix(t, "```") {
				emit(true)
				pending = 1
				continue
			}
			inCode = true
		case strings.TrimSpace(line) == "":
			if len(cur) > 0 {
				emit(false)
				pending = 1
			}
			pending++
		default:
			if len(cur) == 0 && len(units) > 0 && pending == 0 {
				pending = 1
			}
			cur = append(cur, line)
		}
	}
	emit(inCode)
	return units
}

// splitCode cuts an oversized ``` block between lines; each piece is a closed block.
func splitCode(block string, limit int) []string {
	lines := strings.Split(block, "\n")
	open := "```"
	body := lines[1:]
	if len(lines) > 1 && strings.HasPrefix(strings.TrimSpace(lines[len(lines)-1]), "```") {
		body = lines[1 : len(lines)-1]
	}
	if first := strings.TrimSpace(lines[0]); first != "```" {
		// content on the opening line: keep it as the first body line
		body = append([]string{strings.TrimPrefix(first, "```")}, body...)
	}
	room := limit - 8 // "```\n" + "\n```"
	var (
		pieces []string
		cur    []string
		curLen int
	)
	flush := func() {
		if len(cur) > 0 {
			pieces = append(pieces, open+"\n"+strings.Join(cur, "\n")+"\n```")
		}
		cur, curLen = nil, 0
	}
	for _, line := range body {
		for _, part := range hardCut(line, room) {
			n := utf8.RuneCountInString(part)
			if len(cur) > 0 && curLen+1+n > room {
				flush()
			}
			if len(cur) > 0 {
				curLen++
			}
			cur = append(cur, part)
			curLen += n
		}
	}
	flush()
	return pieces
}

// splitLong cuts an oversized paragraph between lines, then words, then runes.
func splitLong(p string, limit int) []string {
	var (
		pieces []string
		cur    strings.Builder
		curLen int
		empty  = true
	)
	push := func(sep, s string) {
		n := utf8.RuneCountInString(s)
		if !empty && curLen+len(sep)+n > limit {
			pieces = append(pieces, cur.String())
			cur.Reset()
			curLen, empty = 0, true
		}
		if !empty {
			cur.WriteString(sep)
			curLen += len(sep)
		}
		cur.WriteString(s)
		curLen += n
		empty = false
	}
	for _, line := range strings.Split(p, "\n") {
		if utf8.RuneCountInString(line) <= limit {
			push("\n", line)
			continue
		}
		first := true
		for _, w := range strings.Split(line, " ") {
			sep := " "
			if first {
				sep, first = "\n", false
			}
			for _, part := range hardCut(w, limit) {
				push(sep, part)
				sep = " "
			}
		}
	}
	if !empty {
		pieces = append(pieces, cur.String())
	}
	return pieces
}

// hardCut cuts s into pieces of at most limit runes without splitting a rune.
func hardCut(s string, limit int) []string {
	if utf8.RuneCountInString(s) <= limit {
		return []string{s}
	}
	var out []string
	for len(s) > 0 {
		n, i := 0, 0
		for i < len(s) && n < limit {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			n++
		}
		// Do not cut a ``` fence (or any backtick run) in two: cut before the run.
		if i < len(s) && s[i-1] == '`' && s[i] == '`' {
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
	return out
}
