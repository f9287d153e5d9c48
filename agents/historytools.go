package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode"

	"openbot/core"
)

// Names of the history tools every bot has (seed §6).
const (
	ReadHistoryName    = "read_history"
	RecallMessagesName = "recall_messages"
)

// History tool limits.
const (
	readHistoryDefault = 20
	readHistoryMax     = 100
	recallDefault      = 10
	recallMax          = 50
	recallScanLimit    = 5000 // messages read per recall_messages call
	recallSnippet      = 600  // characters of a message shown per hit
)

// HistoryTools returns read_history and recall_messages, which read the run's
// thread through ToolCall.Env. They are always offered to the model, whatever the
// bot's tool selection (seed §6: a delegate fetches the rest of the thread with them).
// recall_messages ranks lexically (tf-idf); see MessageIndex.HistoryTools.
func HistoryTools() []Tool { return historyTools(nil) }

// HistoryTools returns the history tools with recall_messages ranking the
// thread's embedded messages by cosine similarity (seed §9) and the messages
// not embedded yet lexically; lexically alone when the query cannot be
// embedded. A nil index ranks lexically.
func (ix *MessageIndex) HistoryTools() []Tool { return historyTools(ix) }

func historyTools(ix *MessageIndex) []Tool {
	recall := func(ctx context.Context, call ToolCall) (string, error) { return recallMessages(ctx, ix, call) }
	return []Tool{
		&FuncTool{
			ToolName: ReadHistoryName,
			Desc: "Read this thread's messages in chronological order, a page at a time. " +
				"Give before_id to page backwards from a message (the messages just before it), or after_id to page forwards; " +
				"with neither you get the newest messages. Each line is \"[#id name]: text\".",
			Params: json.RawMessage(`{"type":"object","properties":{` +
				`"before_id":{"type":"integer","description":"return messages with ids below this one"},` +
				`"after_id":{"type":"integer","description":"return messages with ids above this one"},` +
				`"limit":{"type":"integer","description":"messages per page, 1 to 100, default 20"}},` +
				`"additionalProperties":false}`),
			Fn:         readHistory,
			ReachText:  "reads only this thread's messages; reaches no file, network or person",
			Repeatable: true, // a read
		},
		&FuncTool{
			ToolName: RecallMessagesName,
			Desc: "Search this thread's messages by keywords and return the best matches, most relevant first, " +
				"as \"[#id name]: text\" lines. Use it to find earlier decisions, paths or numbers that are not in your view.",
			Params: json.RawMessage(`{"type":"object","properties":{` +
				`"query":{"type":"string","description":"keywords to look for"},` +
				`"limit":{"type":"integer","description":"maximum results, 1 to 50, default 10"}},` +
				`"required":["query"],"additionalProperties":false}`),
			Fn:         recall,
			ReachText:  "searches only this thread's messages; reaches no file, network or person",
			Repeatable: true, // a read
		},
	}
}

func formatLine(m core.Message) string {
	return fmt.Sprintf("[#%d %s]: %s", m.ID, senderName(m), m.Text)
}

func readHistory(ctx context.Context, call ToolCall) (string, error) {
	var args struct {
		BeforeID uint64 `json:"before_id"`
		AfterID  uint64 `json:"after_id"`
		Limit    int    `json:"limit"`
	}
	if err := json.Unmarshal(call.Args, &args); err != nil {
		return "", fmt.Errorf("invalid arguments: %v", err)
	}
	if call.Env == nil {
		return "", errors.New("no thread to read")
	}
	if args.BeforeID != 0 && args.AfterID != 0 {
		return "", errors.New("give before_id or after_id, not both")
	}
	limit := args.Limit
	if limit <= 0 {
		limit = readHistoryDefault
	}
	limit = min(limit, readHistoryMax)
	var msgs []core.Message
	var err error
	if args.AfterID != 0 {
		msgs, err = call.Env.Messages(ctx, core.MessageID(args.AfterID), limit)
	} else {
		msgs, err = call.Env.MessagesBefore(ctx, core.MessageID(args.BeforeID), limit)
		slices.Reverse(msgs)
	}
	if err != nil {
		return "", fmt.Errorf("read messages: %w", err)
	}
	if len(msgs) == 0 {
		return "no messages in that range", nil
	}
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(formatLine(m))
		b.WriteString("\n")
	}
	if len(msgs) == limit {
		if args.AfterID != 0 {
			fmt.Fprintf(&b, "(more may follow: after_id=%d)\n", msgs[len(msgs)-1].ID)
		} else {
			fmt.Fprintf(&b, "(older messages may exist: before_id=%d)\n", msgs[0].ID)
		}
	}
	return b.String(), nil
}

