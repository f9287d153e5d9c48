package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"openbot/store/postgres"
)

// waitLong bounds every wait for a hint: generous, only there so a broken
// listener fails the test instead of hanging it.
const waitLong = 30 * time.Second

// listener runs s.ListenHints until the test ends and forwards each payload.
type listener struct {
	got  chan string
	done chan error
}

func listen(t *testing.T, s *postgres.Store) *listener {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{got: make(chan string, 1024), done: make(chan error, 1)}
	go func() { l.done <- s.ListenHints(ctx, func(p string) { l.got <- p }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-l.done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("ListenHints returned %v, want context.Canceled", err)
			}
		case <-time.After(waitLong):
			t.Errorf("ListenHints did not return after its context ended")
		}
	})
	return l
}

// await reads hints until one equal to want arrives, and returns the ones
// before it.
func (l *listener) await(t *testing.T, want string) []string {
	t.Helper()
	var before []string
	deadline := time.After(waitLong)
	for {
		select {
		case p := <-l.got:
			if p == want {
				return before
			}
			before = append(before, p)
		case <-deadline:
			t.Fatalf("hint %q not received; got %q", want, before)
		}
	}
}

// ready sends numbered pings from s until every listener has heard one (a hint
// sent before a listener's LISTEN is lost, by design), then drains the pings
// in flight with a final marker.
func ready(t *testing.T, s *postgres.Store, ls ...*listener) {
	t.Helper()
	for i, l := range ls {
		heard := false
		for n := 0; !heard; n++ {
			if n > int(waitLong/(20*time.Millisecond)) {
				t.Fatalf("listener %d heard no ping", i)
			}
			if err := s.Hint(t.Context(), fmt.Sprintf("ping %d", n)); err != nil {
				t.Fatalf("Hint: %v", err)
			}
			select {
			case p := <-l.got:
				heard = strings.HasPrefix(p, "ping ")
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if err := s.Hint(t.Context(), "ready"); err != nil {
		t.Fatalf("Hint: %v", err)
	}
	for _, l := range ls {
		l.await(t, "ready")
	}
}

// TestHintsReachEveryStoreOfTheSchema: a hint from one handle reaches its own
// listener and the listener of another handle on the same DSN (two processes
// sharing a database, DESIGN.md §7).
func TestHintsReachEveryStoreOfTheSchema(t *testing.T) {
	a, dsn := open(t, postgres.Options{MaxConns: 2})
	b, err := postgres.Open(t.Context(), dsn, postgres.Options{MaxConns: 2})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if a.HintChannel() != b.HintChannel() || !strings.HasPrefix(a.HintChannel(), "openbot_") {
		t.Fatalf("channels %q and %q: want one openbot_ channel per schema", a.HintChannel(), b.HintChannel())
	}
	la, lb := listen(t, a), listen(t, b)
	ready(t, a, la, lb)
	if err := a.Hint(t.Context(), "p1 run 42"); err != nil {
		t.Fatalf("Hint: %v", err)
	}
	la.await(t, "p1 run 42")
	lb.await(t, "p1 run 42")
	if err := b.Hint(t.Context(), "p2 outbox 7"); err != nil {
		t.Fatalf("Hint: %v", err)
	}
	la.await(t, "p2 outbox 7")
	lb.await(t, "p2 outbox 7")
}

// TestHintsListenerReconnects kills the listener's backend; the listener
// reconnects by itself and hears hints sent after that.
func TestHintsListenerReconnects(t *testing.T) {
	s, dsn := open(t, postgres.Options{MaxConns: 2})
	l := listen(t, s)
	ready(t, s, l)

	admin, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer admin.Close(context.Background())
	var killed int
	err = admin.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND query = $2`,
		postgres.HintListenerApp, "LISTEN "+pgx.Identifier{s.HintChannel()}.Sanitize()).Scan(&killed)
	if err != nil || killed != 1 {
		t.Fatalf("terminate the listener's backend: %d killed, %v", killed, err)
	}
	// Hints sent before it reconnected are lost; ready pings until one is heard.
	ready(t, s, l)
	if err := s.Hint(t.Context(), "after reconnect"); err != nil {
		t.Fatalf("Hint: %v", err)
	}
	l.await(t, "after reconnect")
}

// TestHintsStayInTheirSchema: stores on two schemas of one database do not
// hear each other's hints.
func TestHintsStayInTheirSchema(t *testing.T) {
	a, _ := open(t, postgres.Options{MaxConns: 2})
	b, _ := open(t, postgres.Options{MaxConns: 2})
	if a.HintChannel() == b.HintChannel() {
		t.Fatalf("two schemas share channel %q", a.HintChannel())
	}
	lb := listen(t, b)
	ready(t, b, lb)
	// a's hint commits before b's: had it crossed, it would arrive first.
	if err := a.Hint(t.Context(), "from a"); err != nil {
		t.Fatalf("Hint: %v", err)
	}
	if err := b.Hint(t.Context(), "from b"); err != nil {
		t.Fatalf("Hint: %v", err)
	}
	if before := lb.await(t, "from b"); len(before) != 0 {
		t.Errorf("b's listener heard %q from another schema", before)
	}
}

// TestHintTooLarge: a payload over 1000 bytes is refused with
// ErrHintTooLarge; 1000 bytes go through.
func TestHintTooLarge(t *testing.T) {
	s, _ := open(t, postgres.Options{MaxConns: 2})
	if err := s.Hint(t.Context(), strings.Repeat("x", postgres.MaxHintBytes+1)); !errors.Is(err, postgres.ErrHintTooLarge) {
		t.Errorf("Hint of %d bytes: %v, want ErrHintTooLarge", postgres.MaxHintBytes+1, err)
	}
	if err := s.Hint(t.Context(), strings.Repeat("x", postgres.MaxHintBytes)); err != nil {
		t.Errorf("Hint of %d bytes: %v", postgres.MaxHintBytes, err)
	}
}

// TestHintsListenerEndsWithContextAfterClose: closing the store does not hang
// a listener; its context ends it.
func TestHintsListenerEndsWithContextAfterClose(t *testing.T) {
	s, _ := open(t, postgres.Options{MaxConns: 2})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var once sync.Once
	heard := make(chan struct{})
	go func() {
		done <- s.ListenHints(ctx, func(string) { once.Do(func() { close(heard) }) })
	}()
	for n := 0; ; n++ {
		if err := s.Hint(t.Context(), "ping"); err != nil {
			t.Fatalf("Hint: %v", err)
		}
		select {
		case <-heard:
		case <-time.After(20 * time.Millisecond):
			if n > int(waitLong/(20*time.Millisecond)) {
				t.Fatal("listener heard nothing")
			}
			continue
		}
		break
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("ListenHints: %v, want context.Canceled", err)
		}
	case <-time.After(waitLong):
		t.Fatal("ListenHints still running after Close and cancel")
	}
}
