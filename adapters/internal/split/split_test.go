package split

import (
	"slices"
	"strings"
	"testing"
)

var bare = Rules{
	Open: func(l string) (Fence, bool) {
		return Fence{Reopen: "```", Close: "```"}, strings.HasPrefix(l, "```")
	},
	Closes: func(_ Fence, l string) bool { return strings.HasPrefix(l, "```") },
}

func TestSplit(t *testing.T) {
	p := strings.Repeat("a", 10)
	for _, c := range []struct {
		name, text string
		limit      int
		want       []string
	}{
		{"short text as it is", "\n" + p + "\n\n\n", 20, []string{"\n" + p + "\n\n\n"}},
		{"blank lines kept in a chunk", p + "\n\n\n" + p + "\n\n" + p, 25, []string{p + "\n\n\n" + p, p}},
		{"code block whole", p + "\n```\nx\n```\n" + p, 20, []string{p + "\n```\nx\n```", p}},
		{"code block cut and reopened", "```\n1234\n5678\n```", 14, []string{"```\n1234\n```", "```\n5678\n```"}},
		{"text after a closing fence stays", "```\n1234\n5678\n```tail", 14, []string{"```\n1234\n```", "```\n5678\n```", "```\ntail\n```"}},
		{"long word cut, not in a backtick run", "ab``cd", 3, []string{"ab", "``c", "d"}},
	} {
		if got := Split(c.text, c.limit, bare); !slices.Equal(got, c.want) {
			t.Errorf("%s: Split(%q, %d) = %q, want %q", c.name, c.text, c.limit, got, c.want)
		}
	}
}
