package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"openbot/agents/openaitest"
	"openbot/core"
)

// threadFigures are what BenchmarkLongThread measures over one long thread.
type threadFigures struct {
	calls, failed    int
	compactions      int // compaction calls (their input counts in total and uncached)
	total, uncached  int // input tokens (request bytes/4) over the thread
	maxCall, lastAvg int // input tokens of the largest call; mean of the last 20 calls
	// sameRun: per call after the first of a run, the share of its prompt bytes
	// that lead the previous call's prompt (worst and mean). betweenRuns: the
	// same for each run's first call against the previous run's first call.
	sameRunMin, sameRunMean float64
	// sameRunReuse is the mean share of the previous call's prompt that
	// leads the next call of the same run (1 when a call only appends).
	sameRunReuse                  float64
	betweenRunMin, betweenRunMean float64
	// betweenRun70 is the share of runs whose first call shares at least 70%
	// of its prompt with the previous run's first call.
	betweenRun70 float64
	perCall      []int // input tokens of every call, in order
}

// longThread is the benchmark's thread: turns runs, each a person's message
// and an ~800-character reply; every 5th run first reads a 20 KB file through
// a tool. window is the fake model's context window in tokens (a request over
// it fails with a context-length error); mutate adjusts the agent's options.
func longThread(tb testing.TB, turns, window int, bot core.BotProfile, mutate func(*Options)) threadFigures {
	tb.Helper()
	srv := openaitest.New(tb)
	file := strings.Repeat("line of the file with some words in it 0123456789\n", 400) // 20,400 bytes
	srv.Handle(func(req openaitest.Request) openaitest.Reply {
		if len(req.Raw)/4 > window {
			return openaitest.ContextLengthError()
		}
		msgs := req.Body.Messages
		last := msgs[len(msgs)-1]
		if strings.Contains(msgs[0].Content, compactionMarker) {
			return openaitest.Text("Summary: the thread is a long design discussion; ids M-1 to M-99 were settled. " + strings.Repeat("detail ", 60))
		}
		if last.Role == openai.ChatMessageRoleUser && strings.Contains(last.Content, "read the file") {
			return openaitest.Calls(openaitest.Call("read_file", `{"path":"/work/notes.txt"}`))
		}
		return openaitest.Text(strings.Repeat("A reply of about eight hundred characters. ", 19))
	})
	reg := NewRegistry()
	if err := reg.Add(&FuncTool{ToolName: "read_file", Desc: "Reads a file.", Repeatable: true,
		Fn: func(context.Context, ToolCall) (string, error) { return file, nil }}); err != nil {
		tb.Fatal(err)
	}
	bot.Tools = []string{"read_file"}
	opts := Options{
		Providers: map[string]Provider{"default": {BaseURL: srv.URL(), APIKey: testKey, Model: "fake-model"}},
		Registry:  reg,
		sleep:     noWait,
	}
	if mutate != nil {
		mutate(&opts)
	}
	a, err := New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	env := &fakeEnv{}
	var f threadFigures
	var runFirst [][]byte // first call's prompt of each run
	for turn := range turns {
		text := fmt.Sprintf("Turn %d: here is the next point of the design, with some context about why it matters for the team. ", turn)
		if turn%5 == 4 {
			text += "Please read the file /work/notes.txt first."
		}
		trig := env.add(alice, "Alice", text)
		before := len(srv.Requests())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		job := newJob(env, bot, false, trig)
		job.Env = sumEnv{env, bot.ID()}
		res, err := a.Execute(ctx, job)
		cancel()
		if err != nil {
			f.failed++
		} else {
			env.add(bot.ID(), bot.Name, res.Reply)
		}
		reqs := srv.Requests()[before:]
		var prev []byte
		for i, r := range reqs {
			if strings.Contains(r.Body.Messages[0].Content, compactionMarker) {
				f.compactions++
				f.total += len(r.Raw) / 4
				f.uncached += len(r.Raw) / 4
				continue
			}
			p := promptBytes(r)
			tok := len(r.Raw) / 4
			f.calls++
			f.total += tok
			f.perCall = append(f.perCall, tok)
			f.maxCall = max(f.maxCall, tok)
			if prev == nil {
				if n := len(runFirst); n > 0 {
					f.uncached += (len(p) - commonPrefix(runFirst[n-1], p)) / 4
				} else {
					f.uncached += len(p) / 4
				}
				runFirst = append(runFirst, p)
			} else {
				f.uncached += (len(p) - commonPrefix(prev, p)) / 4
			}
			if i > 0 && prev != nil {
				share := float64(commonPrefix(prev, p)) / float64(len(p))
				f.sameRunMean += share
				f.sameRunReuse += float64(commonPrefix(prev, p)) / float64(len(prev))
				if f.sameRunMin == 0 || share < f.sameRunMin {
					f.sameRunMin = share
				}
			}
			prev = p
		}
	}
	// Mean over the calls that had a predecessor in their run.
	same := f.calls - len(runFirst)
	if same > 0 {
		f.sameRunMean /= float64(same)
		f.sameRunReuse /= float64(same)
	}
	for i := 1; i < len(runFirst); i++ {
		share := float64(commonPrefix(runFirst[i-1], runFirst[i])) / float64(len(runFirst[i]))
		f.betweenRunMean += share
		if share >= 0.7 {
			f.betweenRun70++
		}
		if i == 1 || share < f.betweenRunMin {
			f.betweenRunMin = share
		}
	}
	if len(runFirst) > 1 {
		f.betweenRunMean /= float64(len(runFirst) - 1)
		f.betweenRun70 /= float64(len(runFirst) - 1)
	}
	last := f.perCall[max(0, len(f.perCall)-20):]
	for _, n := range last {
		f.lastAvg += n
	}
	f.lastAvg /= max(1, len(last))
	return f
}

