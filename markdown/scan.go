// Package markdown scans the Markdown that models write, for the platform
// formatters (Slack mrkdwn, Telegram HTML): code fences, tables, emphasis runs and
// links. It follows CommonMark closely enough for model output and stays pure: each
// adapter renders what these functions find in its own markup.
package markdown

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

var (
	tableSepRe  = regexp.MustCompile(`^\|?[ \t]*:?-{2,}:?[ \t]*(\|[ \t]*:?-{2,}:?[ \t]*)*\|?$`)
	fenceLangRe = regexp.MustCompile(`^[A-Za-z0-9_+#.-]*$`)
)

// RunLen is the number of consecutive bytes c in s starting at i.
func RunLen(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// Emphasis matches a delimiter run of one to three copies of c at s[i] (exactly two
// for "~") and its closer of the same length, following CommonMark's flanking rules
// closely enough for model output: the opener is followed by a non-space, the closer
// preceded by one, and for "_" neither touches a word (snake_case stays as it is).
// A code span inside is skipped whole. It returns the run length, the text between
// the delimiters and the bytes consumed from i.
func Emphasis(s string, i int, c byte) (run int, inner string, consumed int, ok bool) {
	r := RunLen(s, i, c)
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
			m := RunLen(s, j, '`')
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
		rr := RunLen(s, j, c)
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

// Link parses "[label](url)" or "[label](url "title")" at the start of s and
// returns the label, the URL (without a title or <>), and the bytes consumed.
func Link(s string) (label, url string, n int, ok bool) {
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

// OpeningFence reports whether line s opens a fenced code block ("```" or "~~~",
// three or more) and returns the fence and its language (empty unless it looks like
// one). "```x```" on one line is inline code, not a fence.
func OpeningFence(s string) (fence, lang string, ok bool) {
	for _, ch := range []byte{'`', '~'} {
		n := RunLen(s, 0, ch)
		if n >= 3 {
			info := strings.TrimSpace(s[n:])
			if ch == '`' && strings.Contains(info, "`") {
				return "", "", false
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

// ClosingFence reports whether line s closes a block opened by fence: the same
// character, at least as many, nothing else but trailing blanks.
func ClosingFence(s, fence string) bool {
	s = strings.TrimRight(s, " \t")
	if len(s) < len(fence) || s[0] != fence[0] {
		return false
	}
	return strings.Trim(s, fence[:1]) == ""
}

// TableLine reports whether s is a row of a pipe table.
func TableLine(s string) bool {
	s = strings.TrimSpace(s)
	return len(s) > 1 && s[0] == '|'
}

// TableSeparator reports whether s is a table's header separator ("|---|:--:|").
func TableSeparator(s string) bool { return tableSepRe.MatchString(strings.TrimSpace(s)) }
