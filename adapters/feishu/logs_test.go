package feishu_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// recordingHandler is a slog.Handler that keeps every record with its attributes,
// including those added by Logger.With (the account), for tests that check what
// was logged and at which level. The zero value is ready; copies made by WithAttrs
// share the store.
type recordingHandler struct {
	shared *logStore
	pre    []slog.Attr
}

type logStore struct {
	mu    sync.Mutex
	lines []logLine
}

type logLine struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (l logLine) String() string { return fmt.Sprintf("%s %q %v", l.level, l.msg, l.attrs) }

func (h *recordingHandler) store() *logStore {
	if h.shared == nil {
		h.shared = &logStore{}
	}
	return h.shared
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	line := logLine{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.pre {
		line.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		line.attrs[a.Key] = a.Value.String()
		return true
	})
	s := h.store()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, line)
	return nil
}

func (h *recordingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &recordingHandler{shared: h.store(), pre: append(append([]slog.Attr(nil), h.pre...), as...)}
}

func (h *recordingHandler) WithGroup(string) slog.Handler { return h }

func (h *recordingHandler) all() []logLine {
	s := h.store()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]logLine(nil), s.lines...)
}

func (h *recordingHandler) reset() {
	s := h.store()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = nil
}

// warned returns the WARN (or higher) lines that carry attribute key=value.
func (h *recordingHandler) warned(key, value string) []logLine {
	var out []logLine
	for _, l := range h.all() {
		if l.level >= slog.LevelWarn && l.attrs[key] == value {
			out = append(out, l)
		}
	}
	return out
}

// has reports whether a line at exactly level carries attribute key=value.
func (h *recordingHandler) has(level slog.Level, key, value string) bool {
	for _, l := range h.all() {
		if l.level == level && l.attrs[key] == value {
			return true
		}
	}
	return false
}

// leaks returns the lines whose message or attributes contain any of secrets.
func (h *recordingHandler) leaks(secrets ...string) []logLine {
	var out []logLine
	for _, l := range h.all() {
		text := l.String()
		for _, s := range secrets {
			if s != "" && strings.Contains(text, s) {
				out = append(out, l)
			}
		}
	}
	return out
}
