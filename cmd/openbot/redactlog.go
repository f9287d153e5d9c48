package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"openbot/core"
)

// redactHandler is the log handler every openbot command logs through: it passes
// the message and every attribute (strings, errors, Stringers, groups) through
// core.Redact and replaces each configured secret value literally, so no
// credential reaches a log line whichever package wrote it (DESIGN.md §9). An
// SDK or library error that quotes a URL with a token in its query is logged
// with the token replaced, the host and path kept.
type redactHandler struct {
	next    slog.Handler
	secrets *strings.Replacer // nil when the config has none
}

// newRedactHandler wraps next; secrets are literal values to scrub (config.Secrets).
func newRedactHandler(next slog.Handler, secrets []string) slog.Handler {
	h := &redactHandler{next: next}
	if len(secrets) > 0 {
		pairs := make([]string, 0, 2*len(secrets))
		for _, s := range secrets {
			pairs = append(pairs, s, core.Redacted)
		}
		h.secrets = strings.NewReplacer(pairs...)
	}
	return h
}

func (h *redactHandler) scrub(s string) string {
	if h.secrets != nil {
		s = h.secrets.Replace(s)
	}
	return core.Redact(s)
}

func (h *redactHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *redactHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.scrub(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(as))
	for i, a := range as {
		clean[i] = h.attr(a)
	}
	return &redactHandler{next: h.next.WithAttrs(clean), secrets: h.secrets}
}

func (h *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{next: h.next.WithGroup(name), secrets: h.secrets}
}

// attr returns a with every text in it scrubbed. Numbers, bools, times and
// durations pass unchanged; anything else is formatted and scrubbed.
func (h *redactHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.scrub(v.String()))
	case slog.KindGroup:
		as := v.Group()
		clean := make([]any, len(as))
		for i, g := range as {
			clean[i] = h.attr(g)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case nil:
			return a
		case error:
			return slog.String(a.Key, h.scrub(x.Error()))
		case fmt.Stringer:
			return slog.String(a.Key, h.scrub(x.String()))
		default:
			return slog.String(a.Key, h.scrub(fmt.Sprint(x)))
		}
	default:
		return slog.Attr{Key: a.Key, Value: v}
	}
}
