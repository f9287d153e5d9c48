package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"openbot/core"
	"openbot/internal/runtest"
	"openbot/store/postgres"
	"openbot/store/postgres/pgtest"
)

// Faults inside a write transaction, on a real server: the store retries the
// whole transaction on a new connection, logs a WARN saying what failed and
// that it retries, writes each record once, and keeps working afterwards.

// writeFn is Update or Batch of a store.
type writeFn func(*postgres.Store) func(context.Context, func(core.Tx) error) error

var writers = []struct {
	name  string
	write writeFn
}{
	{"Update", func(s *postgres.Store) func(context.Context, func(core.Tx) error) error { return s.Update }},
	{"Batch", func(s *postgres.Store) func(context.Context, func(core.Tx) error) error { return s.Batch }},
}

// openLogged opens a store on dsn whose log goes to the returned buffer.
func openLogged(t *testing.T, dsn string) (*postgres.Store, *runtest.Buffer) {
	t.Helper()
	log := &runtest.Buffer{}
	s, err := postgres.Open(t.Context(), dsn, postgres.Options{Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, log
}

// adminConn is a connection of its own to dsn, beside the store's pool, for
// what an administrator does to it (pg_terminate_backend); closed when the test
// ends.
func adminConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// threadsKeyed counts the stored threads with key.
func threadsKeyed(t *testing.T, s *postgres.Store, key string) int {
	t.Helper()
	n := 0
	err := s.View(t.Context(), func(tx core.ReadTx) error {
		ths, err := tx.Threads(1000)
		for _, th := range ths {
			if th.Key == key {
				n++
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// stillWrites fails t unless a plain write commits within 10 s.
func stillWrites(t *testing.T, s *postgres.Store, write writeFn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := write(s)(ctx, func(tx core.Tx) error { return tx.SetCursor("after-fault", "ok") }); err != nil {
		t.Fatalf("a write after the fault: %v", err)
	}
}

// retryWarned fails t unless log has a WARN line that says a write is retried
// and names the failure by want.
func retryWarned(t *testing.T, log *runtest.Buffer, want string) {
	t.Helper()
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(strings.ToLower(l), "retr") && strings.Contains(l, want) {
			t.Logf("logged: %s", l)
			return
		}
	}
	t.Errorf("no WARN line says the write is retried after %q; log:\n%s", want, log.String())
}

// TestWriteConnectionDropped: the server ends the connection of a write
// transaction in the middle of it (pg_terminate_backend of the backend idle in
// that transaction, as a proxy or an administrator may). The write is retried
// on another connection and commits once; the caller gets no error.
func TestWriteConnectionDropped(t *testing.T) {
	for _, w := range writers {
		t.Run(w.name, func(t *testing.T) {
			app := "openbot-fault-" + strings.ToLower(w.name)
			dsn := pgtest.DSN(t)
			s, log := openLogged(t, dsn+"&application_name="+app)
			admin := adminConn(t, dsn)

			attempts := 0
			inside, release := make(chan struct{}), make(chan struct{})
			done := make(chan error, 1)
			go func() { // joined on done
				done <- w.write(s)(t.Context(), func(tx core.Tx) error {
					attempts++
					if _, err := tx.PutThread(core.Thread{Key: "dropped"}); err != nil {
						return err
					}
					if attempts == 1 {
						close(inside)
						<-release
					}
					return tx.SetCursor("dropped", fmt.Sprint(attempts))
				})
			}()
			<-inside
			killed := terminateIdleInTx(t, admin, app)
			close(release)
			if err := <-done; err != nil {
				t.Fatalf("the store does not retry a write whose connection was dropped (%d backend ended): %s "+
					"returned %q; it must run the transaction again on a new connection and log a WARN saying so", killed, w.name, err)
			}
			if attempts < 2 {
				t.Errorf("the transaction ran %d times, want it run again after the dropped connection", attempts)
			}
			if n := threadsKeyed(t, s, "dropped"); n != 1 {
				t.Errorf("%d threads stored, want exactly 1", n)
			}
			retryWarned(t, log, "SQLSTATE 57P01")
			stillWrites(t, s, w.write)
		})
	}
}

// terminateIdleInTx ends the backends of application app that are idle inside
// a transaction, waiting up to 10 s for one to show in pg_stat_activity, and
// returns how many it ended.
func terminateIdleInTx(t *testing.T, admin *pgx.Conn, app string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		err := admin.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE application_name = $1 AND state = 'idle in transaction'`, app).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatal("no backend of the store was seen idle in its write transaction")
		}
		time.Sleep(10 * time.Millisecond) // pg_stat_activity has no notification to wait on
	}
}

// TestWriteStatementTimeout: with statement_timeout set for the store's
// sessions, a write waits on a lock another session holds on the table it
// writes, and its statement is cancelled by the server. The store retries,
// logs a WARN naming the timeout, and commits once the lock is released.
func TestWriteStatementTimeout(t *testing.T) {
	for _, w := range writers {
		t.Run(w.name, func(t *testing.T) {
			dsn := pgtest.DSN(t)
			s, log := openLogged(t, dsn+"&statement_timeout=200")
			admin := adminConn(t, dsn)
			lock, err := admin.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = lock.Rollback(context.Background()) }()
			if _, err := lock.Exec(t.Context(), `LOCK TABLE threads IN ACCESS EXCLUSIVE MODE`); err != nil {
				t.Fatal(err)
			}

			done := make(chan error, 1)
			go func() { // joined on done
				done <- w.write(s)(t.Context(), func(tx core.Tx) error {
					_, err := tx.PutThread(core.Thread{Key: "timed out"})
					return err
				})
			}()
			logged := make(chan struct{})
			go func() { // ends with the test's context at the latest
				defer close(logged)
				for !strings.Contains(log.String(), "statement timeout") && t.Context().Err() == nil {
					time.Sleep(10 * time.Millisecond) // the log buffer has no wait with a way out
				}
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("the store does not retry a write whose statement timed out: %s returned %q before the lock "+
						"was released; it must retry (a server-side cancel, not the caller's) and log a WARN saying so", w.name, err)
				}
				t.Fatalf("%s committed while another session held ACCESS EXCLUSIVE on threads", w.name)
			case <-logged:
			}
			if err := lock.Commit(t.Context()); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%s after the lock was released: %v", w.name, err)
				}
			case <-ctx.Done():
				t.Fatalf("%s still waits 10 s after the lock was released", w.name)
			}
			if n := threadsKeyed(t, s, "timed out"); n != 1 {
				t.Errorf("%d threads stored, want exactly 1", n)
			}
			retryWarned(t, log, "statement timeout")
			stillWrites(t, s, w.write)
		})
	}
}

// TestViewConnectionDropped: the server ends the connection of a read
// transaction between two of its statements (a restart mid-read, as in
// TestDatabaseRestartMidLoad). The read runs again in a new transaction on
// another connection, logs a WARN saying so, and the caller gets the second
// run's result and no error.
func TestViewConnectionDropped(t *testing.T) {
	const app = "openbot-fault-view"
	dsn := pgtest.DSN(t)
	s, log := openLogged(t, dsn+"&application_name="+app)
	admin := adminConn(t, dsn)
	var th core.Thread
	if err := s.Update(t.Context(), func(tx core.Tx) error {
		var err error
		if th, err = tx.PutThread(core.Thread{Key: "read"}); err != nil {
			return err
		}
		for i := range 3 {
			if _, err := tx.PutMessage(core.Message{Thread: th.ID, Sender: "slack:T1:U1", Text: fmt.Sprint("m", i)}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	runs := 0
	var texts []string
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() { // joined on done
		done <- s.View(t.Context(), func(tx core.ReadTx) error {
			runs++
			if _, err := tx.Thread(th.ID); err != nil {
				return err
			}
			if runs == 1 {
				close(inside)
				<-release
			}
			msgs, err := tx.Messages(th.ID, 0, 0)
			texts = nil
			for _, m := range msgs {
				texts = append(texts, m.Text)
			}
			return err
		})
	}()
	<-inside
	killed := terminateIdleInTx(t, admin, app)
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the store does not run a read again whose connection was dropped (%d backend ended): View "+
			"returned %q; it must run fn again in a new transaction and log a WARN saying so", killed, err)
	}
	if runs != 2 {
		t.Errorf("fn ran %d times, want 2 (once more after the dropped connection)", runs)
	}
	if want := []string{"m0", "m1", "m2"}; !slices.Equal(texts, want) {
		t.Errorf("View read %q, want %q", texts, want)
	}
	retryWarned(t, log, "SQLSTATE 57P01")
	if n := threadsKeyed(t, s, "read"); n != 1 {
		t.Errorf("a read after the fault found %d threads keyed read, want 1", n)
	}
}

// TestViewFailsOnce: a read that fails for a reason another run cannot cure
// (here fn's own error) is not run again.
func TestViewFailsOnce(t *testing.T) {
	s, _ := openLogged(t, pgtest.DSN(t))
	runs := 0
	err := s.View(t.Context(), func(tx core.ReadTx) error {
		runs++
		_, err := tx.Thread(12345)
		return err
	})
	if !errors.Is(err, core.ErrNotFound) || runs != 1 {
		t.Errorf("View of a missing thread: %v after %d runs, want ErrNotFound after 1", err, runs)
	}
}
