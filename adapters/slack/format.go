package slack

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Format converts the Markdown a model writes into Slack mrkdwn (issue 3 item 6):
// **bold** and __bold__ become *bold*, *italic* and _italic_ become _italic_,
// ~~strike~~ becomes ~strike~, [label](url) becomes <url|label>, headings become bold
// lines, bullets become "•", tables are shown as preformatted text, fenced code
// blocks keep their content and lose their language tag. &, < and > are escaped
// everywhere as Slack requires, except in the links and quote markers Format itself
// writes. Format is pure and safe for concurrent use.
func Format(md string) string {
	lines := strings.Split(strings.ReplaceAll(md, "\r\n", "\n"), "\n")
	out := make([]string, 0, len(lines))
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimLeft(line, " \t")
		if fence, ok := openingFence(trimmed); ok {
			out = append(out, "```")
			for i++; i < len(lines); i++ {
				if isClosingFence(strings.TrimLeft(lines[i], " \t"), fence) {
					break
				}
				out = append(out, escapeText(lines[i]))
			}
			out = append(out, "```")
			continue
		}
		if isTableLine(trimmed) && i+1 < len(lines) && isTableSeparator(strings.TrimSpace(lines[i+1])) {
			out = append(out, "```")
			for ; i < len(lines) && isTableLine(strings.TrimLeft(lines[i], " \t")); i++ {
				out = append(out, escapeText(lines[i]))
			}
			i--
			out = append(out, "```")
			continue
		}
		out = append(out, formatLine(line))
	}
	return strings.Join(out, "\n")
}

var (
	headingRe = regexp.MustCompile(`^#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$`)
	bulletRe  = regexp.MustCompile(`^([ \t]*)[-*+][ \t]+(.*)$`)
	taskRe    = regexp.MustCompile(`^\[([ xX])\][ \t]+(.*)$`)
	orderedRe = regexp.MustCompile(`^([ \t]*)(\d{1,9})[.)][ \t]+(.*)$`)
	quoteRe   = regexp.MustCompile(`^[ \t]*>[ \t]?(.*)$`)
	ruleRe    = regexp.MustCompile(`^[ \t]*(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$`)
)

// formatLine converts one line outside code blocks.
func formatLine(line string) string {
	switch {
	case ruleRe.MatchString(line):
		return "──────────"
	case headingRe.MatchString(line):
		m := headingRe.FindStringSubmatch(line)
		// A heading is already bold; bold inside it would close the outer *.
		text := strings.NewReplacer("**", "", "__", "").Replace(m[1])
		return "*" + formatInline(text) + "*"
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
	case quoteRe.MatchString(line):
		m := quoteRe.FindStringSubmatch(line)
		return ">" + " " + formatLine(m[1])
	}
	return formatInline(line)
}

// openingFence reports whether a line opens a fenced code block and returns the
// fence ("```" or "~~~", possibly longer).
func openingFence(s string) (string, bool) {
	for _, ch := range []byte{'`', '~'} {
		n := 0
		for n < len(s) && s[n] == ch {
			n++
		}
		if n >= 3 {
			if ch == '`' && strings.Contains(s[n:], "`") {
				return "", false // inline code like ```x``` on one line
			}
			return s[:n], true
		}
	}
	return "", false
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

var tableSepRe = regexp.MustCompile(`^\|?[ \t]*:?-{2,}:?[ \t]*(\|[ \t]*:?-{2,}:?[ \t]*)*\|?$`)

func isTableSeparator(s string) bool { return tableSepRe.MatchString(s) }

// escapeText escapes the three characters Slack treats as control characters.
func escapeText(s string) string {
	if !strings.ContainsAny(s, "&<>") {
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
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	autolinkRe = regexp.MustCompile(`^<((?:https?|mailto):[^\s<>|]+)>`)
	schemeRe   = regexp.MustCompile(`^(?:https?|mailto|ftp):`)
)

// formatInline converts inline Markdown in one line: code spans, links, emphasis.
func formatInline(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && strings.IndexByte("\\`*_{}[]()#+-.!~|<>&", s[i+1]) >= 0:
			b.WriteString(escapeText(s[i+1 : i+2]))
			i += 2
			continue
		case c == '`':
			n := runLen(s, i, '`')
			closing := strings.Index(s[i+n:], s[i:i+n])
			if closing >= 0 {
				b.WriteByte('`')
				b.WriteString(escapeText(s[i+n : i+n+closing]))
				b.WriteByte('`')
				i += n + closing + n
				continue
			}
			b.WriteString(s[i : i+n])
			i += n
			continue
		case c == '[':
			if label, url, n, ok := parseLink(s[i:]); ok {
				if schemeRe.MatchString(url) {
					b.WriteString("<" + escapeURL(url) + "|" + strings.ReplaceAll(formatInline(label), "|", "¦") + ">")
				} else { // a relative link has nowhere to go in Slack
					b.WriteString(formatInline(label) + " (" + escapeText(url) + ")")
				}
				i += n
				continue
			}
		case c == '<':
			if m := autolinkRe.FindStringSubmatch(s[i:]); m != nil {
				b.WriteString("<" + escapeURL(m[1]) + ">")
				i += len(m[0])
				continue
			}
		case c == '*' || c == '_' || c == '~':
			if r, inner, n, ok := emphasis(s, i, c); ok {
				inner = formatInline(inner)
				switch {
				case c == '~':
					b.WriteString("~" + inner + "~")
				case r == 1:
					b.WriteString("_" + inner + "_")
				case r == 2:
					b.WriteString("*" + inner + "*")
				default:
					b.WriteString("*_" + inner + "_*")
				}
				i += n
				continue
			}
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		b.WriteString(escapeText(string(r)))
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

// escapeURL makes a URL safe inside <url|label>: & < > escaped, | percent-encoded.
func escapeURL(u string) string {
	return strings.ReplaceAll(escapeText(u), "|", "%7C")
}

// autolinkOrLink matches the <url> and <url|label> sequences Format writes.
var autolinkOrLink = regexp.MustCompile(`<(?:https?|mailto):[^\s<>|]+(?:\|[^<>]*)?>`)
