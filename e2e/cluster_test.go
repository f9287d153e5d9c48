package e2e

// Several openbot processes on one PostgreSQL database (DESIGN.md §7, the lease
// model in docs/ARCHITECTURE.md): the real binary runs `serve` three times
// against one database, the fake Telegram Bot API and the fake model of the
// kill soak (soak_rig_test.go). One process holds the Telegram polling
// (ingress lease); runs and deliveries spread over all three. One process is
// sent SIGKILL while it runs work: its claims lapse and the others recover it.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"openbot/core"
	"openbot/store/postgres"
	"openbot/store/postgres/pgtest"
)

// cluster runs n `openbot serve` children of one soak rig on one database.
type cluster struct {
	x        *soakRig
	dsn      string
	mu       sync.Mutex
	children map[string]*child
}

// clusterLeaseTTL is the processes' store.lease_ttl: short, so a killed
// process's work is taken over within seconds.
const clusterLeaseTTL = 3 * time.Second

func newCluster(t *testing.T, x *soakRig, dsn string) *cluster {
	t.Helper()
	cfg, err := os.ReadFile(x.cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The soak's config, with the store on PostgreSQL and the process id from
	// the environment (each child gets its own).
	lines := strings.Split(string(cfg), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "store:") {
			lines[i+1] = fmt.Sprintf("  driver: postgres\n  dsn: %q\n  process_id: ${OPENBOT_PROCESS_ID}\n  lease_ttl: %s", dsn, clusterLeaseTTL)
		}
	}
	if err := os.WriteFile(x.cfg, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &cluster{x: x, dsn: dsn, children: map[string]*child{}}
	t.Cleanup(func() {
		for _, id := range c.ids() {
			c.signal(id, syscall.SIGKILL)
		}
	})
	return c
}

func (c *cluster) ids() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for id := range c.children {
		out = append(out, id)
	}
	return out
}

// start runs process id; its output goes to serve-<id>.log.
func (c *cluster) start(id string) {
	t := c.x.t
	t.Helper()
	ch := startServe(t, c.x.bin, c.x.cfg, "warn", filepath.Join(c.x.dir, "serve-"+id+".log"), "OPENBOT_PROCESS_ID="+id)
	c.mu.Lock()
	c.children[id] = ch
	c.mu.Unlock()
}

// signal sends sig to process id and waits for it to be gone (SIGKILL after
// soakStopFor); a SIGKILL is recorded for the rig's duplicate window.
func (c *cluster) signal(id string, sig syscall.Signal) {
	c.mu.Lock()
	ch := c.children[id]
	delete(c.children, id)
	c.mu.Unlock()
	if ch == nil {
		return
	}
	if sig == syscall.SIGKILL {
		c.x.mu.Lock()
		c.x.kills = append(c.x.kills, time.Now())
		c.x.mu.Unlock()
	}
	ch.signal(sig)
}

// running returns the owners of the runs running now, read from the database.
func (c *cluster) running(ctx context.Context) (map[string]int, error) {
	st, err := postgres.Open(ctx, c.dsn, postgres.Options{MaxConns: 2})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	out := map[string]int{}
	err = st.View(ctx, func(tx core.ReadTx) error {
		rs, err := tx.RunsByStatus(core.RunRunning)
		for _, r := range rs {
			out[r.Owner]++
		}
		return err
	})
	return out, err
}

// logs returns every child's output, for failures.
func (c *cluster) logs() string {
	var b strings.Builder
	for _, id := range []string{"p1", "p2", "p3"} {
		data := c.log(id)
		if len(data) > 6000 {
			data = data[len(data)-6000:]
		}
		fmt.Fprintf(&b, "---- %s\n%s\n", id, data)
	}
	return b.String()
}

// log returns process id's whole output.
func (c *cluster) log(id string) string {
	data, _ := os.ReadFile(filepath.Join(c.x.dir, "serve-"+id+".log"))
	return string(data)
}

// TestClusterKillOneProcess: three processes on one database answer a stream
// of messages, each in its own chat; one process is sent SIGKILL while it runs
// work. Its runs are taken over by the others once their claims lapse
// (resumed from their step checkpoint, or started again before the first
// step), the Telegram polling moves if it held it, and every message is
// answered exactly once: none lost, none twice except in the kill-after-post
// window the design allows (DESIGN.md §8).
func TestClusterKillOneProcess(t *testing.T) {
	dsn := pgtest.DSN(t)
	x := newSoakRig(t, soakConfig{maxRuns: 4}, func() time.Duration {
		return time.Duration(150+rand.IntN(350)) * time.Millisecond
	})
	c := newCluster(t, x, dsn)
	for _, id := range []string{"p1", "p2", "p3"} {
		c.start(id)
	}
	const n = 30
	for i := range n / 2 {
		x.send(i)
		time.Sleep(40 * time.Millisecond) // load pacing: messages arrive over time, so the kill finds work in flight
	}
	// Kill a process that owns a running run.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	victim := ""
	for victim == "" {
		owners, err := c.running(ctx)
		if err != nil {
			t.Fatalf("reading running runs: %v\n%s", err, c.logs())
		}
		for owner, k := range owners {
			if id, _, _ := strings.Cut(owner, "#"); k > 0 && strings.HasPrefix(id, "p") {
				victim = id // the process id; the claim owner adds "#" and a per-start part
			}
		}
		if victim == "" {
			select {
			case <-ctx.Done():
				t.Fatalf("no run was seen running\n%s", c.logs())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	c.signal(victim, syscall.SIGKILL)
	t.Logf("killed %s while it ran work", victim)
	for i := n / 2; i < n; i++ {
		x.send(i)
		time.Sleep(40 * time.Millisecond) // load pacing, as above
	}
	sctx, scancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer scancel()
	if !x.waitSettled(sctx, n) {
		t.Fatalf("not every message was answered: %s\n%s", x.tally(x.outcomes(n)), c.logs())
	}
	// A lapsed claim is taken over only after the lease TTL.
	c.checkTakenOver(t, x, n, victim, "one killed", "kill-after-post")
}

// checkTakenOver counts the n answered messages of x once a late duplicate had
// its chance to show (two lease TTLs), scenario naming the run in the log:
// none lost, none answered only with a notice, none twice outside the window
// the fault allows; a process logged taking over victim's runs, and no run is
// still running.
func (c *cluster) checkTakenOver(t *testing.T, x *soakRig, n int, victim, scenario, window string) {
	t.Helper()
	time.Sleep(2 * clusterLeaseTTL) // a late duplicate's window: no event says none will come
	s := x.tally(x.outcomes(n))
	t.Logf("three processes, %s: %s", scenario, s)
	if s.Lost != 0 || s.Duplicated != s.InWindow || s.NoticeOnly != 0 {
		t.Errorf("cluster: %s; want every message answered, none only with a notice, none twice outside the %s window\n%s", s, window, c.logs())
	}
	if !strings.Contains(c.logs(), "took over the work of a process whose claims lapsed") {
		t.Errorf("no process logged taking over %s's runs\n%s", victim, c.logs())
	}
	owners, err := c.running(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for id, k := range owners {
		t.Errorf("%d runs still running under %q after every message was answered", k, id)
	}
}
