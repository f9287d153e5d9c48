package telegram

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Format converts the Markdown a model writes into Telegram HTML (parse_mode HTML,
// core.telegram.org/bots/api#html-style; issue 4 item 5): **bold** and __bold__
// become <b>, *italic* and _italic_ <i>, ~~strike~~ <s>, `code` <code>, fenced code
// blocks <pre> (with <code class="language-x"> when a language is given),
// [label](url) and <url> become <a href>, headings bold lines, bullets "•", "> "
// lines a <blockquote>, tables preformatted text. <, > and & are escaped everywhere
// (and " inside href), so model text can never inject markup. Every tag Format opens
// it closes on the same block. Format is pure and safe for concurrent use.
func Format(md string) string {
	lines := strings.Split(strings.ReplaceAll(md, "\r\n", "\n"), "\n")
	out := make([]string, 0, len(lines))
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimLeft(line, " \t")
		if fence, lang, ok := openingFence(trimmed); ok {
			var body []string
			for i++; i < len(lines); i++ {
				if isClosingFence(strings.TrimLeft(lines[i], " \t"), fence) {
					break
				}
				body = append(body, escapeHTML(lines[i]))
			}
			code := strings.Join(body, "\n")
			if lang != "" {
				out = append(out, `<pre><code class="language-`+escapeHTML(lang)+`">`+code+"</code></pre>")
			} else {
				out = append(out, "<pre>"+code+"</pre>")
			}
			continue
		}
		if isTableLine(trimmed) && i+1 < len(lines) && isTableSeparator(strings.TrimSpace(lines[i+1])) {
			var body []string
			for ; i < len(lines) && isTableLine(strings.TrimLeft(lines[i], " \t")); i++ {
				body = append(body, escapeHTML(lines[i]))
			}
			i--
			out = append(out, "<pre>"+strings.Join(body, "\n")+"</pre>")
			continue
		}
		if quoteRe.MatchString(line) {
			var body []string
			for ; i < len(lines) && quoteRe.MatchString(lines[i]); i++ {
				body = append(body, formatLine(quoteRe.FindStringSubmatch(lines[i])[1]))
			}
			i--
			out = append(out, "<blockquote>"+strings.Join(body, "\n")+"</blockquote>")
			continue
		}
		out = append(out, formatLine(line))
	}
	return strings.Join(out, "\n")
}

var (
	headingRe   = regexp.MustCompile(`^#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$`)
	bulletRe    = regexp.MustCompile(`^([ \t]*)[-*+][ \t]+(.*)$`)
	taskRe      = regexp.MustCompile(`^\[([ xX])\][ \t]+(.*)$`)
	orderedRe   = regexp.MustCompile(`^([ \t]*)(\d{1,9})[.)][ \t]+(.*)$`)
	quoteRe     = regexp.MustCompile(`^[ \t]*>[ \t]?(.*)$`)
	ruleRe      = regexp.MustCompile(`^[ \t]*(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$`)
	tableSepRe  = regexp.MustCompile(`^\|?[ \t]*:?-{2,}:?[ \t]*(\|[ \t]*:?-{2,}:?[ \t]*)*\|?$`)
	autolinkRe  = regexp.MustCompile(`^<((?:https?|mailto):[^\s<>]+)>`)
	fenceLangRe = regexp.MustCompile(`^[A-Za-z0-9_+#.-]*$`)
)

// formatLine converts one line outside code blocks and quotes.
func formatLine(line string) string {
	switch {
	case ruleRe.MatchString(line):
		return "──────────"
	case headingRe.MatchString(line):
		m := headingRe.FindStringSubmatch(line)
		// A heading is bold already; bold markers inside it are dropped.
		text := strings.NewReplacer("**", "", "__", "").Replace(m[1])
		return "<b>" + formatInline(text) + "</b>"
	case bulletRe.MatchString(line):
		m := bulletRe.FindStringSubmatch(line)
		if t := taskRe.FindStringSubmatch(m[2]); t != nil {
			box := "☐"
			if t[1] != " " {
				box = "☑"
			}
			return m[1] + box + " " + formatInline(t[2])
		}
		return m[1] + "• " + formatInline(m[2])
	case orderedRe.MatchString(line):
		m := orderedRe.FindStringSubmatch(line)
		return m[1] + m[2] + ". " + formatInline(m[3])
	}
	return formatInline(line)
}

// openingFence reports whether a line opens a fenced code block and returns the
// fence ("```" or "~~~", possibly longer) and the info string's language word.
func openingFence(s string) (fence, lang string, ok bool) {
	for _, ch := range []byte{'`', '~'} {
		n := 0
		for n < len(s) && s[n] == ch {
			n++
		}
		if n >= 3 {
			info := strings.TrimSpace(s[n:])
			if ch == '`' && strings.Contains(info, "`") {
				return "", "", false // inline code like ```x``` on one line
			}
			lang, _, _ = strings.Cut(info, " ")
			if !fenceLangRe.MatchString(lang) {
				lang = ""
			}
			return s[:n], lang, true
		}
	}
	return "", "", false
}

func isClosingFence(s, fence string) bool {
	s = strings.TrimRight(s, " \t")
	if len(s) < len(fence) || s[0] != fence[0] {
		return false
	}
	return strings.Trim(s, fence[:1]) == ""
}

func isTableLine(s string) bool {
	s = strings.TrimSpace(s)
	return len(s) > 1 && s[0] == '|'
}

func isTableSeparator(s string) bool { return tableSepRe.MatchString(s) }

