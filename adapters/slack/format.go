package slack

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"openbot/markdown"
)

// Format converts the Markdown a model writes into Slack mrkdwn (issue 3 item 6):
// **bold** and __bold__ become *bold*, *italic* and _italic_ become _italic_,
// ~~strike~~ becomes ~strike~, [label](url) becomes <url|label>, headings become bold
// lines, bullets become "•", tables are shown as preformatted text, fenced code
// blocks keep their content and lose their language tag. &, < and > are escaped
// everywhere as Slack requires, except in the links and quote markers Format itself
// writes. Format is pure and safe for concurrent use.
func Format(md string) string {
	var out []string
	for _, b := range markdown.Blocks(md) {
		switch b.Kind {
		case markdown.CodeBlock, markdown.TableBlock:
			out = append(out, "```")
			for _, l := range b.Lines {
				out = append(out, escapeText(l))
			}
			out = append(out, "```")
		default:
			out = append(out, formatLine(b.Lines[0]))
		}
	}
	return strings.Join(out, "\n")
}

// formatLine converts one line outside code blocks.
func formatLine(line string) string {
	l := markdown.ParseLine(line)
	switch l.Kind {
	case markdown.Rule:
		return markdown.RuleText
	case markdown.Heading:
		return "*" + formatInline(l.Text) + "*"
	case markdown.Bullet, markdown.Ordered:
		return l.Indent + l.Marker() + formatInline(l.Text)
	case markdown.Quote:
		return "> " + formatLine(l.Text)
	}
	return formatInline(line)
}

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
			n := markdown.RunLen(s, i, '`')
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
			if label, url, n, ok := markdown.Link(s[i:]); ok {
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
			if r, inner, n, ok := markdown.Emphasis(s, i, c); ok {
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

// escapeURL makes a URL safe inside <url|label>: & < > escaped, | percent-encoded.
func escapeURL(u string) string {
	return strings.ReplaceAll(escapeText(u), "|", "%7C")
}

// autolinkOrLink matches the <url> and <url|label> sequences Format writes.
var autolinkOrLink = regexp.MustCompile(`<(?:https?|mailto):[^\s<>|]+(?:\|[^<>]*)?>`)
