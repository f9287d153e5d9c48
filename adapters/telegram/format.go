package telegram

import (
	"strings"

	"openbot/markdown"
)

// Format converts the Markdown a model writes into Telegram HTML (parse_mode HTML,
// core.telegram.org/bots/api#html-style; DESIGN.md §4): **bold** and __bold__
// become <b>, *italic* and _italic_ <i>, ~~strike~~ <s>, `code` <code>, fenced code
// blocks <pre> (with <code class="language-x"> when a language is given),
// [label](url) and <url> become <a href>, headings bold lines, bullets "•", "> "
// lines a <blockquote>, tables preformatted text. <, > and & are escaped everywhere
// (and " inside href), so model text can never inject markup. Every tag Format opens
// it closes on the same block. Format is pure and safe for concurrent use.
func Format(md string) string {
	blocks := markdown.Blocks(md)
	var out []string
	for i := 0; i < len(blocks); i++ {
		b := blocks[i]
		switch b.Kind {
		case markdown.CodeBlock:
			var body []string
			for _, l := range b.Lines {
				body = append(body, escapeHTML(l))
			}
			code := strings.Join(body, "\n")
			if b.Lang != "" {
				out = append(out, `<pre><code class="language-`+escapeHTML(b.Lang)+`">`+code+"</code></pre>")
			} else {
				out = append(out, "<pre>"+code+"</pre>")
			}
			continue
		case markdown.TableBlock:
			var body []string
			for _, l := range b.Lines {
				body = append(body, escapeHTML(l))
			}
			out = append(out, "<pre>"+strings.Join(body, "\n")+"</pre>")
			continue
		}
		// Consecutive "> " lines make one blockquote.
		var quote []string
		for ; i < len(blocks) && blocks[i].Kind == markdown.TextBlock; i++ {
			q := markdown.ParseLine(blocks[i].Lines[0])
			if q.Kind != markdown.Quote {
				break
			}
			quote = append(quote, formatLine(q.Text))
		}
		if len(quote) > 0 {
			i--
			out = append(out, "<blockquote>"+strings.Join(quote, "\n")+"</blockquote>")
			continue
		}
		out = append(out, formatLine(b.Lines[0]))
	}
	return strings.Join(out, "\n")
}

// formatLine converts one line outside code blocks and quotes.
var formatLine = markdown.LineFormat{Inline: html{}, Heading: func(s string) string { return "<b>" + s + "</b>" }}.Line

// escapeHTML escapes the characters Telegram's HTML parser treats as markup: &, <
// and > (core.telegram.org/bots/api#html-style), plus " for attribute values.
var escapeHTML = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace

// html renders inline spans as Telegram HTML.
type html struct{}

func (html) Text(s string) string    { return escapeHTML(s) }
func (html) Code(code string) string { return "<code>" + escapeHTML(code) + "</code>" }
func (html) Link(label, url string) string {
	return `<a href="` + escapeHTML(url) + `">` + label + "</a>"
}
func (html) Autolink(url string) string {
	return `<a href="` + escapeHTML(url) + `">` + escapeHTML(url) + "</a>"
}
func (html) Emphasis(kind markdown.Emph, inner string) string {
	switch kind {
	case markdown.Strike:
		return "<s>" + inner + "</s>"
	case markdown.Italic:
		return "<i>" + inner + "</i>"
	case markdown.Bold:
		return "<b>" + inner + "</b>"
	}
	return "<b><i>" + inner + "</i></b>"
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
