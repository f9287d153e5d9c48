package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"openbot/internal/waitctx"
)

// errNotReady is returned by handleUpdate before Run has learned the bot's identity.
var errNotReady = errors.New("telegram: adapter is not running yet (getMe pending)")

// allowedUpdates is getUpdates' and setWebhook's allowed_updates.
const allowedUpdates = `["message","edited_message","callback_query"]`

// Run implements core.Runner (DESIGN.md §2). It calls getMe (retrying transient
// failures) to learn the bot's @username and id, then in polling mode removes any
// webhook and runs our own getUpdates loop: the updates of one answer are stored
// together (one transaction through BatchEngine when the Engine has it; a click or
// a command the adapter answers itself is handled on its own, in order), and only
// then is the offset past the last of them persisted through Cursors, once per
// answer, so after a crash at any point every update is processed once (a
// redelivered update carries the same DedupKey and core ignores it). In webhook mode
// it registers the webhook with secret_token and blocks. Run returns nil when ctx is
// done, and an error for a rejected token (401/404) or a refused setWebhook. It owns
// one helper goroutine (the typing indicator's repeats, see Working) and waits for
// it before returning; no typing is shown after that.
func (a *Adapter) Run(ctx context.Context) error {
	var me tgbotapi.User
	err := a.retry(ctx, "getMe", func() error {
		res, err := a.call(ctx, "getMe", nil, requestTimeout)
		if err != nil {
			return err
		}
		return json.Unmarshal(res, &me)
	})
	if err != nil || ctx.Err() != nil {
		return err
	}
	if me.UserName == "" || me.ID == 0 {
		return fmt.Errorf("telegram: getMe returned no username or id")
	}
	a.peers.add(me.UserName, a.bot) // before Self reports ready
	a.mu.Lock()
	a.me = &me
	a.mu.Unlock()
	a.log.Info("telegram bot connected", "username", me.UserName, "mode", a.mode)

	var wg sync.WaitGroup
	defer wg.Wait()
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.typist(tctx)
	}()

	if a.mode == ModeWebhook {
		err := a.retry(ctx, "setWebhook", func() error {
			_, err := a.call(ctx, "setWebhook", tgbotapi.Params{
				"url":             a.hookURL,
				"secret_token":    a.secret,
				"allowed_updates": allowedUpdates,
			}, requestTimeout)
			return err
		})
		if err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	}
	// getUpdates is refused (409) while a webhook is set; pending updates are kept.
	if err := a.retry(ctx, "deleteWebhook", func() error {
		_, err := a.call(ctx, "deleteWebhook", tgbotapi.Params{"drop_pending_updates": "false"}, requestTimeout)
		return err
	}); err != nil {
		return err
	}
	return a.poll(ctx)
}

