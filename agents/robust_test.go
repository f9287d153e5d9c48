package agents

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"openbot/agents/openaitest"
)

// waits records the retry waits instead of sleeping.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.d = append(w.d, d)
	w.mu.Unlock()
	return ctx.Err()
}

func (w *waits) got() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.d)
}

// fastRetry makes retries wait for nothing.
func fastRetry(o *Options) {
	o.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
}

func TestBrokenAnswersAreErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply openaitest.Reply
		want  string
	}{
		{"empty answer", openaitest.Reply{}, "the model returned an empty answer"},
		{"blank answer", openaitest.Text(" \n "), "the model returned an empty answer"},
		{"no [DONE]", openaitest.Reply{Text: "half an ans", NoDone: true}, "the stream ended early"},
		{"no finish_reason", openaitest.Reply{Text: "half an ans", NoFinish: true, NoDone: true}, "the stream ended early"},
		{"length", openaitest.Reply{Text: "a long answer that st", Finish: "length"}, "the model's answer was cut off (finish_reason=length)"},
		{"length with a call", openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: ReadHistoryName, Arguments: `{"lim`}}, Finish: "length"}, "finish_reason=length"},
		{"content filter", openaitest.Reply{Text: "x", Finish: "content_filter"}, "content_filter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, res, err := executeReply(t, tc.reply)
			var me *ModelError
			if !errors.As(err, &me) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a ModelError saying %q", err, tc.want)
			}
			if res.Reply != "" || res.Usage.ModelCalls != 1 || len(srv.Requests()) != 1 {
				t.Errorf("res = %+v, requests = %d", res, len(srv.Requests()))
			}
		})
	}
}

func TestJSONBodyForStreamingRequest(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(
		openaitest.Reply{JSON: true, ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: ReadHistoryName, Arguments: `{"limit":1}`}}},
		openaitest.Reply{JSON: true, Text: "plain JSON works", Usage: openaitest.Usage{PromptTokens: 11, CompletionTokens: 3}},
	)
	_, res, err := hiFromAlice(t, newAgent(t, srv, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if res.Reply != "plain JSON works" || res.Usage.ModelCalls != 2 || res.Usage.CompletionTokens < 3 {
		t.Errorf("res = %+v", res)
	}
	reqs := srv.Requests()
	if !reqs[0].Body.Stream {
		t.Error("the request was not a streaming one")
	}
	if last := lastMessages(reqs[1], 1)[0]; last.ToolCallID != "c1" || !strings.Contains(last.Content, "hi") {
		t.Errorf("tool result = %+v", last)
	}
}

func TestRetry429HonoursRetryAfter(t *testing.T) {
	srv := openaitest.New(t)
	limited := openaitest.Error(http.StatusTooManyRequests, "rate limited")
	limited.Header = map[string]string{"Retry-After": "2"}
	srv.Enqueue(limited, openaitest.Text("after the wait"))
	w := &waits{}
	env, res, err := hiFromAlice(t, newAgent(t, srv, nil, func(o *Options) { o.sleep = w.sleep }))
	if err != nil {
		t.Fatal(err)
	}
	if res.Reply != "after the wait" || res.Usage.ModelCalls != 1 {
		t.Errorf("res = %+v", res)
	}
	if got := w.got(); !slices.Equal(got, []time.Duration{2 * time.Second}) {
		t.Errorf("waits = %v, want the server's 2s", got)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("requests = %d", n)
	}
	if ev := env.Events[0].Payload; ev["retries"] != float64(1) {
		t.Errorf("model_call event = %v, want retries 1", ev)
	}
}

func TestRetry5xxBacksOffThenFails(t *testing.T) {
	srv := openaitest.New(t)
	for range 1 + DefaultModelRetries {
		srv.Enqueue(openaitest.Error(http.StatusServiceUnavailable, "overloaded"))
	}
	srv.Enqueue(openaitest.Text("too late"))
	w := &waits{}
	_, _, err := hiFromAlice(t, newAgent(t, srv, nil, func(o *Options) { o.sleep = w.sleep }))
	var me *ModelError
	if !errors.As(err, &me) || me.Status != http.StatusServiceUnavailable {
		t.Fatalf("err = %v, want the 503", err)
	}
	if n := len(srv.Requests()); n != 1+DefaultModelRetries {
		t.Errorf("requests = %d, want %d", n, 1+DefaultModelRetries)
	}
	got := w.got()
	if len(got) != DefaultModelRetries {
		t.Fatalf("waits = %v", got)
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Errorf("waits %v do not grow", got)
		}
	}
}

func TestNoRetryForClientErrors(t *testing.T) {
	for _, tc := range []struct {
		reply openaitest.Reply
		want  int
	}{
		{openaitest.Error(http.StatusBadRequest, "bad request"), 400},
		{openaitest.Error(http.StatusUnauthorized, "bad key"), 401},
		// A Retry-After beyond what we wait is passed on, not waited for.
		{openaitest.Reply{Status: 429, ErrMessage: "come back tomorrow", Header: map[string]string{"Retry-After": "86400"}}, 429},
	} {
		srv := openaitest.New(t)
		srv.Enqueue(tc.reply, openaitest.Text("should not be asked"))
		w := &waits{}
		_, _, err := hiFromAlice(t, newAgent(t, srv, nil, func(o *Options) { o.sleep = w.sleep }))
		var me *ModelError
		if !errors.As(err, &me) || me.Status != tc.want {
			t.Errorf("%d: err = %v", tc.want, err)
		}
		if n := len(srv.Requests()); n != 1 || len(w.got()) != 0 {
			t.Errorf("%d: requests = %d, waits = %v; want no retry", tc.want, n, w.got())
		}
	}
}

func TestRetryAfterParsing(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		h    map[string]string
		want time.Duration
	}{
		{map[string]string{"Retry-After": "3"}, 3 * time.Second},
		{map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond},
		{map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond},
		{map[string]string{"Retry-After": now.Add(4 * time.Second).Format(http.TimeFormat)}, 4 * time.Second},
		{map[string]string{"Retry-After": "soon"}, 0},
		{nil, 0},
	} {
		h := http.Header{}
		for k, v := range tc.h {
			h.Set(k, v)
		}
		if got := retryAfter(h, now); got != tc.want {
			t.Errorf("retryAfter(%v) = %v, want %v", tc.h, got, tc.want)
		}
	}
}

// TestRetryNetworkError: the first connection is dropped without an answer; the
// retry reaches the model.
func TestRetryNetworkError(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Text("second try"))
	target, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	var dropped atomic.Int32
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dropped.Add(1) == 1 {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	w := &waits{}
	a := newAgent(t, srv, nil, func(o *Options) {
		o.sleep = w.sleep
		o.Providers["default"] = Provider{BaseURL: front.URL + "/v1", Model: "fake-model", ContextWindow: 32000} // no model-list read first
	})
	_, res, err := hiFromAlice(t, a)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reply != "second try" || len(w.got()) != 1 || dropped.Load() != 2 {
		t.Errorf("reply %q, waits %v, connections %d", res.Reply, w.got(), dropped.Load())
	}
}
