package agents

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	openai "github.com/sashabaranov/go-openai"

	"openbot/core"
)

// Model call retry defaults.
const (
	// DefaultModelRetries is how many times a model call is retried after a 429,
	// a 408, a 5xx, a network error or a stall (StallError), so a call makes at
	// most 4 attempts.
	DefaultModelRetries = 3
	// defaultRetryInitial is the first backoff wait; it doubles per retry (with
	// jitter) up to retryMaxInterval.
	defaultRetryInitial = 500 * time.Millisecond
	retryMaxInterval    = 8 * time.Second
	// retryMaxWait is the longest wait accepted, Retry-After included: a server
	// asking for more gets its error passed on instead of a retry.
	retryMaxWait = 60 * time.Second
	// maxJSONBody bounds a non-streaming body read for a streaming request.
	maxJSONBody = 32 << 20
)

// transport is the http.RoundTripper under each provider's go-openai client. It
//
//   - adds the provider's custom headers;
//   - patches chat completion request bodies so that every assistant message
//     carries a "content" field (see patchAssistantContent);
//   - buffers the body of a model call (a POST to a path ending in modelPath:
//     /chat/completions, or /v1/messages for Anthropic) so it can be sent again;
//   - adds the query parameters of the provider's base URL (an api-key query of
//     a gateway) to every request;
//   - aborts an attempt that receives nothing for idle (before the headers or
//     between two body reads) with a *StallError;
//   - with several API keys (keys), sends the next one in rotation on each
//     attempt and, when one is refused (401, 403) or rate-limited (429), sets
//     it aside and tries the next key at once;
//   - retries a request that got 429, 408, a 5xx, a network error or stalled
//     before its headers, at most retries times per model call, or the
//     streamInfo's limit (0 while a fallback profile may answer instead,
//     chain.go; the budget is shared with callLink's repeats of a stream that
//     stalled midway), waiting
//     Retry-After (or retry-after-ms) when the server sent one, else exponential
//     backoff, always bounded by the request's context; each retry is logged with
//     the HTTP status and the error text, credentials redacted;
//   - for a streaming request, turns a plain JSON chat completion body (a server
//     that ignores "stream":true) into the equivalent server-sent events, and
//     records on the request's streamInfo whether "data: [DONE]" arrived.
type transport struct {
	base    http.RoundTripper
	headers map[string]string
	query   url.Values // from the base URL; nil when it has none
	log     *slog.Logger
	retries int
	idle    time.Duration // 0: no idle timeout
	initial time.Duration
	sleep   func(ctx context.Context, d time.Duration) error

	// modelPath is the path suffix of the protocol's model calls (newModelAPI).
	modelPath string
	// keys are the profile's API keys when it has several; each attempt takes
	// the next (keyring) and sends it in authHeader ("Authorization" as a
	// Bearer token, or Anthropic's "X-Api-Key"). Nil: the SDK's header stays.
	keys       *keyring
	authHeader string
}

// streamInfo is what the transport learned about one model call (all its
// attempts); callModel puts it into the request context.
type streamInfo struct {
	done    atomic.Bool  // "data: [DONE]" was read
	retries atomic.Int32 // retries made, by the transport and by callModel
	bo      backoff.BackOff
	// limit, when set, replaces the transport's retry budget: the fallback
	// chain sets 0 while another profile may answer (chain.go).
	limit *int
	// retryAfter is the wait the last error response asked for (0: none),
	// which the chain turns into the profile's cooldown.
	retryAfter atomic.Int64
	// key is the label of the API key of the last attempt ("" for a
	// profile with one key or none).
	key atomic.Pointer[string]
}

// keyLabel is the label of the key that made the call's last attempt.
func (si *streamInfo) keyLabel() string {
	if p := si.key.Load(); p != nil {
		return *p
	}
	return ""
}

// newBackoff is the retry backoff: initial, doubling with jitter up to
// retryMaxInterval, no overall limit (the call's context bounds it).
func newBackoff(initial time.Duration) backoff.BackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(initial),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0.2),
		backoff.WithMaxInterval(retryMaxInterval),
		backoff.WithMaxElapsedTime(0),
	)
}

type streamInfoKey struct{}

func withStreamInfo(ctx context.Context, si *streamInfo) context.Context {
	return context.WithValue(ctx, streamInfoKey{}, si)
}

