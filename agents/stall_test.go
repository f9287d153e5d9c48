package agents

import (
	"errors"
	"strings"
	"testing"
	"time"

	"openbot/agents/openaitest"
)

// stallIdle is the short idle timeout of these tests; they assert on outcomes,
// never on elapsed time.
const stallIdle = 200 * time.Millisecond

func stallAgent(t *testing.T, srv *openaitest.Server, w *waits) *Agent {
	return newAgent(t, srv, nil, func(o *Options) {
		o.sleep = w.sleep
		p := o.Providers["default"]
		p.IdleTimeout = stallIdle
		o.Providers["default"] = p
	})
}

// TestStallRetried: a server that never sends its headers, or a stream that
// stops after its first chunk, is abandoned after the idle timeout and the
// whole call is made again; the retry's answer is the reply (the half answer
// is dropped).
func TestStallRetried(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stall func(block chan struct{}) openaitest.Reply
	}{
		{"before headers", func(block chan struct{}) openaitest.Reply { return openaitest.Reply{Text: "never", Wait: block} }},
		{"mid stream", func(block chan struct{}) openaitest.Reply {
			return openaitest.Reply{Text: "half an answer that never ends", StallMidStream: block}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := openaitest.New(t)
			block := make(chan struct{})
			defer close(block)
			srv.Enqueue(tc.stall(block), openaitest.Text("second try"))
			w := &waits{}
			env, res, err := hiFromAlice(t, stallAgent(t, srv, w))
			if err != nil {
				t.Fatal(err)
			}
			if res.Reply != "second try" || len(srv.Requests()) != 2 || len(w.got()) != 1 {
				t.Errorf("reply %q, requests %d, waits %v", res.Reply, len(srv.Requests()), w.got())
			}
			if ev := env.Events[0].Payload; ev["retries"] != float64(1) {
				t.Errorf("model_call event = %v, want retries 1", ev)
			}
		})
	}
}

// TestStallRetriesRunOut: a model that stalls on every attempt (before the
// headers, midway, or mixed) fails the call after the retry budget with a
// ModelError whose notice says in words that the model stopped responding.
func TestStallRetriesRunOut(t *testing.T) {
	for _, tc := range []struct {
		name string
		mid  func(attempt int) bool
	}{
		{"before headers", func(int) bool { return false }},
		{"mid-stream", func(int) bool { return true }},
		{"mixed", func(i int) bool { return i%2 == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := openaitest.New(t)
			block := make(chan struct{})
			defer close(block)
			for i := range 1 + DefaultModelRetries {
				if tc.mid(i) {
					srv.Enqueue(openaitest.Reply{Text: "half an answer", StallMidStream: block})
				} else {
					srv.Enqueue(openaitest.Reply{Text: "x", Wait: block})
				}
			}
			srv.Enqueue(openaitest.Text("too late"))
			w := &waits{}
			_, _, err := hiFromAlice(t, stallAgent(t, srv, w))
			var me *ModelError
			if !errors.As(err, &me) || !me.Stalled {
				t.Fatalf("err = %v, want a stalled ModelError", err)
			}
			if n := len(srv.Requests()); n != 1+DefaultModelRetries {
				t.Errorf("requests = %d, want %d", n, 1+DefaultModelRetries)
			}
			if len(w.got()) != DefaultModelRetries {
				t.Errorf("waits = %v, want %d", w.got(), DefaultModelRetries)
			}
			if n := me.Notice(); !strings.Contains(n, "the model stopped responding") || !strings.Contains(n, "200ms") {
				t.Errorf("notice = %q, want it to say the model stopped responding", n)
			}
		})
	}
}

// TestProviderRequestTimeout: a provider's own request timeout wins over the
// agent-wide one.
func TestProviderRequestTimeout(t *testing.T) {
	srv := openaitest.New(t)
	block := make(chan struct{})
	defer close(block)
	srv.Enqueue(openaitest.Reply{Text: "late", Wait: block})
	a := newAgent(t, srv, nil, func(o *Options) {
		p := o.Providers["default"]
		p.RequestTimeout = 150 * time.Millisecond
		o.Providers["default"] = p
	})
	_, _, err := hiFromAlice(t, a)
	var me *ModelError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), "no complete answer within 150ms") ||
		!strings.Contains(me.Notice(), "did not finish its answer within 150ms") {
		t.Fatalf("err = %v, want a model error naming the provider's request timeout", err)
	}
}

// TestModelErrorTextOnce: an error status without a message names the status
// once, in words, in the error and in the notice.
func TestModelErrorTextOnce(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Reply{Status: 403})
	_, _, err := hiFromAlice(t, newAgent(t, srv, nil, nil))
	var me *ModelError
	if !errors.As(err, &me) || err.Error() != "model call failed (default): status 403: Forbidden" {
		t.Fatalf("err = %v", err)
	}
	if n := me.Notice(); n != "the model service answered HTTP 403: Forbidden" {
		t.Errorf("notice = %q", n)
	}
}

// TestModelErrorPageIsSummarized: an error answered with an HTML page (a proxy's
// or web server's; statuses that are not retried) is named by the page's title, or its text without tags, in
// one line; a 404 that is not an OpenAI-style error asks whether base_url is
// right.
func TestModelErrorPageIsSummarized(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reply  openaitest.Reply
		notice string
	}{
		{"title", openaitest.Reply{Status: 403, ErrBody: "<!DOCTYPE html>\n<html>\n<head><title>403 Forbidden</title></head>\n<body>\n<center><h1>403 Forbidden</h1></center>\n<hr><center>nginx</center>\n</body>\n</html>\n"},
			"the model service answered HTTP 403: 403 Forbidden"},
		{"no title", openaitest.Reply{Status: 405, ErrBody: "<!DOCTYPE HTML>\n<html lang=\"en\">\n<head><style>p {color: red}</style></head>\n<body>\n  <h1>Error response</h1>\n  <p>Error code: 405</p>\n  <p>Message: Method not allowed (&#x27;POST&#x27;).</p>\n</body>\n</html>\n"},
			"the model service answered HTTP 405: Error response Error code: 405 Message: Method not allowed ('POST')."},
		{"404 page", openaitest.Reply{Status: 404, ErrBody: "404 page not found\n"},
			`the model service answered HTTP 404: 404 page not found (is base_url of llm profile "default" right? OpenAI-compatible servers usually answer under /v1)`},
		{"404 api error", openaitest.Reply{Status: 404, ErrMessage: "The model `gpt-x` does not exist", ErrType: "invalid_request_error", ErrCode: "model_not_found"},
			"the model service answered HTTP 404: The model `gpt-x` does not exist"},
		{"404 flat json", openaitest.Reply{Status: 404, ErrBody: `{"object":"error","message":"The model gpt-x does not exist."}`},
			`the model service answered HTTP 404: {"object":"error","message":"The model gpt-x does not exist."}`},
		{"json with tags", openaitest.Reply{Status: 400, ErrBody: `{"error":"template: <head> missing, use <title>Foo</title>"}`},
			`the model service answered HTTP 400: {"error":"template: <head> missing, use <title>Foo</title>"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := executeReply(t, tc.reply)
			var me *ModelError
			if !errors.As(err, &me) {
				t.Fatalf("err = %v, want a model error", err)
			}
			if n := me.Notice(); n != tc.notice {
				t.Errorf("notice = %q\nwant     %q", n, tc.notice)
			}
		})
	}
}