// terms splits text into lowercase words of two or more letters or digits.
func terms(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

func recallMessages(ctx context.Context, ix *MessageIndex, call ToolCall) (string, error) {
	var args struct {
		Query string `json:"query"`
		Limit int    `json:"limit"`
	}
	if err := json.Unmarshal(call.Args, &args); err != nil {
		return "", fmt.Errorf("invalid arguments: %v", err)
	}
	if call.Env == nil {
		return "", errors.New("no thread to search")
	}
	var query []string
	for _, t := range terms(args.Query) {
		if len([]rune(t)) >= 2 && !slices.Contains(query, t) {
			query = append(query, t)
		}
	}
	if len(query) == 0 {
		return "", errors.New("query has no searchable words")
	}
	limit := args.Limit
	if limit <= 0 {
		limit = recallDefault
	}
	limit = min(limit, recallMax)

	var all []core.Message
	after := core.MessageID(0)
	for len(all) < recallScanLimit {
		page, err := call.Env.Messages(ctx, after, 200)
		if err != nil {
			return "", fmt.Errorf("read messages: %w", err)
		}
		for _, m := range page {
			if m.Kind != core.KindSummary { // a bot's summary is not a message of the thread
				all = append(all, m)
			}
		}
		if len(page) < 200 {
			break
		}
		after = page[len(page)-1].ID
	}
	var hits []core.Message
	if ix != nil && call.Thread != 0 {
		var err error
		if hits, err = ix.rankSemantic(ctx, call.Thread, call.Bot.Handle, all, args.Query, query); err != nil {
			ix.log.Warn("recall_messages: semantic ranking failed; ranking lexically", "thread", call.Thread, "err", err)
			hits = rank(all, query)
		}
	} else {
		hits = rank(all, query)
	}
	if len(hits) == 0 {
		return fmt.Sprintf("no messages match %q", args.Query), nil
	}
	hits = hits[:min(limit, len(hits))]
	var b strings.Builder
	for _, m := range hits {
		if len(m.Text) > recallSnippet {
			m.Text = cutString(m.Text, recallSnippet) + " [...]"
		}
		b.WriteString(formatLine(m))
		b.WriteString("\n")
	}
	return b.String(), nil
}

// rank scores messages by term frequency times inverse document frequency of the
// query terms (tf-idf); messages matching no term are dropped. Ties go to the
// newer message.
func rank(msgs []core.Message, query []string) []core.Message {
	type doc struct {
		m  core.Message
		tf map[string]int
		n  int
	}
	docs := make([]doc, len(msgs))
	df := map[string]int{}
	for i, m := range msgs {
		words := terms(m.Text + " " + m.SenderName)
		tf := map[string]int{}
		for _, w := range words {
			for _, q := range query {
				if w == q || (len(q) >= 4 && strings.HasPrefix(w, q)) {
					tf[q]++
				}
			}
		}
		for q := range tf {
			df[q]++
		}
		docs[i] = doc{m: m, tf: tf, n: len(words)}
	}
	type scored struct {
		m     core.Message
		score float64
	}
	var out []scored
	for _, d := range docs {
		score := 0.0
		for q, n := range d.tf {
			idf := math.Log(1 + float64(len(docs))/float64(df[q]))
			// Dampened tf, normalised by length so long messages do not win by size.
			score += (1 + math.Log(float64(n))) * idf / math.Sqrt(float64(max(d.n, 1)))
		}
		// Matching more distinct terms matters more than repeating one.
		score *= float64(len(d.tf))
		if score > 0 {
			out = append(out, scored{d.m, score})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].score != out[j].score {
			return out[i].score > out[j].score
		}
		return out[i].m.ID > out[j].m.ID
	})
	res := make([]core.Message, len(out))
	for i, s := range out {
		res[i] = s.m
	}
	return res
}
