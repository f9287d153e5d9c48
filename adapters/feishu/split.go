package feishu

import (
	"strings"

	"openbot/adapters/internal/split"
)

// MaxChunk is the most runes Deliver puts in one message. A card request body may be
// at most 30 KB and a text one 150 KB (fixtures feishu/API_NOTES.md "Outbound Open
// API"); 4,000 runes stay under 30 KB even for CJK text after JSON escaping and the
// card wrapper, and keep one message readable.
const MaxChunk = 4000

// Split cuts card Markdown into chunks of at most limit runes (split.Split;
// limit values below 32 are raised to 32). Card Markdown knows "~~~" fences and
// fences longer than three characters with a language tag, which a cut block
// reopens as written and closes with the same run of fence characters.
func Split(text string, limit int) []string {
	return split.Split(text, max(limit, 32), cardFences)
}

var cardFences = split.Rules{
	Open: func(l string) (split.Fence, bool) {
		f := fenceOpen(strings.TrimLeft(l, " "))
		return split.Fence{Reopen: l, Close: f}, f != ""
	},
	Closes: func(f split.Fence, l string) bool {
		t := strings.TrimLeft(l, " ")
		return strings.HasPrefix(t, f.Close) && strings.Trim(t, "`~") == ""
	},
}
