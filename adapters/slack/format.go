package slack

import (
	"regexp"
	"strings"
	"sync"

	"openbot/markdown"
)

// Format converts the Markdown a model writes into Slack mrkdwn (DESIGN.md §4: formatted for the platform):
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
var formatLine = markdown.LineFormat{
	Inline:  mrkdwn{},
	Heading: func(s string) string { return "*" + s + "*" },
	Quote:   func(s string) string { return "> " + s },
}.Line

// escapeText escapes the three characters Slack treats as control characters.
var escapeText = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace

var (
	schemeRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(?:https?|mailto|ftp):`) })
)

// mrkdwn renders inline spans as Slack mrkdwn.
type mrkdwn struct{}

func (mrkdwn) Text(s string) string    { return escapeText(s) }
func (mrkdwn) Code(code string) string { return "`" + escapeText(code) + "`" }
func (mrkdwn) Link(label, url string) string {
	if !schemeRe().MatchString(url) { // a relative link has nowhere to go in Slack
		return label + " (" + escapeText(url) + ")"
	}
	return "<" + escapeURL(url) + "|" + strings.ReplaceAll(label, "|", "¦") + ">"
}
func (mrkdwn) Autolink(url string) string { return "<" + escapeURL(url) + ">" }
func (mrkdwn) Emphasis(kind markdown.Emph, inner string) string {
	switch kind {
	case markdown.Strike:
		return "~" + inner + "~"
	case markdown.Italic:
		return "_" + inner + "_"
	case markdown.Bold:
		return "*" + inner + "*"
	}
	return "*_" + inner + "_*"
}

// escapeURL makes a URL safe inside <url|label>: & < > escaped, | percent-encoded.
func escapeURL(u string) string {
	return strings.ReplaceAll(escapeText(u), "|", "%7C")
}

// autolinkOrLink matches the <url> and <url|label> sequences Format writes.
var autolinkOrLink = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`<(?:https?|mailto):[^\s<>|]+(?:\|[^<>]*)?>`) })
