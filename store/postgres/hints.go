package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jackc/pgx/v5"

	"openbot/core"
)

// Hints between the processes sharing a database (DESIGN.md §7, seed G8): a
// hint is a NOTIFY on one channel per schema, heard by every store of that
// schema that listens, the sender included. Hints are wake-ups, never the
// truth: one sent while a listener is reconnecting is lost, and the engine's
// periodic sweep finds the work it announced.

// MaxHintBytes is the largest hint payload Hint sends (core.Hinter's limit;
// PostgreSQL's own is 8000 bytes).
const MaxHintBytes = 1000

// ErrHintTooLarge is returned (wrapped) by Hint for a payload over MaxHintBytes.
var ErrHintTooLarge = errors.New("hint payload too large")

// HintListenerApp is the application_name of the listener's connection, so an
// operator can find it in pg_stat_activity.
const HintListenerApp = "openbot-hints"

const (
	hintTimeout        = 2 * time.Second  // one NOTIFY
	listenConnTimeout  = 10 * time.Second // connecting and LISTEN
	listenRetryInitial = 100 * time.Millisecond
	listenRetryMax     = 5 * time.Second
)

var _ core.Hinter = (*Store)(nil)

// hintChannel is the NOTIFY channel of schema: "openbot_" and 12 hex digits of
// its SHA-256, so stores on different schemas of one database do not hear each
// other, whatever the schema's name.
func hintChannel(schema string) string {
	sum := sha256.Sum256([]byte(schema))
	return "openbot_" + hex.EncodeToString(sum[:6])
}

// HintChannel is the NOTIFY channel of this store's schema (see Hint).
func (s *Store) HintChannel() string { return s.channel }

// Hint implements core.Hinter: it sends payload (at most MaxHintBytes, else an
// error wrapping ErrHintTooLarge) with pg_notify on a pooled connection, within
// 2 seconds and ctx. Every store listening on the same schema gets it, this one
// included, once the sending transaction commits. Best effort: an error means
// the hint may be lost; nil does not mean anyone listened.
func (s *Store) Hint(ctx context.Context, payload string) error {
	if len(payload) > MaxHintBytes {
		return fmt.Errorf("store postgres %s: hint of %d bytes: %w (limit %d)", s.where, len(payload), ErrHintTooLarge, MaxHintBytes)
	}
	if err := s.begin(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, hintTimeout)
	defer cancel()
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, s.channel, payload); err != nil {
		return s.wrap("hint", ctx, err)
	}
	return nil
}

// ListenHints implements core.Hinter: it calls fn with the payload of every hint
// sent on this store's schema (by any process, this one included), one at a
// time on the calling goroutine, until ctx is done, then returns ctx.Err(). fn
// should return quickly; hints wait in the connection meanwhile.
//
// It listens on a connection of its own, outside the pool (so it never takes a
// pooled connection from readers and writers), named HintListenerApp. When that
// connection is lost it logs at WARN and reconnects with exponential backoff
// (100ms doubling to 5s, no limit); hints sent meanwhile are lost. The caller's
// ctx owns the listener: Close of the store does not wait for it, and a
// listener still running after Close ends with ErrClosed at its next
// reconnection.
func (s *Store) ListenHints(ctx context.Context, fn func(payload string)) error {
	bo := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(listenRetryInitial),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0.2),
		backoff.WithMaxInterval(listenRetryMax),
		backoff.WithMaxElapsedTime(0),
	)
	for {
		if err := s.begin(ctx); err != nil {
			return err
		}
		err := s.listen(ctx, fn, bo.Reset)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := bo.NextBackOff()
		s.log.Warn("store postgres: hint listener lost its connection; reconnecting", "where", s.where,
			"channel", s.channel, "err", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// listen connects, LISTENs, calls listening once it does, and hands every
// notification to fn until the connection fails or ctx is done.
func (s *Store) listen(ctx context.Context, fn func(string), listening func()) error {
	cfg := s.pool.Config().ConnConfig.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = HintListenerApp
	cctx, cancel := context.WithTimeout(ctx, listenConnTimeout)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		cancel()
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		c, stop := context.WithTimeout(context.Background(), hintTimeout)
		defer stop()
		_ = conn.Close(c)
	}()
	_, err = conn.Exec(cctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize())
	cancel()
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fn(n.Payload)
	}
}
