package e2e

// Database faults under load, end to end: the real binary (`openbot serve` on
// PostgreSQL, the rig of cluster_test.go) answers a stream of Telegram
// messages while the database misbehaves under it: it restarts, it ends
// connections inside write transactions, its statements time out on locked
// tables. The process retries what failed and says so in the log at WARN; no
// message is lost or answered twice, nothing is left unfinished in the store,
// and the process keeps answering once the fault is over.

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"openbot/store/postgres/pgtest"
)

// faultUnderLoad runs one process on dsn and sends 10 messages, then 10 more
// while fault runs, then 5 once it returned, each in its own chat, paced at
// 10 a second so runs are in flight throughout. It fails t unless every
// message is answered exactly once, the store is left idle, and the log has a
// WARN line that says something failed and is retried; with strict, also if
// the log has any ERROR line (a failure retried is a WARN; an ERROR is work
// that gave up and waits for its claim to lapse, if anything brings it back),
// else it only shows them.
func faultUnderLoad(t *testing.T, dsn string, strict bool, fault func(ctx context.Context) error) {
	x := newSoakRig(t, soakConfig{maxRuns: 8}, func() time.Duration {
		return time.Duration(100+rand.IntN(300)) * time.Millisecond
	})
	c := newCluster(t, x, dsn)
	c.start("p1")
	const before, during, after = 10, 10, 5
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	x.send(0)
	if !x.waitSettled(ctx, 1) { // the process is up and its schema migrated before the fault
		t.Fatalf("the first message was not answered\n%s", c.logs())
	}
	for i := 1; i < before; i++ {
		x.send(i)
		time.Sleep(100 * time.Millisecond) // load pacing: runs are in flight when the fault starts
	}
	fctx, fcancel := context.WithTimeout(context.Background(), time.Minute)
	defer fcancel()
	faulted := make(chan error, 1)
	go func() { faulted <- fault(fctx) }() // joined below
	for i := before; i < before+during; i++ {
		x.send(i)
		time.Sleep(100 * time.Millisecond) // load pacing: messages arrive during the fault
	}
	if err := <-faulted; err != nil {
		t.Fatalf("the fault: %v", err)
	}
	if !x.waitSettled(ctx, before+during) {
		t.Fatalf("messages sent around the fault were not all answered: %s\n%s", x.tally(x.outcomes(before+during)), c.logs())
	}
	for i := before + during; i < before+during+after; i++ {
		x.send(i)
	}
	n := before + during + after
	if !x.waitSettled(ctx, n) {
		t.Fatalf("the process stopped answering after the fault: %s\n%s", x.tally(x.outcomes(n)), c.logs())
	}
	if busy := waitClusterIdle(ctx, t, dsn); busy != "" {
		t.Errorf("work left unfinished in the store: %s", busy)
	}
	outs := x.outcomes(n)
	s := x.tally(outs)
	t.Logf("%s", s)
	if s.Answered != n || s.NoticeToo != 0 {
		t.Errorf("%s; want all %d answered exactly once, none with a notice", s, n)
		for i, o := range outs {
			if o.answers != 1 || o.notices > 0 {
				t.Logf("message %d: chat holds %q", i, x.chat(i))
			}
		}
	}
	full, _ := os.ReadFile(filepath.Join(x.dir, "serve-p1.log"))
	warns := retryWarnings(string(full))
	for _, l := range warns[:min(len(warns), 5)] {
		t.Logf("serve: %s", l)
	}
	if len(warns) == 0 {
		t.Errorf("no WARN line says a database call failed and is retried\n%s", c.logs())
	}
	var errs []string
	for _, l := range strings.Split(string(full), "\n") {
		if strings.Contains(l, "level=ERROR") {
			errs = append(errs, l)
		}
	}
	for _, l := range errs[:min(len(errs), 5)] {
		if strict {
			t.Errorf("serve logged an ERROR: %s", l)
		} else {
			t.Logf("serve logged an ERROR: %s", l)
		}
	}
	if len(errs) > 5 {
		t.Logf("... %d ERROR lines in all", len(errs))
	}
	if t.Failed() {
		t.Logf("serve log:\n%s", c.logs())
	}
}

// retryWarnings returns the WARN lines of log that say something is retried.
func retryWarnings(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(strings.ToLower(l), "retr") {
			out = append(out, l)
		}
	}
	return out
}

// TestDatabaseRestartMidLoad restarts PostgreSQL (pg_ctl stop -m fast, two
// seconds down, start) while one process ingests and runs messages. A read
// whose transaction cannot begin meanwhile is begun again: without that, about
// one run in five, a run got "@chief could not finish: store postgres
// [address]/postgres: begin read: FATAL: terminating connection due to
// administrator command (SQLSTATE 57P01)" instead of its answer.
func TestDatabaseRestartMidLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a database of its own and runs the openbot binary")
	}
	srv := pgtest.Own(t)
	dsn, err := srv.NewSchema(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	faultUnderLoad(t, dsn, false, func(context.Context) error { return srv.Restart(2 * time.Second) })
}

// TestConnectionDroppedMidLoad ends, for two seconds, every connection of the
// process that is inside a write transaction (pg_terminate_backend of the
// backends of its application_name holding a transaction id), as a proxy or
// an administrator may. The database stays up, so every failed write can be
// retried at once: no ERROR may be logged, nothing answered twice.
//
// A write whose COMMIT the server answered with an error (the termination
// landing on it) did not commit and is run again: without that, about one run
// in five failed with "commit: FATAL: terminating connection due to
// administrator command (SQLSTATE 57P01)" ("pick failed", "outbox settle" at
// ERROR), and a delivery whose settle failed that way was posted again.
func TestConnectionDroppedMidLoad(t *testing.T) {
	dsn := pgtest.DSN(t)
	const app = "openbot-e2e-dropped"
	faultUnderLoad(t, dsn+"&application_name="+app, true, func(ctx context.Context) error {
		admin, err := pgtest.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer admin.Close()
		ended := int64(0)
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end) || ended == 0; {
			n, err := admin.Int(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE application_name = $1 AND backend_xid IS NOT NULL`, app)
			if err != nil {
				return err
			}
			ended += n
			time.Sleep(5 * time.Millisecond) // sampling pg_stat_activity: it has nothing to wait on
		}
		t.Logf("ended %d connections inside a write transaction", ended)
		return nil
	})
}

// TestStatementTimeoutMidLoad gives the process's sessions a 100 ms
// statement_timeout and, three times, holds EXCLUSIVE locks on the tables
// of runs and inbox items for 400 ms (reads go on, writes wait), so writes
// are cancelled by the server and retried; no ERROR may be logged.
func TestStatementTimeoutMidLoad(t *testing.T) {
	dsn := pgtest.DSN(t)
	faultUnderLoad(t, dsn+"&statement_timeout=100", true, func(ctx context.Context) error {
		admin, err := pgtest.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer admin.Close()
		for range 3 {
			if err := admin.Hold(ctx, `LOCK TABLE runs, items IN EXCLUSIVE MODE`, 400*time.Millisecond); err != nil {
				return err
			}
			time.Sleep(200 * time.Millisecond) // between faults, work goes on
		}
		return nil
	})
}
