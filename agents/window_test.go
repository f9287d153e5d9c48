package agents

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"openbot/agents/anthropictest"
	"openbot/agents/openaitest"
)

// TestContextWindowFromModelList: each server's own field in its model list
// entry (real shapes) becomes the window of a profile without
// context_window, read once; other models' entries are not taken.
func TestContextWindowFromModelList(t *testing.T) {
	other := map[string]any{"id": "other-model", "object": "model", "max_model_len": 999999}
	cases := []struct {
		name   string
		entry  map[string]any
		props  map[string]any
		tokens int
		source string
	}{
		{"vLLM", map[string]any{"id": "fake-model", "object": "model", "created": 1700000000, "owned_by": "vllm",
			"root": "/models/qwen", "parent": nil, "max_model_len": 32768, "permission": []any{}},
			nil, 32768, "server (max_model_len)"},
		{"OpenRouter", map[string]any{"id": "fake-model", "name": "Fake", "created": 1700000000, "context_length": 131072,
			"architecture": map[string]any{"modality": "text->text"}, "pricing": map[string]any{"prompt": "0.000001"},
			"top_provider": map[string]any{"context_length": 65536, "max_completion_tokens": 8192, "is_moderated": false}},
			nil, 131072, "server (context_length)"},
		{"OpenRouter top provider only", map[string]any{"id": "fake-model", "name": "Fake",
			"top_provider": map[string]any{"context_length": 65536, "max_completion_tokens": 8192, "is_moderated": false}},
			nil, 65536, "server (top_provider.context_length)"},
		{"llama.cpp", map[string]any{"id": "fake-model", "object": "model", "created": 1700000000, "owned_by": "llamacpp",
			"meta": map[string]any{"vocab_type": 2, "n_vocab": 151936, "n_ctx_train": 262144, "n_embd": 2560, "n_params": 4022468096, "size": 4274540544}},
			map[string]any{"default_generation_settings": map[string]any{"n_ctx": 16384, "params": map[string]any{}},
				"total_slots": 1, "model_path": "/models/qwen.gguf"},
			16384, "server (/props default_generation_settings.n_ctx)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := openaitest.New(t)
			srv.SetModelEntries(other, c.entry)
			if c.props != nil {
				srv.SetProps(c.props)
			}
			logs := new(syncBuffer)
			a := newAgent(t, srv, nil, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
			for range 2 {
				if n, src := a.ContextWindow("default"); n != c.tokens || src != c.source {
					t.Fatalf("window %d from %q, want %d from %q", n, src, c.tokens, c.source)
				}
			}
			if n := strings.Count(logs.String(), "context window read from the server"); n != 1 || !strings.Contains(logs.String(), "profile=default") {
				t.Errorf("logged %d times, want once naming the profile:\n%s", n, logs)
			}
		})
	}
}

// TestContextWindowUnknown: a list without the field, a server without a
// model list, and a server that does not answer all keep the default (0),
// logged once naming the profile (WARN only for the failure); a configured
// context_window wins without asking.
func TestContextWindowUnknown(t *testing.T) {
	down := httptest.NewServer(nil)
	downURL := down.URL + "/v1"
	down.Close()
	cases := []struct {
		name  string
		setup func(*openaitest.Server)
		url   string
		want  string
	}{
		{"no field", func(s *openaitest.Server) { s.SetModels("fake-model") }, "", "level=INFO msg=\"the server's model list does not say"},
		{"no model list", func(*openaitest.Server) {}, "", "level=INFO msg=\"the server's model list does not say"},
		{"model not listed", func(s *openaitest.Server) {
			s.SetModelEntries(map[string]any{"id": "a", "max_model_len": 4096}, map[string]any{"id": "b", "max_model_len": 4096})
		}, "", "level=INFO"},
		{"server down", func(*openaitest.Server) {}, downURL, "level=WARN msg=\"could not read the model's context window"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := openaitest.New(t)
			c.setup(srv)
			logs := new(syncBuffer)
			a := newAgent(t, srv, nil, func(o *Options) {
				o.Logger = slog.New(slog.NewTextHandler(logs, nil))
				if c.url != "" {
					p := o.Providers["default"]
					p.BaseURL = c.url
					o.Providers["default"] = p
				}
			})
			for range 2 {
				if n, src := a.ContextWindow("default"); n != 0 || src != WindowDefault {
					t.Fatalf("window %d from %q, want the default", n, src)
				}
			}
			if n := strings.Count(logs.String(), "context_window on the llm profile"); n != 1 ||
				!strings.Contains(logs.String(), c.want) || !strings.Contains(logs.String(), "profile=default") {
				t.Errorf("logged %d times, want once (%s) naming the profile:\n%s", n, c.want, logs)
			}
			if strings.Contains(logs.String(), testKey) {
				t.Errorf("the key was logged:\n%s", logs)
			}
		})
	}
	t.Run("config wins", func(t *testing.T) {
		srv := openaitest.New(t)
		srv.SetModelEntries(map[string]any{"id": "fake-model", "max_model_len": 4096})
		a := windowAgent(t, srv, nil, 50000)
		if n, src := a.ContextWindow("default"); n != 50000 || src != WindowConfig {
			t.Errorf("window %d from %q, want 50000 from config", n, src)
		}
	})
}

