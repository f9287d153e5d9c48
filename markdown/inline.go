package markdown

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

var autolinkRe = regexp.MustCompile(`^<((?:https?|mailto):[^\s<>|]+)>`)

// Emph is the kind of an emphasis span.
type Emph int

// Emphasis kinds: *x* or _x_, **x** or __x__, ***x***, ~~x~~.
const (
	Italic Emph = iota
	Bold
	BoldItalic
	Strike
)

// InlineRenderer writes one platform's markup for the inline spans Inline finds.
// Text gets plain text to escape (one character, or a run of backticks that opens
// no code span); Link and Emphasis get their label or inner text already rendered.
type InlineRenderer interface {
	Text(s string) string
	Code(code string) string
	Link(label, url string) string
	Autolink(url string) string
	Emphasis(kind Emph, inner string) string
}

// markdownEscapes are the characters a backslash makes literal.
const markdownEscapes = "\\`*_{}[]()#+-.!~|<>&"

// Inline renders the inline Markdown of one line through r: backslash escapes,
// code spans, [label](url) links, <url> autolinks and emphasis (see Emphasis),
// nested spans rendered inside out. Invalid UTF-8 becomes U+FFFD, which platforms
// accept. It is pure.
func Inline(s string, r InlineRenderer) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && strings.IndexByte(markdownEscapes, s[i+1]) >= 0:
			b.WriteString(r.Text(s[i+1 : i+2]))
			i += 2
			continue
		case c == '`':
			n := RunLen(s, i, '`')
			if closing := strings.Index(s[i+n:], s[i:i+n]); closing >= 0 {
				b.WriteString(r.Code(s[i+n : i+n+closing]))
				i += n + closing + n
				continue
			}
			b.WriteString(s[i : i+n]) // backticks need no escaping anywhere
			i += n
			continue
		case c == '[':
			if label, url, n, ok := Link(s[i:]); ok {
				b.WriteString(r.Link(Inline(label, r), url))
				i += n
				continue
			}
		case c == '<':
			if m := autolinkRe.FindStringSubmatch(s[i:]); m != nil {
				b.WriteString(r.Autolink(m[1]))
				i += len(m[0])
				continue
			}
		case c == '*' || c == '_' || c == '~':
			if run, inner, n, ok := Emphasis(s, i, c); ok {
				kind := [...]Emph{1: Italic, 2: Bold, 3: BoldItalic}[run]
				if c == '~' {
					kind = Strike
				}
				b.WriteString(r.Emphasis(kind, Inline(inner, r)))
				i += n
				continue
			}
		}
		ch, size := utf8.DecodeRuneInString(s[i:])
		if ch == utf8.RuneError && size == 1 {
			b.WriteString(r.Text("\uFFFD"))
		} else {
			b.WriteString(r.Text(s[i : i+size]))
		}
		i += size
	}
	return b.String()
}
