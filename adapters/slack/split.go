package slack

import (
	"strings"

	"openbot/adapters/internal/split"
)

// MaxChunk is the most characters (runes) Deliver puts in one chat.postMessage text.
// Slack truncates text above 40,000 characters and recommends staying under 4,000
// for readability (fixtures API_NOTES.md "Limits"); 3,900 leaves room for the
// fences Split adds when it has to cut a code block.
const MaxChunk = 3900

// Split cuts mrkdwn text into chunks of at most limit runes (split.Split; limit
// values below 16 are raised to 16). mrkdwn has only bare ``` fences: text after
// the opening ``` is the block's first line, and "```code```" on one line is a
// whole block.
func Split(text string, limit int) []string {
	return split.Split(text, max(limit, 16), mrkdwnFences)
}

var mrkdwnFences = split.Rules{
	Open: func(l string) (split.Fence, bool) {
		if !strings.HasPrefix(strings.TrimLeft(l, " \t"), "```") {
			return split.Fence{}, false
		}
		t := strings.TrimSpace(l)
		whole := len(t) > 6 && strings.HasSuffix(t, "```")
		if whole {
			t = strings.TrimSuffix(t, "```")
		}
		return split.Fence{Reopen: "```", Close: "```", Body: strings.TrimPrefix(t, "```"), Whole: whole}, true
	},
	Closes: func(_ split.Fence, l string) bool { return strings.HasPrefix(strings.TrimLeft(l, " \t"), "```") },
}