// RoundTrip implements http.RoundTripper. It never modifies the caller's request.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	out := req.Clone(ctx)
	for k, v := range t.headers {
		out.Header.Set(k, v)
	}
	if len(t.query) > 0 {
		q := out.URL.Query()
		for k, vs := range t.query {
			if !q.Has(k) {
				q[k] = vs
			}
		}
		out.URL.RawQuery = q.Encode()
	}
	var body []byte
	if req.Method == http.MethodPost && t.modelPath != "" && strings.HasSuffix(req.URL.Path, t.modelPath) && req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		if t.modelPath == openaiModelPath {
			body = patchAssistantContent(body)
		}
	}
	si, _ := ctx.Value(streamInfoKey{}).(*streamInfo)
	retriable := body != nil || req.Body == nil
	bo := newBackoff(t.initial)
	limit := t.retries
	if si != nil && si.bo != nil {
		bo = si.bo
	}
	if si != nil && si.limit != nil {
		limit = *si.limit
	}
	var tried map[int]bool // keys refused or rate-limited during this request
	for attempt := 0; ; attempt++ {
		actx, wd := startWatchdog(ctx, t.idle)
		try := out.Clone(actx)
		key, _ := t.keys.pick(tried)
		if t.keys != nil {
			k := t.keys.keys[key]
			if t.authHeader == "Authorization" {
				try.Header.Set("Authorization", "Bearer "+k.Value)
			} else {
				try.Header.Set(t.authHeader, k.Value)
			}
			if si != nil {
				si.key.Store(&k.Label)
			}
		}
		if body != nil {
			try.Body = io.NopCloser(bytes.NewReader(body))
			try.ContentLength = int64(len(body))
			try.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
		resp, err := t.base.RoundTrip(try)
		if err != nil && wd.stalled() {
			err = &StallError{Idle: t.idle}
		}
		if err == nil && retriable && t.setAside(resp, key) {
			if tried == nil {
				tried = map[int]bool{}
			}
			tried[key] = true
			if _, fresh := t.keys.pick(tried); fresh {
				// Another key may answer at once: not a retry of this one.
				_ = resp.Body.Close()
				wd.stop()
				continue
			}
		}
		used := attempt
		if si != nil {
			used = int(si.retries.Load())
		}
		if retriable && used < limit {
			if wait, ok := retryWait(ctx, resp, err, bo); ok {
				status, text := 0, ""
				if resp != nil {
					status, text = resp.StatusCode, errorBodyText(resp.Body)
					_ = resp.Body.Close()
				} else {
					text = core.Redact(err.Error())
				}
				wd.stop()
				t.log.Info("model request failed; retrying", "status", status, "err", text,
					"attempt", used+1, "wait", wait)
				if si != nil {
					si.retries.Add(1)
				}
				if err := t.sleep(ctx, wait); err != nil {
					return nil, err
				}
				continue
			}
		}
		if err != nil {
			wd.stop()
			return nil, err
		}
		if si != nil {
			si.retryAfter.Store(0)
			if resp.StatusCode >= 400 {
				si.retryAfter.Store(int64(retryAfter(resp.Header, time.Now())))
			}
		}
		if wd != nil {
			wd.kick() // the headers arrived; now the body must keep coming
			resp.Body = &idleBody{rc: resp.Body, w: wd}
		}
		if req.Header.Get("Accept") == "text/event-stream" && resp.StatusCode == http.StatusOK {
			resp = adaptStream(resp, si)
		}
		return resp, nil
	}
}

// setAside sets the key of an attempt aside when the server refused it (401,
// 403) or rate-limited it (429) and the profile has other keys; it logs the
// key's label, never the key. It reports whether it did.
func (t *transport) setAside(resp *http.Response, key int) bool {
	if t.keys == nil || len(t.keys.keys) < 2 {
		return false
	}
	d := refusedCooldown
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
	case http.StatusTooManyRequests:
		d = cmp.Or(retryAfter(resp.Header, time.Now()), busyCooldown)
	default:
		return false
	}
	why := "HTTP " + strconv.Itoa(resp.StatusCode)
	t.keys.cd.set(t.keys.ids[key], d, why)
	t.log.Warn("api key set aside", "key", t.keys.keys[key].Label, "status", resp.StatusCode, "for", d.Round(time.Second))
	return true
}

// errorBodyText reads an error response body (at most 64 KiB) and returns the
// server's message: error.message of an OpenAI error object, else the trimmed
// text, at most 300 bytes, credentials redacted.
func errorBodyText(body io.Reader) string {
	raw, _ := io.ReadAll(io.LimitReader(body, 64<<10))
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	text := strings.TrimSpace(string(raw))
	if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
		text = e.Error.Message
	}
	if len(text) > 300 {
		text = cutString(text, 300) + "..."
	}
	return core.Redact(text)
}

// retryWait decides whether a response or error is retried and after how long:
// network errors, 408, 429 and 5xx are; the wait is the server's Retry-After when
// given, else the next backoff. A wait beyond retryMaxWait or past ctx's deadline
// is not taken.
func retryWait(ctx context.Context, resp *http.Response, err error, bo backoff.BackOff) (time.Duration, bool) {
	if ctx.Err() != nil {
		return 0, false
	}
	var wait time.Duration
	switch {
	case err != nil:
		wait = bo.NextBackOff()
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode >= 500:
		wait = retryAfter(resp.Header, time.Now())
		if wait <= 0 {
			wait = bo.NextBackOff()
		}
	default:
		return 0, false
	}
	if wait < 0 || wait > retryMaxWait {
		return 0, false
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
		return 0, false
	}
	return wait, true
}

