package e2e

// Database faults under load, end to end: the real binary (`openbot serve` on
// PostgreSQL, the rig of cluster_test.go) answers a stream of Telegram
// messages while the database is restarted under it. The store retries what
// the outage broke and says so in the log; no message is lost or answered
// twice, and the process keeps answering once the database is back.

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

// TestDatabaseRestartMidLoad restarts PostgreSQL (pg_ctl stop -m fast, two
// seconds down, start) while one process ingests and runs messages: runs in
// flight, updates arriving during the outage. Every message is answered
// exactly once, a WARN names what failed and that it is retried, and messages
// sent after the restart are answered too (nothing wedged).
func TestDatabaseRestartMidLoad(t *testing.T) {
	srv := pgtest.Own(t)
	dsn, err := srv.NewSchema(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	x := newSoakRig(t, soakConfig{maxRuns: 8}, func() time.Duration {
		return time.Duration(100+rand.IntN(300)) * time.Millisecond
	})
	c := newCluster(t, x, dsn)
	c.start("p1")
	const before, during, after = 10, 10, 5
	for i := range before {
		x.send(i)
		time.Sleep(100 * time.Millisecond) // load pacing: runs are in flight when the database goes away
	}
	restarted := make(chan error, 1)
	go func() { restarted <- srv.Restart(2 * time.Second) }() // joined below
	for i := before; i < before+during; i++ {
		x.send(i)
		time.Sleep(100 * time.Millisecond) // load pacing: messages arrive during the outage
	}
	if err := <-restarted; err != nil {
		t.Fatalf("restarting the database: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if !x.waitSettled(ctx, before+during) {
		t.Fatalf("messages sent around the restart were not all answered: %s\n%s", x.tally(x.outcomes(before+during)), c.logs())
	}
	for i := before + during; i < before+during+after; i++ {
		x.send(i)
	}
	n := before + during + after
	if !x.waitSettled(ctx, n) {
		t.Fatalf("the process stopped answering after the restart: %s\n%s", x.tally(x.outcomes(n)), c.logs())
	}
	if busy := waitClusterIdle(ctx, t, dsn); busy != "" {
		t.Errorf("work left unfinished in the store: %s", busy)
	}
	s := x.tally(x.outcomes(n))
	t.Logf("database restart mid-load: %s", s)
	if s.Answered != n {
		t.Errorf("database restart: %s; want all %d answered exactly once, none only with a notice", s, n)
	}
	full, _ := os.ReadFile(filepath.Join(x.dir, "serve-p1.log"))
	warns := retryWarnings(string(full))
	for _, l := range warns[:min(len(warns), 5)] {
		t.Logf("serve: %s", l)
	}
	if len(warns) == 0 {
		t.Errorf("no WARN line says a database call failed and is retried\n%s", c.logs())
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
