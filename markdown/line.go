package markdown

import (
	"regexp"
	"strings"
)

var (
	headingRe = regexp.MustCompile(`^#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$`)
	bulletRe  = regexp.MustCompile(`^([ \t]*)[-*+][ \t]+(.*)$`)
	taskRe    = regexp.MustCompile(`^\[([ xX])\][ \t]+(.*)$`)
	orderedRe = regexp.MustCompile(`^([ \t]*)(\d{1,9})[.)][ \t]+(.*)$`)
	quoteRe   = regexp.MustCompile(`^[ \t]*>[ \t]?(.*)$`)
	ruleRe    = regexp.MustCompile(`^[ \t]*(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$`)
)

// LineKind is what a line outside code blocks and tables is.
type LineKind int

// Line kinds.
const (
	Text    LineKind = iota // a paragraph line
	Rule                    // a thematic break: ---, ***, ___
	Heading                 // # to ######
	Bullet                  // - * + items, task items included
	Ordered                 // 1. or 1) items
	Quote                   // > lines
)

// Line is one classified line. Text is the content to format inline: the heading
// text (with ** and __ removed, since a heading is shown bold already), the item
// text, or the quoted text; for Text lines the whole line.
type Line struct {
	Kind    LineKind
	Indent  string // leading blanks of a list item
	Text    string
	Number  string // an ordered item's number
	Task    bool   // a "- [ ]" or "- [x]" item
	Checked bool
}

// ParseLine classifies one line outside code blocks and tables.
func ParseLine(s string) Line {
	switch {
	case ruleRe.MatchString(s):
		return Line{Kind: Rule}
	case headingRe.MatchString(s):
		m := headingRe.FindStringSubmatch(s)
		return Line{Kind: Heading, Text: strings.NewReplacer("**", "", "__", "").Replace(m[1])}
	case bulletRe.MatchString(s):
		m := bulletRe.FindStringSubmatch(s)
		l := Line{Kind: Bullet, Indent: m[1], Text: m[2]}
		if t := taskRe.FindStringSubmatch(m[2]); t != nil {
			l.Task, l.Checked, l.Text = true, t[1] != " ", t[2]
		}
		return l
	case orderedRe.MatchString(s):
		m := orderedRe.FindStringSubmatch(s)
		return Line{Kind: Ordered, Indent: m[1], Number: m[2], Text: m[3]}
	case quoteRe.MatchString(s):
		return Line{Kind: Quote, Text: quoteRe.FindStringSubmatch(s)[1]}
	}
	return Line{Kind: Text, Text: s}
}

// Marker is the plain-text marker of a list item as chat apps show it: "• ", "☐ ",
// "☑ " or "N. "; "" for other lines.
func (l Line) Marker() string {
	switch {
	case l.Kind == Ordered:
		return l.Number + ". "
	case l.Kind != Bullet:
		return ""
	case !l.Task:
		return "• "
	case l.Checked:
		return "☑ "
	}
	return "☐ "
}

// RuleText is how a thematic break is shown in chat.
const RuleText = "──────────"

// LineFormat is how one chat dialect shows a line outside code blocks and
// tables: rules as RuleText, headings as Heading of their inline text, list
// items with their Marker, quotes with Quote, everything else inline.
type LineFormat struct {
	Inline  InlineRenderer
	Heading func(inline string) string
	// Quote shows a quoted line already formatted; nil shows the line as text
	// (a dialect that groups quotes itself).
	Quote func(formatted string) string
}

// Line formats one line.
func (f LineFormat) Line(line string) string {
	l := ParseLine(line)
	switch l.Kind {
	case Rule:
		return RuleText
	case Heading:
		return f.Heading(Inline(l.Text, f.Inline))
	case Bullet, Ordered:
		return l.Indent + l.Marker() + Inline(l.Text, f.Inline)
	case Quote:
		if f.Quote != nil {
			return f.Quote(f.Line(l.Text))
		}
	}
	return Inline(line, f.Inline)
}

// BlockKind is the kind of a Block.
type BlockKind int

// Block kinds.
const (
	TextBlock  BlockKind = iota // one line outside code and tables (see ParseLine)
	CodeBlock                   // a fenced code block: its lines, without the fences
	TableBlock                  // a pipe table: its lines as written
)

// Block is one block of a Markdown text.
type Block struct {
	Kind  BlockKind
	Lang  string   // a code block's language, if it names one
	Lines []string // CodeBlock and TableBlock lines; one line for a TextBlock
}

// Blocks splits Markdown into fenced code blocks (closed by the same fence, or by
// the end of the text), pipe tables (a table line followed by a separator line, up
// to the last table line) and single text lines. CRLF is read as LF.
func Blocks(md string) []Block {
	lines := strings.Split(strings.ReplaceAll(md, "\r\n", "\n"), "\n")
	var out []Block
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimLeft(lines[i], " \t")
		if fence, lang, ok := OpeningFence(trimmed); ok {
			b := Block{Kind: CodeBlock, Lang: lang}
			for i++; i < len(lines) && !ClosingFence(strings.TrimLeft(lines[i], " \t"), fence); i++ {
				b.Lines = append(b.Lines, lines[i])
			}
			out = append(out, b)
			continue
		}
		if TableLine(trimmed) && i+1 < len(lines) && TableSeparator(lines[i+1]) {
			b := Block{Kind: TableBlock}
			for ; i < len(lines) && TableLine(lines[i]); i++ {
				b.Lines = append(b.Lines, lines[i])
			}
			i--
			out = append(out, b)
			continue
		}
		out = append(out, Block{Kind: TextBlock, Lines: []string{lines[i]}})
	}
	return out
}
