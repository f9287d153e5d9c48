package e2e

// Ingress failover across processes sharing one PostgreSQL store (DESIGN.md
// §7): two real `openbot serve` children on one database, one Telegram bot in
// polling mode. Exactly one of them polls (it holds the account's ingress
// lease); after it is SIGKILLed while idle, the other takes the lease over once
// it lapses and resumes getUpdates at the offset the first one saved, and every
// update is answered exactly once. Each child reaches the fake Telegram through
// its own recording proxy, so the test sees which process polls and at which
// offset. Runs in flight at the kill are not this test's subject (shared-mode
// run recovery is tested with core): the kill lands between updates.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"openbot/adapters/telegram/telegramtest"
	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/store/postgres"
	"openbot/store/postgres/pgtest"
)

const (
	failoverToken = "700001:FAILOVER"
	failoverUser0 = 310000000 // chat (= user) id of message 0; message i uses failoverUser0+i
	failoverWait  = 90 * time.Second
)

var failoverMarkerRe = regexp.MustCompile(`failover-(\d+)`)

func failoverAnswer(n int) string { return fmt.Sprintf("Answer for failover-%d.", n) }

// pollProxy forwards one child's Bot API calls to the fake and records the
// offset of each getUpdates and the chat of each sendMessage it forwards.
type pollProxy struct {
	srv     *httptest.Server
	mu      sync.Mutex
	offsets []int64
}

func newPollProxy(t *testing.T, target string) *pollProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &pollProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		param := func(name string) int64 {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			vals, _ := url.ParseQuery(string(body))
			v := r.URL.Query().Get(name)
			if b := vals.Get(name); b != "" {
				v = b
			}
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/getUpdates"):
			off := param("offset")
			p.mu.Lock()
			p.offsets = append(p.offsets, off)
			p.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// polls returns the offsets of the getUpdates calls forwarded so far.
func (p *pollProxy) polls() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int64(nil), p.offsets...)
}

// failoverChild is one `openbot serve` process.
type failoverChild struct {
	name  string
	proxy *pollProxy
	log   string
	*child
}