// poll is the getUpdates loop. It returns nil when ctx is done.
func (a *Adapter) poll(ctx context.Context) error {
	var offset int64
	name := CursorName(a.name)
	if err := a.retry(ctx, "reading the offset", func() error {
		v, err := a.cursors.Cursor(ctx, name)
		if err != nil || v == "" {
			return err
		}
		offset, err = strconv.ParseInt(v, 10, 64)
		if err != nil {
			return permanentError{fmt.Errorf("telegram: stored offset %q: %w", v, err)}
		}
		return nil
	}); err != nil || ctx.Err() != nil {
		return err
	}

	bo := newBackoff()
	a.pulse.Store(time.Now().UnixNano())
	for ctx.Err() == nil {
		a.ingress.MarkLive() // the first getUpdates is on its way: the account takes messages
		cctx, abandon := context.WithCancel(ctx)
		a.abandon.Store(&abandon)
		res, err := a.call(cctx, "getUpdates", tgbotapi.Params{
			"offset":          strconv.FormatInt(offset, 10),
			"timeout":         strconv.Itoa(int(a.pollWait / time.Second)),
			"allowed_updates": allowedUpdates,
		}, a.pollWait+requestTimeout)
		a.abandon.Store(nil)
		abandon()
		if err == nil {
			a.pulse.Store(time.Now().UnixNano())
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ae *APIError
			if errors.As(err, &ae) && (ae.Code == http.StatusUnauthorized || ae.Code == http.StatusNotFound) {
				return err
			}
			if errors.As(err, &ae) && ae.Code == http.StatusConflict {
				a.log.Error("getUpdates conflict: another poller or a webhook uses this token", "err", err)
			}
			// Not the error text: a transport error names the URL, which holds the
			// token, and /healthz is public.
			a.ingress.SetDown("getUpdates failing; retrying")
			if !a.sleep(ctx, wait(bo, err), "getUpdates", err) {
				return nil
			}
			continue
		}
		bo.Reset()
		a.ingress.SetDown("")
		var raws []json.RawMessage
		if err := json.Unmarshal(res, &raws); err != nil {
			a.log.Error("getUpdates: undecodable result", "err", err)
			if !a.sleep(ctx, bo.NextBackOff(), "getUpdates", err) {
				return nil
			}
			continue
		}
		b := updateBatch{a: a, done: offset}
		var failed error
		for _, raw := range raws {
			var u update
			if err := json.Unmarshal(raw, &u); err != nil {
				var id struct {
					UpdateID int64 `json:"update_id"`
				}
				if json.Unmarshal(raw, &id) != nil || id.UpdateID < offset {
					continue
				}
				a.log.Error("skipping an undecodable update", "update_id", id.UpdateID, "err", err)
				u = update{UpdateID: id.UpdateID}
			}
			if u.UpdateID < offset {
				continue // already confirmed
			}
			if failed = b.add(ctx, u); failed != nil {
				break
			}
		}
		if failed == nil {
			failed = b.flush(ctx)
		}
		if ctx.Err() != nil {
			// Stopped between storing and confirming: the updates come again on the
			// next start and core recognises their DedupKeys.
			return nil
		}
		if b.done > offset {
			// One offset save per answer, after every update below it is durable.
			offset = b.done
			if err := a.cursors.SetCursor(ctx, name, strconv.FormatInt(offset, 10)); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				// The updates are stored; a lost offset only means a deduplicated redelivery.
				a.log.Warn("saving the polling offset failed", "offset", offset, "err", err)
			}
		}
		if failed != nil {
			a.log.Error("update not stored; polling it again", "offset", offset, "err", failed)
			if !a.sleep(ctx, bo.NextBackOff(), "ingest", failed) {
				return nil
			}
		}
	}
	return nil
}

func newBackoff() *backoff.ExponentialBackOff {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval, bo.MaxInterval, bo.MaxElapsedTime = time.Second, time.Minute, 0
	return bo
}

// wait is the platform's retry_after when it gave one, else the next backoff.
func wait(bo backoff.BackOff, err error) time.Duration {
	var ae *APIError
	if errors.As(err, &ae) && ae.RetryAfter() > 0 {
		return ae.RetryAfter()
	}
	return bo.NextBackOff()
}

// sleep logs err and waits d; false when ctx ended first.
func (a *Adapter) sleep(ctx context.Context, d time.Duration, what string, err error) bool {
	a.log.Warn(what+" failed; retrying", "wait", d, "err", err)
	return waitctx.Sleep(ctx, d) == nil
}

// retry runs op until it succeeds, fails permanently (returned), or ctx ends (nil).
func (a *Adapter) retry(ctx context.Context, what string, op func() error) error {
	bo := newBackoff()
	for {
		err := op()
		if err == nil || ctx.Err() != nil {
			return nil
		}
		var pe interface{ Permanent() bool }
		if errors.As(err, &pe) && pe.Permanent() {
			return fmt.Errorf("telegram %s: %w", what, err)
		}
		if !a.sleep(ctx, wait(bo, err), what, err) {
			return nil
		}
	}
}