// promptBytes is a request's prompt in the order a provider caches it: the
// tool schemas, then each message.
func promptBytes(r openaitest.Request) []byte {
	var b bytes.Buffer
	tools, _ := json.Marshal(r.JSON["tools"])
	b.Write(tools)
	for _, m := range r.Messages() {
		raw, _ := json.Marshal(m)
		b.Write(raw)
	}
	return b.Bytes()
}

func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// BenchmarkLongThread runs a 200-turn thread (800-character replies, a 20 KB
// tool result every 5th turn) against the fake model with a 32k-token window
// and reports input tokens, not time: per call (largest, mean of the last 20),
// over the thread (total, and uncached by a provider's prefix cache), the
// share of each call's prompt that leads the previous call's (same run, and
// between runs), and calls that failed.
func BenchmarkLongThread(b *testing.B) {
	for _, share := range []float64{0.5, 0.15} {
		b.Run(fmt.Sprintf("history_share=%v", share), func(b *testing.B) {
			for b.Loop() {
				f := longThread(b, 200, 32000, chief, func(o *Options) {
					p := o.Providers["default"]
					p.ContextWindow, p.HistoryShare = 32000, share
					o.Providers["default"] = p
				})
				b.ReportMetric(float64(f.calls), "calls")
				b.ReportMetric(float64(f.failed), "failed")
				b.ReportMetric(float64(f.compactions), "compactions")
				b.ReportMetric(float64(f.total), "input-tokens")
				b.ReportMetric(float64(f.uncached), "uncached-tokens")
				b.ReportMetric(float64(f.perCall[0]), "first-tokens/call")
				b.ReportMetric(float64(f.maxCall), "max-tokens/call")
				b.ReportMetric(float64(f.lastAvg), "last20-tokens/call")
				b.ReportMetric(100*f.sameRunMin, "same-run-prefix-min-%")
				b.ReportMetric(100*f.sameRunMean, "same-run-prefix-mean-%")
				b.ReportMetric(100*f.sameRunReuse, "same-run-reuse-mean-%")
				b.ReportMetric(100*f.betweenRunMin, "between-runs-prefix-min-%")
				b.ReportMetric(100*f.betweenRunMean, "between-runs-prefix-mean-%")
				b.ReportMetric(100*f.betweenRun70, "runs-sharing-70%-%")
			}
		})
	}
}
