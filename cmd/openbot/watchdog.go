package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"openbot/core"
	"openbot/metrics"
)

// pulser is implemented by adapters whose ingress shows signs of life (a
// polling Telegram account, a Slack Socket Mode or Feishu long connection):
// Pulse is when the platform last answered, Reconnect drops the connection so
// it is made again at once.
type pulser interface {
	Pulse() time.Time
	Reconnect()
}

// watched is one account the watchdog watches. h.mu guards it.
type watched struct {
	p     pulser
	limit time.Duration // silence longer than this is a stall
	down  time.Time     // when the watchdog found it silent; zero while it is up
	since time.Time     // when its ingress last started running here (silence counts from then at most)
	tried time.Time     // the last reconnect
	told  bool          // the watchdog found it stays down (and tried to tell the owners)
	// reached: telling the owners it stays down worked, so they are told when
	// it is back too.
	reached bool
}

// dogOptions wire the watchdog: its log, its metrics (nil: none) and alert,
// which tells the owners on an account other than those in avoid (the
// accounts found silent now and the one the text is about; nil: the log and
// the dashboard only); an error says they were not told. Set before
// health.watchdog runs.
type dogOptions struct {
	log     *slog.Logger
	metrics *metrics.Metrics
	alert   func(ctx context.Context, text string, avoid []core.AccountID) error
	now     func() time.Time
}

// Bounds of the watchdog's tick: a quarter of the shortest limit, within these.
const (
	minDogTick = 50 * time.Millisecond
	maxDogTick = 5 * time.Second
	// alertTimeout bounds telling the owners.
	alertTimeout = 30 * time.Second
)

// pulse has the watchdog watch account: silent for longer than limit (no
// answer from its platform), it is shown "reconnecting", logged, counted in
// openbot_channel_watchdog_reconnects_total and reconnected (again each limit
// while it stays silent); silent for longer than twice limit after that, the
// owners are told on another account (dogOptions.alert), and told again when
// it is back.
func (h *health) pulse(account string, p pulser, limit time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pulses[account] = &watched{p: p, limit: limit, since: h.dog.now()}
}

// silent is how long w's platform has not answered at now: since its last
// answer, or since its ingress started here when that came later (a fresh
// start, or an ingress taken over from another process, has not had its first
// answer yet).
func (w *watched) silent(now time.Time) time.Duration {
	from := w.p.Pulse()
	if w.since.After(from) {
		from = w.since
	}
	return now.Sub(from)
}

// watchdog checks the watched accounts until ctx is done.
func (h *health) watchdog(ctx context.Context) error {
	for {
		h.mu.Lock()
		tick := maxDogTick
		for _, w := range h.pulses {
			tick = min(tick, w.limit/4)
		}
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(max(tick, minDogTick)):
		}
		h.checkPulses(ctx)
	}
}

// checkPulses is one pass of the watchdog.
func (h *health) checkPulses(ctx context.Context) {
	o := h.dog
	now := o.now()
	type alert struct {
		w     *watched       // nil for "back"
		about core.AccountID // the account it is about, avoided as the silent ones are
		text  string
	}
	var alerts []alert
	var down []core.AccountID
	h.mu.Lock()
	for name, w := range h.pulses {
		if h.accounts[name] != "started" {
			// Its ingress does not run here (another process holds it, the
			// lease is being taken, it failed): nothing to hear, nothing to
			// reconnect, and not down for this process.
			if !w.down.IsZero() {
				w.down, w.tried, w.told, w.reached = time.Time{}, time.Time{}, false, false
				if o.metrics != nil {
					o.metrics.ChannelDown(name, false)
				}
			}
			continue
		}
		silent := w.silent(now)
		switch {
		case silent <= w.limit && !w.down.IsZero():
			o.log.Info("account is back: its platform answers again", "account", name, "down_for", now.Sub(w.down).Round(time.Second).String())
			if w.reached {
				alerts = append(alerts, alert{about: core.AccountID(name), text: fmt.Sprintf("openbot: %s is back after %s.", name, now.Sub(w.down).Round(time.Second))})
			}
			w.down, w.tried, w.told, w.reached = time.Time{}, time.Time{}, false, false
			if o.metrics != nil {
				o.metrics.ChannelDown(name, false)
			}
		case silent > w.limit && (w.tried.IsZero() || now.Sub(w.tried) > w.limit):
			if w.down.IsZero() {
				w.down = now
			}
			w.tried = now
			o.log.Warn("account silent for longer than its watchdog limit: reconnecting", "account", name,
				"silent", silent.Round(time.Millisecond).String(), "limit", w.limit.String())
			if o.metrics != nil {
				o.metrics.ChannelReconnect(name)
				o.metrics.ChannelDown(name, true)
			}
			w.p.Reconnect()
		}
		if !w.down.IsZero() && !w.told && now.Sub(w.down) > 2*w.limit {
			w.told = true
			o.log.Error("account stays down after reconnecting", "account", name, "silent", silent.Round(time.Second).String())
			alerts = append(alerts, alert{w: w, about: core.AccountID(name), text: fmt.Sprintf("openbot: %s has heard nothing from its platform for %s; reconnecting has not helped. Its state is on the dashboard's Team page and /healthz.",
				name, silent.Round(time.Second))})
		}
		if !w.down.IsZero() {
			down = append(down, core.AccountID(name))
		}
	}
	h.mu.Unlock()
	for _, a := range alerts {
		if o.alert == nil {
			continue
		}
		actx, cancel := context.WithTimeout(ctx, alertTimeout)
		// "Back" goes the way "down" went: not through the account it is about.
		err := o.alert(actx, a.text, append(slices.Clip(down), a.about))
		cancel()
		if err != nil {
			// Once per outage: the owners not told it is down are not told it is back.
			o.log.Warn("alert not delivered", "err", err)
			continue
		}
		if a.w != nil {
			h.mu.Lock()
			a.w.reached = a.w.told // unless it came back meanwhile
			h.mu.Unlock()
		}
	}
}

// silentState is account's state while the watchdog finds it silent, or "".
// h.mu is held.
func (h *health) silentState(account string) string {
	w := h.pulses[account]
	if w == nil || w.down.IsZero() {
		return ""
	}
	return fmt.Sprintf("reconnecting: no answer from the platform for %s", w.silent(h.dog.now()).Round(time.Second))
}
