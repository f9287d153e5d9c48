package e2e

import (
	"context"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"openbot/store/postgres/pgtest"
)

// clusterSweep is serve's sweep interval (core.Options.SweepInterval's
// default): how often a process looks for lapsed claims to take over.
const clusterSweep = 2 * time.Second

// TestClusterStallOneProcess: three processes on one database answer a stream
// of messages while the model holds every answer, so runs wait in them.
// The process running the most is stopped (SIGSTOP): it neither renews nor
// gives anything up. Its runs are taken over by the others within the lease
// TTL and a sweep, and every message is answered while it is stopped. Once it
// continues (SIGCONT), with the model's answers to its own old calls waiting
// for it, it finds its claims gone and runs none of that work again: no
// message is answered twice (but in the post-then-stop window the design
// allows), and it takes its share of new messages.
func TestClusterStallOneProcess(t *testing.T) {
	dsn := pgtest.DSN(t)
	const slots = 6 // the bot's max_parallel_threads across the cluster, and each process's run limit
	x := newSoakRig(t, soakConfig{maxRuns: slots}, func() time.Duration {
		return time.Duration(50+rand.IntN(150)) * time.Millisecond
	})
	c := newCluster(t, x, dsn)
	for _, id := range []string{"p1", "p2", "p3"} {
		c.start(id)
	}
	x.holdAnswers()
	const before, during, after = 12, 8, 6
	for i := range before {
		x.send(i)
		time.Sleep(40 * time.Millisecond) // load pacing: messages arrive over time
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// Stop the process running the most runs once the bot's every slot
	// waits for an answer.
	for x.held.Load() < slots {
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d runs reached their answer call\n%s", x.held.Load(), slots, c.logs())
		case <-x.heldOne:
		}
	}
	owners, err := c.running(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victim, most := "", 0
	for owner, k := range owners {
		if id, _, _ := strings.Cut(owner, "#"); k > most {
			victim, most = id, k
		}
	}
	if victim == "" {
		t.Fatalf("no process runs work: %v\n%s", owners, c.logs())
	}
	c.mu.Lock()
	proc := c.children[victim].cmd.Process
	c.mu.Unlock()
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	x.mu.Lock()
	x.kills = append(x.kills, stopped) // a post accepted just before the stop may be posted again
	x.mu.Unlock()
	t.Logf("stopped %s while it ran %d of the runs (%v)", victim, most, owners)

	// Its runs go to the others once its claims lapse.
	for {
		owners, err := c.running(ctx)
		if err != nil {
			t.Fatal(err)
		}
		left := 0
		for owner, k := range owners {
			if id, _, _ := strings.Cut(owner, "#"); id == victim {
				left += k
			}
		}
		if left == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s still owns %d running runs %s after it was stopped\n%s", victim, left, time.Since(stopped), c.logs())
		case <-time.After(100 * time.Millisecond):
		}
	}
	took := time.Since(stopped)
	t.Logf("the stopped process's runs were taken over %s after the stop (lease TTL %s, sweep every %s)", took.Round(time.Millisecond), clusterLeaseTTL, clusterSweep)
	if bound := clusterLeaseTTL + clusterSweep + time.Second; took > bound {
		t.Errorf("taken over %s after the stop, want within the lease TTL and one sweep (%s)", took, bound)
	}
	x.releaseAnswers()
	for i := before; i < before+during; i++ {
		x.send(i)
		time.Sleep(40 * time.Millisecond) // load pacing, as above
	}
	if !x.waitSettled(ctx, before+during) {
		t.Fatalf("with %s stopped, not every message was answered: %s\n%s", victim, x.tally(x.outcomes(before+during)), c.logs())
	}

	// It continues: the answers to its old model calls are waiting for it.
	if err := proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("continued %s after %s stopped", victim, time.Since(stopped).Round(time.Millisecond))
	for i := before + during; i < before+during+after; i++ {
		x.send(i)
		time.Sleep(40 * time.Millisecond) // load pacing, as above
	}
	const n = before + during + after
	if !x.waitSettled(ctx, n) {
		t.Fatalf("after %s continued, not every message was answered: %s\n%s", victim, x.tally(x.outcomes(n)), c.logs())
	}
	// The continued process acts on its old runs only as its timers and calls
	// come due.
	c.checkTakenOver(t, x, n, victim, "one stopped and continued", "post-then-stop")
	// The continued process met its old runs' results and dropped them.
	if log := c.log(victim); !strings.Contains(log, "another process took it over; its result here is dropped") {
		t.Errorf("%s never said it dropped the results of the runs taken over from it:\n%s", victim, log)
	}
}
