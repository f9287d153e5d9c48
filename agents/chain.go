package agents

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"openbot/core"
)

// link is one profile of a fallback chain with the model asked of it.
type link struct {
	pc    *providerClient
	model string
}

// chain resolves a bot's fallback chain (core.BotProfile.Chain): the bot's
// model applies to its first profile, each backup asks its own profile's
// model. A bot without a profile uses the only one, else "default". Errors:
// ErrUnknownProvider for a name not configured, or a profile without a model.
func (a *Agent) chain(bot core.BotProfile) ([]link, error) {
	names := bot.Chain()
	if len(names) == 0 {
		names = []string{"default"}
		if len(a.clients) == 1 {
			for n := range a.clients {
				names[0] = n
			}
		}
	}
	out := make([]link, 0, len(names))
	for i, name := range names {
		pc, ok := a.clients[name]
		if !ok {
			return nil, fmt.Errorf("%w: %q (bot @%s)", ErrUnknownProvider, name, bot.Handle)
		}
		model := pc.prov.Model
		if i == 0 {
			model = cmp.Or(bot.Model, model)
		}
		if model == "" {
			return nil, fmt.Errorf("no model configured for bot @%s (provider %q)", bot.Handle, name)
		}
		out = append(out, link{pc: pc, model: model})
	}
	return out, nil
}

// cooling is how long the profile is still skipped (0: it may be asked) and
// why: its own cooldown, or every one of its keys set aside.
func (pc *providerClient) cooling() (time.Duration, string) {
	d, why := pc.cd.left(pc.id)
	if kd, kwhy := pc.tr.keys.cooling(); kd > d {
		d, why = kd, "its API keys were refused or rate-limited ("+kwhy+")"
	}
	return d, why
}

// usable returns the links of chain a call tries, in order: those not cooling
// down. When every one is, it waits for the one that comes back first, if that
// is within retryMaxWait and ctx's deadline, and tries it alone; else it fails
// with a *ModelError naming each profile, why it is skipped and for how long.
func (a *Agent) usable(ctx context.Context, chain []link) ([]link, error) {
	out := make([]link, 0, len(chain))
	soonest, wait := -1, time.Duration(0)
	var skipped []string
	for i, l := range chain {
		d, why := l.pc.cooling()
		if d == 0 {
			out = append(out, l)
			continue
		}
		skipped = append(skipped, fmt.Sprintf("llm profile %q (%s; skipped for %s more)", l.pc.name, why, d.Round(time.Second)))
		if soonest < 0 || d < wait {
			soonest, wait = i, d
		}
	}
	if len(out) > 0 {
		if len(skipped) > 0 {
			a.log.Info("llm profiles skipped while they cool down", "skipped", strings.Join(skipped, "; "))
		}
		return out, nil
	}
	dl, hasDL := ctx.Deadline()
	if wait <= retryMaxWait && (!hasDL || time.Until(dl) > wait) {
		if err := a.opts.sleep(ctx, wait); err == nil {
			return chain[soonest : soonest+1], nil
		}
	}
	names := make([]string, 0, len(chain))
	for _, l := range chain {
		names = append(names, l.pc.name)
	}
	msg := "every model is cooling down after failures: " + strings.Join(skipped, "; ")
	return nil, &ModelError{Provider: strings.Join(names, ", "), Message: msg,
		Summary: "no model could be asked: " + strings.Join(skipped, "; ") + ". Try again later."}
}

// fallbackReason says why a failed call moves on to the next profile of its
// chain, and how long the failing profile is skipped: a 429, a 408, a 5xx, a
// timeout, a connection failure, a stalled or cut stream, a model that does
// not exist (404), a refused key (401, 403). "" when it does not: the run
// stopped, the request itself is wrong (400: another profile would refuse it
// too), the prompt is too long (the run trims it instead). ctx is the run's,
// cctx the call's; si the call's stream info (Retry-After).
func fallbackReason(ctx, cctx context.Context, err error, si *streamInfo) (string, time.Duration) {
	if ctx.Err() != nil {
		return "", 0
	}
	var (
		apiErr *apiError
		stall  *StallError
	)
	after := time.Duration(si.retryAfter.Load())
	switch {
	case cctx.Err() != nil:
		return "no complete answer within its request timeout", busyCooldown
	case errors.As(err, &stall):
		return "stopped responding", busyCooldown
	case errors.As(err, &apiErr):
		s := apiErr.Status
		switch {
		case s == http.StatusTooManyRequests || s == http.StatusRequestTimeout || s >= 500:
			return fmt.Sprintf("HTTP %d", s), cmp.Or(after, busyCooldown)
		case s == http.StatusNotFound:
			return "HTTP 404: no such model or path", cmp.Or(after, missingCooldown)
		case s == http.StatusUnauthorized || s == http.StatusForbidden:
			return fmt.Sprintf("HTTP %d: key refused", s), missingCooldown
		}
		return "", 0
	}
	return "could not be reached or its answer was cut", busyCooldown
}

// chainDown is the error of a call whose every profile failed: one notice
// naming what was tried and why each failed, with last's details.
func chainDown(tried []string, last *ModelError) *ModelError {
	return &ModelError{Provider: last.Provider, Status: last.Status, Code: last.Code,
		Message: strings.Join(tried, "; ") + "; last: " + last.Message,
		Summary: "no model answered; tried " + strings.Join(tried, ", ") + ". Try again later.",
		Stalled: last.Stalled}
}

// served says which link of a chain answered a call made with chat.
type served struct {
	link
	key      string // the API key's label
	fallback bool   // not the chain's first profile
}

// chat makes one call outside a run (reflection) through chain with the same
// policy as a run's callModel: profiles cooling down are skipped, a failure
// another profile may not share moves on to the next, the last usable one
// retries as the transport does. req.Model is set per link. Errors are the
// ModelAPI's (chain.go's own *ModelError when every profile is cooling down
// or failed).
func (a *Agent) chat(ctx context.Context, chain []link, req ChatRequest) (ChatAnswer, served, error) {
	links, err := a.usable(ctx, chain)
	if err != nil {
		return ChatAnswer{}, served{}, err
	}
	var tried []string
	for i, l := range links {
		last := i == len(links)-1
		limit := 0
		if last {
			limit = l.pc.tr.retries
		}
		si := &streamInfo{bo: newBackoff(a.opts.retryInitial), limit: &limit}
		cctx, cancel := context.WithTimeout(withStreamInfo(ctx, si), l.pc.prov.RequestTimeout)
		req.Model = l.model
		ans, err := l.pc.api.Chat(cctx, req)
		why, cool := "", time.Duration(0)
		if err != nil {
			why, cool = fallbackReason(ctx, cctx, err, si)
		}
		cancel()
		s := served{link: l, key: cmp.Or(si.keyLabel(), l.pc.label), fallback: l.pc != chain[0].pc}
		if err == nil {
			l.pc.cd.clear(l.pc.id)
			return ans, s, nil
		}
		if why == "" {
			return ans, s, err
		}
		l.pc.cd.set(l.pc.id, cool, why)
		tried = append(tried, fmt.Sprintf("llm profile %q (%s)", l.pc.name, why))
		if last {
			if len(tried) > 1 {
				err = fmt.Errorf("no model answered; tried %s: %w", strings.Join(tried, ", "), err)
			}
			return ans, s, err
		}
		a.log.Warn("model call failed; trying the next llm profile", "profile", l.pc.name, "model", l.model,
			"reason", why, "next", links[i+1].pc.name, "err", core.Redact(err.Error()))
	}
	return ChatAnswer{}, served{}, errors.New("agents: empty fallback chain")
}
