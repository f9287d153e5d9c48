package agents

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// transport is the http.RoundTripper under each provider's go-openai client. It
// adds the provider's custom headers and patches chat completion request bodies so
// that every assistant message carries a "content" field.
//
// go-openai v1.43 marshals ChatCompletionMessage.Content with omitempty, so an
// assistant message that only has tool calls goes out without "content". Several
// OpenAI-compatible servers (and some chat templates) reject or mis-render such a
// message; OpenAI itself accepts "content":"" there. The patch adds "content":""
// where it is missing and leaves everything else byte-for-byte as go-openai wrote
// it apart from key order inside the patched messages.
type transport struct {
	base    http.RoundTripper
	headers map[string]string
}

// RoundTrip implements http.RoundTripper. It never modifies the caller's request.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	for k, v := range t.headers {
		out.Header.Set(k, v)
	}
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/chat/completions") && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = patchAssistantContent(body)
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.ContentLength = int64(len(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return t.base.RoundTrip(out)
}

// patchAssistantContent adds "content":"" to assistant messages without a content
// field. A body it cannot parse is returned unchanged.
func patchAssistantContent(body []byte) []byte {
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
