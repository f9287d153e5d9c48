package tools

import (
	"fmt"
	"unicode/utf8"
)

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
