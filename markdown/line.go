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