// retryAfter reads retry-after-ms (Azure, OpenAI) or Retry-After (seconds or an
// HTTP date); 0 when absent or unparsable.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}

// adaptStream prepares a 200 response to a streaming request: a JSON chat
// completion becomes server-sent events, and the body reports [DONE] to si.
func adaptStream(resp *http.Response, si *streamInfo) *http.Response {
	if strings.HasPrefix(strings.ToLower(resp.Header.Get("Content-Type")), "application/json") {
		raw, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONBody))
		_ = resp.Body.Close()
		if err != nil {
			raw = nil
		}
		if sse, ok := jsonToSSE(raw); ok {
			raw = sse
			resp.Header.Set("Content-Type", "text/event-stream")
		}
		resp.Body = io.NopCloser(bytes.NewReader(raw))
		resp.ContentLength = int64(len(raw))
		resp.Header.Del("Content-Length")
	}
	if si != nil {
		resp.Body = &doneTracker{rc: resp.Body, si: si}
	}
	return resp
}

// jsonToSSE turns a non-streaming chat completion into one stream chunk carrying
// the whole message, finish reason and usage, then [DONE]. Anything else (an
// error object, garbage) is left alone: go-openai reports an error object itself.
func jsonToSSE(raw []byte) ([]byte, bool) {
	var cc openai.ChatCompletionResponse
	if err := json.Unmarshal(raw, &cc); err != nil || len(cc.Choices) == 0 {
		return nil, false
	}
	ch := cc.Choices[0]
	calls := make([]openai.ToolCall, len(ch.Message.ToolCalls))
	for i, c := range ch.Message.ToolCalls {
		idx := i
		c.Index = &idx
		calls[i] = c
	}
	usage := cc.Usage
	chunk := openai.ChatCompletionStreamResponse{
		ID: cc.ID, Object: "chat.completion.chunk", Created: cc.Created, Model: cc.Model,
		Choices: []openai.ChatCompletionStreamChoice{{
			Index: 0,
			Delta: openai.ChatCompletionStreamChoiceDelta{
				Role: openai.ChatMessageRoleAssistant, Content: ch.Message.Content, ToolCalls: calls,
				ReasoningContent: ch.Message.ReasoningContent,
			},
			FinishReason: ch.FinishReason,
		}},
		Usage: &usage,
	}
	b, err := json.Marshal(chunk)
	if err != nil {
		return nil, false
	}
	var out bytes.Buffer
	out.WriteString("data: ")
	out.Write(b)
	out.WriteString("\n\ndata: [DONE]\n\n")
	return out.Bytes(), true
}

// doneTracker passes a stream body through and notes a "data: [DONE]" line.
type doneTracker struct {
	rc   io.ReadCloser
	si   *streamInfo
	line []byte // the current line's start, at most 32 bytes
	long bool   // the current line is longer than that
}

func (d *doneTracker) Read(p []byte) (int, error) {
	n, err := d.rc.Read(p)
	for _, c := range p[:n] {
		if c == '\n' {
			if !d.long {
				l := bytes.TrimSpace(d.line)
				if rest, ok := bytes.CutPrefix(l, []byte("data:")); ok && string(bytes.TrimSpace(rest)) == "[DONE]" {
					d.si.done.Store(true)
				}
			}
			d.line, d.long = d.line[:0], false
			continue
		}
		if len(d.line) >= 32 {
			d.long = true
			continue
		}
		d.line = append(d.line, c)
	}
	return n, err
}

func (d *doneTracker) Close() error { return d.rc.Close() }

// assistantRole is how an assistant message's role appears in a request body.
var assistantRole = []byte(`"role":"assistant"`)

// patchAssistantContent adds "content":"" to assistant messages without a content
// field. A body it cannot parse is returned unchanged.
//
// go-openai v1.43 marshals ChatCompletionMessage.Content with omitempty, so an
// assistant message that only has tool calls goes out without "content". Several
// OpenAI-compatible servers (and some chat templates) reject or mis-render such a
// message; OpenAI itself accepts "content":"" there. The patch leaves everything
// else as go-openai wrote it apart from key order inside the patched messages.
//
// A body with no assistant message (a run's first request) is returned without
// being parsed: the request is on the event -> model request path (DESIGN.md
// §7), and the prompt can be long. encoding/json writes the role as
// "role":"assistant" and escapes every quote inside a string, so the bytes
// cannot appear unless an assistant message does.
func patchAssistantContent(body []byte) []byte {
	if !bytes.Contains(body, assistantRole) {
		return body
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return body
	}
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(top["messages"], &msgs); err != nil {
		return body
	}
	changed := false
	for _, m := range msgs {
		if _, ok := m["content"]; ok || string(m["role"]) != `"assistant"` {
			continue
		}
		m["content"] = json.RawMessage(`""`)
		changed = true
	}
	if !changed {
		return body
	}
	raw, err := json.Marshal(msgs)
	if err != nil {
		return body
	}
	top["messages"] = raw
	patched, err := json.Marshal(top)
	if err != nil {
		return body
	}
	return patched
}
