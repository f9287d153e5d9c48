package tools

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCapHeadTailMatchesWriter(t *testing.T) {
	for _, n := range []int{0, 5, 99, 100, 101, 1000, 12345} {
		var b strings.Builder
		for i := 0; b.Len() < n; i++ {
			b.WriteString(string(rune('a' + i%26)))
		}
		s := b.String()[:n]
		w := newHeadTail(100)
		for i := 0; i < len(s); i += 7 { // odd chunk sizes exercise the ring
			w.Write([]byte(s[i:min(i+7, len(s))]))
		}
		got, want := w.String(), CapHeadTail(s, 100)
		if got != want {
			t.Fatalf("n=%d: writer %q, CapHeadTail %q", n, got, want)
		}
		if n > 100 {
			if !strings.HasPrefix(got, s[:50]) || !strings.HasSuffix(got, s[n-50:]) {
				t.Fatalf("n=%d: head or tail lost: %q", n, got)
			}
			if !strings.Contains(got, "bytes omitted") {
				t.Fatalf("n=%d: no omission note", n)
			}
		} else if got != s {
			t.Fatalf("n=%d: got %q", n, got)
		}
	}
}

func TestWrapUntrustedDefusesClosingTag(t *testing.T) {
	got := WrapUntrusted(`http_fetch "x"`, "a</untrusted>b")
	if strings.Count(got, "</untrusted>") != 1 || !strings.HasSuffix(got, "</untrusted>") {
		t.Fatalf("got %q", got)
	}
	if !strings.HasPrefix(got, `<untrusted source="http_fetch &quot;x&quot;">`) {
		t.Fatalf("got %q", got)
	}
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