// escapeHTML escapes the characters Telegram's HTML parser treats as markup: &, <
// and > (core.telegram.org/bots/api#html-style), plus " for attribute values.
func escapeHTML(s string) string {
	if !strings.ContainsAny(s, `&<>"`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '"':
			b.WriteString("&quot;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// formatInline converts inline Markdown in one line: escapes, code spans, links,
// autolinks and emphasis.
func formatInline(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && strings.IndexByte("\\`*_{}[]()#+-.!~|<>&", s[i+1]) >= 0:
			b.WriteString(escapeHTML(s[i+1 : i+2]))
			i += 2
			continue
		case c == '`':
			n := runLen(s, i, '`')
			closing := strings.Index(s[i+n:], s[i:i+n])
			if closing >= 0 {
				b.WriteString("<code>" + escapeHTML(s[i+n:i+n+closing]) + "</code>")
				i += n + closing + n
				continue
			}
			b.WriteString(s[i : i+n])
			i += n
			continue
		case c == '[':
			if label, url, n, ok := parseLink(s[i:]); ok {
				b.WriteString(`<a href="` + escapeHTML(url) + `">` + formatInline(label) + "</a>")
				i += n
				continue
			}
		case c == '<':
			if m := autolinkRe.FindStringSubmatch(s[i:]); m != nil {
				b.WriteString(`<a href="` + escapeHTML(m[1]) + `">` + escapeHTML(m[1]) + "</a>")
				i += len(m[0])
				continue
			}
		case c == '*' || c == '_' || c == '~':
			if r, inner, n, ok := emphasis(s, i, c); ok {
				inner = formatInline(inner)
				switch {
				case c == '~':
					b.WriteString("<s>" + inner + "</s>")
				case r == 1:
					b.WriteString("<i>" + inner + "</i>")
				case r == 2:
					b.WriteString("<b>" + inner + "</b>")
				default:
					b.WriteString("<b><i>" + inner + "</i></b>")
				}
				i += n
				continue
			}
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD") // invalid UTF-8 would make Telegram reject the message
		} else {
			b.WriteString(escapeHTML(s[i : i+size]))
		}
		i += size
	}
	return b.String()
}

func runLen(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// emphasis matches a delimiter run of one to three copies of c at s[i] (exactly two
// for "~") and its closer of the same length, following CommonMark's flanking rules
// closely enough for model output: the opener is followed by a non-space, the closer
// preceded by one, and for "_" neither touches a word (snake_case stays as it is).
// It returns the run length, the text between the delimiters and the bytes consumed.
func emphasis(s string, i int, c byte) (run int, inner string, consumed int, ok bool) {
	r := runLen(s, i, c)
	if r > 3 || (c == '~' && r != 2) {
		return 0, "", 0, false
	}
	start := i + r
	if start >= len(s) || s[start] == ' ' || s[start] == '\t' {
		return 0, "", 0, false
	}
	if c == '_' && i > 0 && isWordByte(s, i-1) {
		return 0, "", 0, false
	}
	for j := start + 1; j < len(s); j++ {
		switch s[j] {
		case '`': // a code span inside emphasis is skipped whole
			m := runLen(s, j, '`')
			if k := strings.Index(s[j+m:], s[j:j+m]); k >= 0 {
				j += m + k + m - 1
			} else {
				j += m - 1
			}
			continue
		case c:
		default:
			continue
		}
		rr := runLen(s, j, c)
		end := j + rr
		if rr == r && s[j-1] != ' ' && s[j-1] != '\t' && !(c == '_' && end < len(s) && isWordByte(s, end)) {
			return r, s[start:j], end - i, true
		}
		j += rr - 1
	}
	return 0, "", 0, false
}

func isWordByte(s string, i int) bool {
	r, _ := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError {
		r, _ = utf8.DecodeLastRuneInString(s[:i+1])
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// parseLink parses "[label](url)" or "[label](url "title")" at the start of s.
func parseLink(s string) (label, url string, n int, ok bool) {
	depth := 0
	for j := 0; j < len(s); j++ {
		switch s[j] {
		case '[':
			depth++
		case ']':
			depth--
			if depth == 0 {
				if j+1 >= len(s) || s[j+1] != '(' {
					return "", "", 0, false
				}
				end := strings.IndexByte(s[j+2:], ')')
				if end < 0 {
					return "", "", 0, false
				}
				target := strings.TrimSpace(s[j+2 : j+2+end])
				if sp := strings.IndexAny(target, " \t"); sp >= 0 {
					target = target[:sp] // drop a "title"
				}
				target = strings.Trim(target, "<>")
				if target == "" {
					return "", "", 0, false
				}
				return s[1:j], target, j + 2 + end + 1, true
			}
		case '`':
			return "", "", 0, false
		}
	}
	return "", "", 0, false
}

// PlainText returns the visible text of Telegram HTML as Format and Split produce
// it: tags removed and the entities &lt; &gt; &amp; &quot; decoded. It is what an
// adapter resends when Telegram cannot parse a message's entities.
func PlainText(html string) string {
	var b strings.Builder
	for _, tok := range tokenize(html) {
		switch tok.kind {
		case tokTag:
		case tokEntity:
			b.WriteString(entityText(tok.s))
		default:
			b.WriteString(tok.s)
		}
	}
	return b.String()
}

func entityText(e string) string {
	switch e {
	case "&lt;":
		return "<"
	case "&gt;":
		return ">"
	case "&amp;":
		return "&"
	case "&quot;":
		return `"`
	}
	return e
}