func startFailoverChild(t *testing.T, bin, dir, name, dsn, llmURL string, tg *telegramtest.Server) *failoverChild {
	t.Helper()
	c := &failoverChild{name: name, proxy: newPollProxy(t, tg.URL()), log: filepath.Join(dir, name+".log")}
	cfg := fmt.Sprintf(`http:
  listen: 127.0.0.1:0
store:
  driver: postgres
  dsn: ${DATABASE_URL}
  path: %s
  process_id: %s
  lease_ttl: 3s
workspace: %s
sandbox: none
limits:
  run_timeout: 2m
llm:
  default:
    base_url: %s
    api_key: failover-key
    model: failover-model
    request_timeout: 1m
bots:
  - handle: chief
    name: Chief
    instructions: Answer.
telegram:
  - name: chief
    bot: chief
    token: %s
    api_endpoint: %s
    dm_policy: open
    streaming: "off"
`, filepath.Join(dir, name, "openbot.db"), name, filepath.Join(dir, name, "ws"), llmURL, failoverToken, c.proxy.srv.URL)
	if err := os.MkdirAll(filepath.Join(dir, name), 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c.child = startServe(t, bin, path, "info", c.log, "DATABASE_URL="+dsn)
	t.Cleanup(func() { c.signal(syscall.SIGKILL) })
	return c
}

func (c *failoverChild) logTail() string {
	b, _ := os.ReadFile(c.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// TestTelegramPollingFailoverSharedPostgres: see the top of the file.
func TestTelegramPollingFailoverSharedPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the openbot binary twice")
	}
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	bin := buildOpenbot(t)
	tg := telegramtest.NewServer(telegramtest.Bot{Token: failoverToken, ID: 700001, Username: "openbot_failover_bot", Name: "Failover"})
	t.Cleanup(tg.Close)
	llm := openaitest.New(t)
	var mu sync.Mutex
	asked := map[int]int{} // model requests per message
	llm.Handle(func(req openaitest.Request) openaitest.Reply {
		n := -1
		for _, m := range req.Body.Messages {
			if s := failoverMarkerRe.FindStringSubmatch(m.Content); s != nil && m.Role == "user" {
				n, _ = strconv.Atoi(s[1])
			}
		}
		mu.Lock()
		asked[n]++
		mu.Unlock()
		return openaitest.Reply{Text: failoverAnswer(n)}
	})

	children := []*failoverChild{
		startFailoverChild(t, bin, dir, "proc-a", dsn, llm.URL(), tg),
		startFailoverChild(t, bin, dir, "proc-b", dsn, llm.URL(), tg),
	}
	ctx, cancel := context.WithTimeout(context.Background(), failoverWait)
	defer cancel()
	logs := func() string {
		var b strings.Builder
		for _, c := range children {
			fmt.Fprintf(&b, "---- %s\n%s\n", c.name, c.logTail())
		}
		return b.String()
	}
	if _, err := tg.WaitCalls(ctx, "getUpdates", 1); err != nil {
		t.Fatalf("nobody polls: %v\n%s", err, logs())
	}
	var holder, other *failoverChild
	for i, c := range children {
		if len(c.proxy.polls()) > 0 {
			holder, other = c, children[1-i]
		}
	}
	if holder == nil {
		t.Fatalf("getUpdates came through neither child's proxy\n%s", logs())
	}

	var lastID int64
	send := func(n int) {
		user := failoverUser0 + n
		upd := fmt.Sprintf(`{"message":{"message_id":%d,"from":{"id":%d,"is_bot":false,"first_name":"User %d"},`+
			`"chat":{"id":%d,"type":"private","first_name":"User %d"},"date":%d,"text":"please answer failover-%d"}}`,
			n+1, user, n, user, n, time.Now().Unix(), n)
		id, err := tg.PushUpdate(failoverToken, []byte(upd))
		if err != nil {
			t.Fatalf("push message %d: %v", n, err)
		}
		lastID = id
	}
	answered := func(n int) int {
		got := 0
		for _, m := range tg.Messages(failoverToken) {
			if m.Chat == int64(failoverUser0+n) && strings.Contains(m.Text, failoverAnswer(n)) {
				got++
			}
		}
		return got
	}
	waitAnswered := func(from, to int) {
		t.Helper()
		for n := from; n < to; n++ {
			for answered(n) == 0 {
				select {
				case <-ctx.Done():
					t.Fatalf("message %d never answered\n%s", n, logs())
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
	}

	const before, after = 4, 4
	for n := range before {
		send(n)
	}
	waitAnswered(0, before)
	// The holder confirmed (and so saved) the offset past every update, and
	// has no run or delivery left: it is idle between updates when it dies.
	saved := lastID + 1
	if err := tg.WaitConfirmed(ctx, failoverToken, saved); err != nil {
		t.Fatalf("offset %d never confirmed: %v\n%s", saved, err, logs())
	}
	waitStoreIdle(ctx, t, dsn)
	if p := other.proxy.polls(); len(p) != 0 {
		t.Errorf("the standby process %s polled too (offsets %v) while %s held the ingress", other.name, p, holder.name)
	}
	holder.signal(syscall.SIGKILL)
	t.Logf("killed %s, the poller; %s should take over", holder.name, other.name)

	for n := before; n < before+after; n++ {
		send(n)
	}
	waitAnswered(before, before+after)
	if err := tg.WaitConfirmed(ctx, failoverToken, lastID+1); err != nil {
		t.Fatalf("the survivor never confirmed offset %d: %v\n%s", lastID+1, err, logs())
	}
	polls := other.proxy.polls()
	if len(polls) == 0 || polls[0] != saved {
		t.Errorf("the survivor's getUpdates offsets %v, want the first at the saved offset %d", polls, saved)
	}
	mu.Lock()
	defer mu.Unlock()
	for n := range before + after {
		got := answered(n)
		if asked[n] != 1 {
			t.Errorf("message %d: %d model requests, want 1 (an update processed twice)", n, asked[n])
		}
		switch {
		case got == 1:
		default:
			t.Errorf("message %d: answered %d times, want exactly once", n, got)
		}
	}
	if t.Failed() {
		t.Log(logs())
	}
}

// waitStoreIdle waits until the shared store has no queued or running run and
// no pending outbox entry: nothing is in flight.
func waitStoreIdle(ctx context.Context, t *testing.T, dsn string) {
	t.Helper()
	st, err := postgres.Open(ctx, dsn, postgres.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for {
		busy := false
		err := st.View(ctx, func(tx core.ReadTx) error {
			for _, status := range []core.RunStatus{core.RunQueued, core.RunRunning} {
				runs, err := tx.RunsByStatus(status)
				if err != nil {
					return err
				}
				busy = busy || len(runs) > 0
			}
			out, err := tx.PendingOutbox(0, 1)
			busy = busy || len(out) > 0
			return err
		})
		if err != nil {
			t.Fatalf("reading the shared store: %v", err)
		}
		if !busy {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the store never became idle")
		case <-time.After(20 * time.Millisecond):
		}
	}
}