// TestContextWindowAnthropic: an Anthropic profile takes max_input_tokens of
// GET /v1/models/{model}; a model the API does not know keeps the default.
func TestContextWindowAnthropic(t *testing.T) {
	srv := anthropictest.New(t)
	srv.RequireKey("sk-ant-good-0001")
	srv.SetMaxInputTokens("claude-test", 200000)
	a, err := New(Options{Providers: map[string]Provider{
		"known":   {API: APIAnthropic, BaseURL: srv.URL(), APIKey: "sk-ant-good-0001", Model: "claude-test"},
		"unknown": {API: APIAnthropic, BaseURL: srv.URL(), APIKey: "sk-ant-good-0001", Model: "claude-other"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n, src := a.ContextWindow("known"); n != 200000 || src != "server (max_input_tokens)" {
		t.Errorf("known: window %d from %q", n, src)
	}
	if n, src := a.ContextWindow("unknown"); n != 0 || src != WindowDefault {
		t.Errorf("unknown: window %d from %q", n, src)
	}
}

// TestServerWindowCutsHistory: a window read from the server fits the
// requests and compacts the history as a configured one does: with vLLM's
// max_model_len 8000 no request of a thread five windows long passes it and
// the thread is compacted; the same thread on a server that does not say
// sends its first request far past 8000 tokens.
func TestServerWindowCutsHistory(t *testing.T) {
	const window = 8000
	biggest := func(say bool) (int, int) {
		srv := openaitest.New(t)
		if say {
			srv.SetModelEntries(map[string]any{"id": "fake-model", "object": "model", "owned_by": "vllm", "max_model_len": window})
		} else {
			srv.SetModels("fake-model")
		}
		srv.Handle(func(r openaitest.Request) openaitest.Reply {
			if isCompaction(r) {
				return summarise(r)
			}
			return openaitest.Text("answered")
		})
		a := windowAgent(t, srv, nil, 0)
		env, bot := fiveWindowThread()
		trig := env.add(alice, "Alice", "next question")
		job := newJob(env, bot, false, trig)
		job.Env = sumEnv{env, bot.ID()}
		if res, err := execute(t, a, job); err != nil || res.Reply != "answered" {
			t.Fatalf("reply %q, err %v", res.Reply, err)
		}
		most, compactions := 0, 0
		for _, r := range srv.Requests() {
			most = max(most, len(r.Raw)/4)
			if isCompaction(r) {
				compactions++
			}
		}
		return most, compactions
	}
	if most, compactions := biggest(true); most > window || compactions == 0 {
		t.Errorf("window from the server: biggest request %d tokens (window %d), %d compactions", most, window, compactions)
	}
	if most, _ := biggest(false); most <= window {
		t.Errorf("no window from the server: biggest request %d tokens, want past %d (the default history budget)", most, window)
	}
}
