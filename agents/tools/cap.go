package tools

import (
	"fmt"
	"unicode/utf8"
)

// Cap returns s unchanged when it is at most limit bytes; otherwise it keeps the
// first limit bytes (cut on a UTF-8 boundary) and appends a note saying how much
// was left out, so the model knows the result is incomplete. A limit <= 0 means
// DefaultOutputCap. It is the result cap shared by the built-ins and the MCP
// tools (DESIGN.md §6, tool results are capped).
func Cap(s string, limit int) string {
	if limit <= 0 {
		limit = DefaultOutputCap
	}
	if len(s) <= limit {
		return s
	}
	head := cutUTF8(s[:limit])
	return fmt.Sprintf("%s\n[... result truncated: %d of %d bytes shown ...]", head, len(head), len(s))
}

// CapHeadTail returns s unchanged when it is at most limit bytes; otherwise it
// keeps the first and last limit/2 bytes with "[... N bytes omitted ...]" in the
// middle. A limit <= 0 means DefaultOutputCap.
func CapHeadTail(s string, limit int) string {
	if limit <= 0 {
		limit = DefaultOutputCap
	}
	if len(s) <= limit {
		return s
	}
	half := limit / 2
	head := cutUTF8(s[:half])
	tail := s[len(s)-half:]
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	return fmt.Sprintf("%s\n[... %d bytes omitted ...]\n%s", head, len(s)-len(head)-len(tail), tail)
}

// cutUTF8 drops a trailing partial UTF-8 sequence.
func cutUTF8(s string) string {
	for i := 0; i < utf8.UTFMax && len(s) > 0; i++ {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size > 1 {
			return s
		}
		s = s[:len(s)-1]
	}
	return s
}

// headTail is an io.Writer keeping the first and last max/2 bytes written and
// counting the rest, so a chatty command cannot grow memory without bound.
type headTail struct {
	max     int
	head    []byte
	tail    []byte // ring of the last max/2 bytes
	tailPos int
	total   int64
}

func newHeadTail(max int) *headTail {
	if max < 2 {
		max = 2
	}
	return &headTail{max: max}
}

func (w *headTail) Write(p []byte) (int, error) {
	n := len(p)
	w.total += int64(n)
	half := w.max / 2
	if room := w.max - half - len(w.head); room > 0 {
		k := min(room, len(p))
		w.head = append(w.head, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 {
		if len(w.tail) < half {
			k := min(half-len(w.tail), len(p))
			w.tail = append(w.tail, p[:k]...)
			p = p[k:]
			continue
		}
		k := copy(w.tail[w.tailPos:], p)
		w.tailPos = (w.tailPos + k) % half
		p = p[k:]
	}
	return n, nil
}

// String renders head, an omission note if bytes were dropped, and tail.
func (w *headTail) String() string {
	tail := append(append([]byte(nil), w.tail[w.tailPos:]...), w.tail[:w.tailPos]...)
	kept := int64(len(w.head) + len(tail))
	if kept >= w.total {
		return string(w.head) + string(tail)
	}
	head := cutUTF8(string(w.head))
	t := string(tail)
	for len(t) > 0 && !utf8.RuneStart(t[0]) {
		t = t[1:]
	}
	return fmt.Sprintf("%s\n[... %d bytes omitted ...]\n%s", head, w.total-int64(len(head)+len(t)), t)
}
