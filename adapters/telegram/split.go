package telegram

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxMessageLen is Telegram's sendMessage text limit in UTF-16 code units
// (core.telegram.org/bots/api#sendmessage: 1-4096 characters after entities parsing).
// Split measures the HTML itself, which is never shorter than the parsed text.
const MaxMessageLen = 4096

type tokKind int

const (
	tokText   tokKind = iota // one rune
	tokTag                   // <b>, </b>, <a href="…">
	tokEntity                // &lt; &gt; &amp; &quot;
)

type token struct {
	kind tokKind
	s    string
	n    int // length in UTF-16 code units
}

// tokenize cuts Telegram HTML into runes, whole tags and whole entities, so that a
// split point is never inside one of them or inside a surrogate pair.
func tokenize(html string) []token {
	toks := make([]token, 0, len(html))
	for i := 0; i < len(html); {
		switch html[i] {
		case '<':
			if end := strings.IndexByte(html[i:], '>'); end > 0 {
				s := html[i : i+end+1]
				toks = append(toks, token{tokTag, s, utf16Len(s)})
				i += end + 1
				continue
			}
		case '&':
			if end := strings.IndexByte(html[i:], ';'); end > 0 && end <= 8 {
				s := html[i : i+end+1]
				toks = append(toks, token{tokEntity, s, len(s)})
				i += end + 1
				continue
			}
		}
		r, size := utf8.DecodeRuneInString(html[i:])
		toks = append(toks, token{tokText, html[i : i+size], utf16.RuneLen(r)})
		i += size
	}
	return toks
}

// utf16Len is the length of s in UTF-16 code units, the unit Telegram counts in.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if l := utf16.RuneLen(r); l > 0 {
			n += l
		} else {
			n++ // invalid rune, sent as U+FFFD
		}
	}
	return n
}

type openTag struct {
	name string // "b", "pre", "a"
	open string // the opening tag as written, reopened in the next part
}

func tagName(tag string) (name string, closing bool) {
	t := strings.TrimPrefix(strings.TrimSuffix(tag, ">"), "<")
	if strings.HasPrefix(t, "/") {
		closing, t = true, t[1:]
	}
	if sp := strings.IndexAny(t, " \t\n"); sp >= 0 {
		t = t[:sp]
	}
	return strings.ToLower(t), closing
}

// apply returns the open-tag stack after token t.
func apply(stack []openTag, t token) []openTag {
	if t.kind != tokTag {
		return stack
	}
	name, closing := tagName(t.s)
	if !closing {
		return append(stack, openTag{name: name, open: t.s})
	}
	for k := len(stack) - 1; k >= 0; k-- {
		if stack[k].name == name {
			return stack[:k]
		}
	}
	return stack
}

func closeLen(stack []openTag) int {
	n := 0
	for _, o := range stack {
		n += len(o.name) + 3 // "</" name ">"
	}
	return n
}

func closers(stack []openTag) string {
	var b strings.Builder
	for k := len(stack) - 1; k >= 0; k-- {
		b.WriteString("</" + stack[k].name + ">")
	}
	return b.String()
}

func openers(stack []openTag) string {
	var b strings.Builder
	for _, o := range stack {
		b.WriteString(o.open)
	}
	return b.String()
}

// Break preferences, best last.
const (
	breakAny = iota
	breakSpace
	breakSentence
	breakLine
	breakParagraph
	nBreaks
)

// breakClass says how good a split is right after toks[j-1].
func breakClass(toks []token, j int) int {
	prev := toks[j-1]
	if prev.kind != tokText {
		return breakAny
	}
	switch prev.s {
	case "\n":
		if j >= 2 && toks[j-2].s == "\n" {
			return breakParagraph
		}
		return breakLine
	case " ", "\t":
		return breakSpace
	case "。", "！", "？", "；", "，", "、", "…":
		return breakSentence
	}
	return breakAny
}

type cut struct {
	end   int // split after toks[end-1]
	fill  int // UTF-16 units of the part up to end, without closers
	stack []openTag
	ok    bool
}

// Split cuts Telegram HTML into parts of at most limit UTF-16 code units each
// (MaxMessageLen when limit <= 0; DESIGN.md §4). It never cuts inside a tag, an
// entity or a surrogate pair: tags open at a cut are closed at the end of the part
// and reopened at the start of the next, so every part is valid HTML on its own. It
// prefers, within the second half of a part, a paragraph break, then a line break,
// then a CJK clause or sentence end, then a space; otherwise it cuts between any
// two characters (CJK text without spaces included). Whitespace at a cut stays at
// the end of the earlier part, so PlainText of the parts joined is PlainText of
// html. Split is pure.
func Split(html string, limit int) []string {
	if limit <= 0 {
		limit = MaxMessageLen
	}
	if utf16Len(html) <= limit {
		return []string{html}
	}
	toks := tokenize(html)
	var parts []string
	var stack []openTag
	for i := 0; i < len(toks); {
		prefix := openers(stack)
		cur := utf16Len(prefix)
		st := append([]openTag(nil), stack...)
		var best [nBreaks]cut
		j := i
		for ; j < len(toks); j++ {
			nst := apply(append([]openTag(nil), st...), toks[j])
			if cur+toks[j].n+closeLen(nst) > limit && j > i {
				break
			}
			cur, st = cur+toks[j].n, nst
			best[breakClass(toks, j+1)] = cut{end: j + 1, fill: cur, stack: st, ok: true}
		}
		c := cut{end: j, fill: cur, stack: st, ok: true}
		if j < len(toks) {
			for k := breakParagraph; k > breakAny; k-- {
				if best[k].ok && best[k].fill >= limit/2 {
					c = best[k]
					break
				}
			}
		}
		var b strings.Builder
		b.WriteString(prefix)
		for _, t := range toks[i:c.end] {
			b.WriteString(t.s)
		}
		b.WriteString(closers(c.stack))
		parts = append(parts, b.String())
		stack, i = c.stack, c.end
	}
	return parts
}
