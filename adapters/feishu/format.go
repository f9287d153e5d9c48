package feishu

import (
	"encoding/json"
	"regexp"
	"strings"
	"sync"
)

// Format turns Markdown as a model writes it into the Markdown dialect of a Feishu
// card "markdown" element (card JSON 2.0, https://open.feishu.cn/document/feishu-cards/card-json-v2-components/content-components/rich-text).
// It is pure. Code spans and fenced code blocks pass through untouched. Outside code:
// headings become bold lines (card headings are oversized and not in JSON 1.0),
// "*" and "+" bullets become "-", task boxes become ☐/☑, "__bold__" becomes
// "**bold**", images become links (a card image needs an uploaded img_key), "***"
// and "___" rules become "---", and "<" is written as "&#60;" so text can never
// form a card tag such as <at> or <font>. Unlike Slack's and Telegram's
// formatters it does not rebuild the text from markdown.Blocks and
// markdown.LineFormat: a card already speaks Markdown, so what is not rewritten
// must pass through byte for byte.
func Format(md string) string {
	md = strings.ReplaceAll(md, "\r\n", "\n")
	lines := strings.Split(md, "\n")
	var out []string
	fence := ""
	for _, l := range lines {
		trim := strings.TrimLeft(l, " ")
		if fence != "" {
			out = append(out, l)
			if strings.HasPrefix(trim, fence) && strings.Trim(trim, "`~") == "" {
				fence = ""
			}
			continue
		}
		if f := fenceOpen(trim); f != "" {
			fence = f
			out = append(out, l)
			continue
		}
		out = append(out, formatLine(l))
	}
	return strings.Join(out, "\n")
}

// fenceOpen returns the fence marker ("```" or "~~~", possibly longer) when line
// opens a fenced code block, else "".
func fenceOpen(line string) string {
	for _, c := range []string{"`", "~"} {
		n := len(line) - len(strings.TrimLeft(line, c))
		if n >= 3 {
			return strings.Repeat(c, n)
		}
	}
	return ""
}

var (
	headingRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$`) })
	bulletRe  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*)[*+]\s+`) })
	taskRe    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*)- \[([ xX])\]\s+`) })
	ruleRe    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^ {0,3}([*_])(\s*[*_]){2,}\s*$`) })
	imageRe   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`!\[([^\]]*)\]\(([^)\s]+)\)`) })
	boldUndRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(^|[^\w])__([^_\s](?:[^_]*[^_\s])?)__([^\w]|$)`) })
)

// formatLine converts one line outside code blocks.
func formatLine(l string) string {
	if ruleRe().MatchString(l) {
		return "---"
	}
	heading := false
	if m := headingRe().FindStringSubmatch(l); m != nil {
		l, heading = m[1], true
	}
	l = bulletRe().ReplaceAllString(l, "$1- ")
	l = taskRe().ReplaceAllStringFunc(l, func(s string) string {
		m := taskRe().FindStringSubmatch(s)
		if m[2] == " " {
			return m[1] + "- ☐ "
		}
		return m[1] + "- ☑ "
	})
	// Inline: leave code spans alone.
	var b strings.Builder
	for i, part := range splitCodeSpans(l) {
		if i%2 == 1 {
			b.WriteString(part)
			continue
		}
		part = imageRe().ReplaceAllString(part, "[$1]($2)")
		part = boldUndRe().ReplaceAllString(part, "$1**$2**$3")
		part = strings.ReplaceAll(part, "<", "&#60;")
		b.WriteString(part)
	}
	l = b.String()
	if heading && l != "" && !strings.HasPrefix(l, "**") {
		l = "**" + l + "**"
	}
	return l
}

// splitCodeSpans splits a line into alternating text and `code span` parts (even
// indexes are text, odd ones code spans with their backticks). An unmatched backtick
// run is text.
func splitCodeSpans(l string) []string {
	var parts []string
	for {
		i := strings.IndexByte(l, '`')
		if i < 0 {
			return append(parts, l)
		}
		n := len(l[i:]) - len(strings.TrimLeft(l[i:], "`"))
		tick := l[i : i+n]
		j := strings.Index(l[i+n:], tick)
		if j < 0 {
			return append(parts, l)
		}
		end := i + n + j + n
		parts = append(parts, l[:i], l[i:end])
		l = l[end:]
	}
}

// card is the card JSON 2.0 openbot sends: one markdown element, updatable for
// everyone (fixtures feishu/card_v2_with_buttons.json shows the full shape).
type card struct {
	Schema string     `json:"schema"`
	Config cardConfig `json:"config"`
	Body   cardBody   `json:"body"`
}

type cardConfig struct {
	UpdateMulti bool   `json:"update_multi"`
	WidthMode   string `json:"width_mode"`
}

type cardBody struct {
	Elements []cardMarkdown `json:"elements"`
}

type cardMarkdown struct {
	Tag     string `json:"tag"`
	Content string `json:"content"`
}

// Card returns the interactive card JSON (the string that goes into "content" with
// msg_type "interactive") showing content, which must already be card Markdown
// (Format's output).
func Card(content string) string {
	b, _ := json.Marshal(card{
		Schema: "2.0",
		Config: cardConfig{UpdateMulti: true, WidthMode: "fill"},
		Body:   cardBody{Elements: []cardMarkdown{{Tag: "markdown", Content: content}}},
	})
	return string(b)
}

// textContent returns the content JSON of a msg_type "text" message.
func textContent(text string) string {
	b, _ := json.Marshal(map[string]string{"text": text})
	return string(b)
}
