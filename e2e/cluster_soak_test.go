package e2e

// Cluster kill soak: three `openbot serve` processes on one PostgreSQL
// database (the rig of cluster_test.go over the kill soak's, soak_rig_test.go),
// one of them SIGKILLed and restarted every few seconds while messages arrive
// on Telegram, Slack (Socket Mode) and Feishu (long connection), each message
// in a conversation of its own. Rerun the full soak (3,000 messages, a kill
// every 10-20 s; about ten minutes) with one command:
//
//	OPENBOT_SOAK=1 go test -run 'TestClusterSoak' -v -timeout 40m ./e2e/
//
// Knobs (environment): OPENBOT_SOAK_MESSAGES (default 3000), OPENBOT_SOAK_RATE
// (messages per second, default 6) and OPENBOT_SOAK_SEED (the seed of the kill
// moments and victims; default the clock, printed). Without OPENBOT_SOAK only
// TestClusterSoakShort runs (60 messages, a kill every 3-6 s), as part of
// `go test ./...`; -short skips it.
//
// Each answer takes two model steps: a workspace_write call together with a
// call of ledger__charge, the tool of a fake MCP server configured without
// `idempotent` (so not safe to repeat: a restart that interrupts a call
// started tells the model instead of calling again), then the answer. The
// soak checks that every message is acknowledged by a process and answered
// exactly once (duplicates in the kill-after-post window the design allows
// are counted apart, as the single-process soak does), that no run, inbox item
// or delivery is left unfinished in the database, and that the ledger saw no
// charge twice.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"openbot/adapters/feishu/feishutest"
	"openbot/adapters/slack/slacktest"
	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/store/postgres"
	"openbot/store/postgres/pgtest"
)

// clusterSoakParams shapes one cluster soak.
type clusterSoakParams struct {
	messages       int
	rate           float64       // messages per second
	minGap, maxGap time.Duration // between kills, uniform
	seed           uint64
	drain          time.Duration // bound on the wait for every answer
}

// TestClusterSoakShort is the CI-sized cluster soak: 60 messages over the
// three platforms, a SIGKILL of one of the three processes every 3-6 s.
func TestClusterSoakShort(t *testing.T) {
	if os.Getenv("OPENBOT_SOAK") != "" {
		t.Skip("the full soak runs instead")
	}
	runClusterSoak(t, clusterSoakParams{messages: 60, rate: 4, minGap: 3 * time.Second, maxGap: 6 * time.Second,
		seed: uint64(envInt(t, "OPENBOT_SOAK_SEED", int(time.Now().UnixNano()))), drain: 60 * time.Second})
}

// TestClusterSoak is the full cluster soak, run only with OPENBOT_SOAK set.
func TestClusterSoak(t *testing.T) {
	if os.Getenv("OPENBOT_SOAK") == "" {
		t.Skip("set OPENBOT_SOAK=1 to run the full cluster kill soak (about ten minutes)")
	}
	runClusterSoak(t, clusterSoakParams{messages: envInt(t, "OPENBOT_SOAK_MESSAGES", 3000), rate: float64(envInt(t, "OPENBOT_SOAK_RATE", 6)),
		minGap: 10 * time.Second, maxGap: 20 * time.Second,
		seed: uint64(envInt(t, "OPENBOT_SOAK_SEED", int(time.Now().UnixNano()))), drain: 10 * time.Minute})
}

func runClusterSoak(t *testing.T, p clusterSoakParams) {
	if testing.Short() {
		t.Skip("the cluster soak runs the openbot binary three times")
	}
	dsn := pgtest.DSN(t)
	began := time.Now()
	lat := func() time.Duration { return time.Duration(100+rand.IntN(400)) * time.Millisecond }
	led := newLedger(t, lat)
	sl := newSlackChat(t)
	fs := newFeishuChat(t)
	x := newSoakRig(t, soakConfig{maxRuns: 8, streaming: true, tools: []string{"ledger"},
		calls: func(n string) []openaitest.ToolCall {
			return []openaitest.ToolCall{openaitest.Call("ledger__charge", fmt.Sprintf(`{"ref":"soak-%s"}`, n))}
		},
		extra: sl.config() + fs.config() + led.config()}, lat)
	x.addChat(sl)
	x.addChat(fs)
	c := newCluster(t, x, dsn)
	ids := []string{"p1", "p2", "p3"}
	for _, id := range ids {
		c.start(id)
	}
	rng := rand.New(rand.NewPCG(p.seed, 1))
	window := time.Duration(float64(p.messages) / p.rate * float64(time.Second))
	t.Logf("cluster soak: %d messages at %.1f/s over %s on Telegram, Slack and Feishu, a kill every %s-%s, seed %d",
		p.messages, p.rate, window, p.minGap, p.maxGap, p.seed)

	begin := time.Now()
	sent, quit := x.sendPaced(begin, p.messages, p.rate)
	defer func() { close(quit); <-sent }()
	kills := 0
	gap := func() time.Duration { return p.minGap + time.Duration(rng.Int64N(int64(p.maxGap-p.minGap))) }
	for at := gap(); at < window; at += gap() {
		time.Sleep(time.Until(begin.Add(at))) // the soak's kill schedule is wall-clock time by design
		victim := ids[rng.IntN(len(ids))]
		c.signal(victim, syscall.SIGKILL)
		kills++
		if kills%5 == 1 {
			t.Logf("kill %d (%s) at %s: %s", kills, victim, at.Round(time.Second), x.tally(x.outcomes(p.messages)))
		}
		time.Sleep(time.Duration(rng.Int64N(int64(200 * time.Millisecond)))) // a random downtime, as a supervisor's restart has
		c.start(victim)
	}
	<-sent
	ctx, cancel := context.WithTimeout(context.Background(), p.drain)
	defer cancel()
	unacked := sl.waitAcked(ctx) + fs.waitAcked(ctx)
	settled := x.waitSettled(ctx, p.messages)
	// A duplicate shows only after a lapsed claim is taken over (the lease TTL),
	// and no event says "none will come": wait for the store to go idle, then
	// two TTLs more.
	ictx, icancel := context.WithTimeout(context.Background(), time.Minute)
	defer icancel()
	busy := waitClusterIdle(ictx, t, dsn)
	time.Sleep(2 * clusterLeaseTTL) // a late duplicate's window: no event says none will come
	took := time.Since(began)
	outs := x.outcomes(p.messages)
	s := x.tally(outs)
	charged, cut, twice := led.counts(p.messages)
	shown, lost := 0, map[string]int{}
	for i, o := range outs {
		if (o.answers != 1 || o.notices > 0) && shown < 20 {
			shown++
			t.Logf("cluster soak: message %d: conversation holds %q", i, x.chat(i))
		}
		if o.answers == 0 && o.notices == 0 {
			lost[[]string{"telegram", "slack", "feishu"}[i%3]]++
			if lost[[]string{"telegram", "slack", "feishu"}[i%3]] <= 3 {
				t.Logf("cluster soak: message %d: the calls about its conversation: %q", i, x.chatOf(i).history(i))
			}
		}
	}
	if len(lost) > 0 {
		t.Logf("cluster soak: unanswered by platform: %v", lost)
	}
	t.Logf("cluster soak: %s; %d kills; ledger: %d messages charged, %d calls cut by a kill, %d charged twice; redelivered by the platform: %d on Slack, %d on Feishu; wall time %s",
		s, kills, charged, cut, len(twice), sl.redelivered.Load(), fs.redelivered.Load(), took.Round(time.Second))
	if unacked > 0 {
		t.Errorf("%d messages were never acknowledged by any process", unacked)
	}
	if !settled {
		t.Errorf("not every message was answered within %s\n%s", p.drain, c.logs())
	}
	if s.Lost != 0 || s.Duplicated != s.InWindow {
		t.Errorf("cluster soak: %s; want none lost, none duplicated outside the kill-after-post window", s)
	}
	if busy != "" {
		t.Errorf("work left unfinished in the store after every message was answered: %s", busy)
	}
	for _, ref := range twice {
		t.Errorf("ledger__charge, not safe to repeat, ran more than once for %s", ref)
	}
}

// waitClusterIdle waits until the shared store has no queued or running run,
// no queued or processing inbox item and no pending delivery, and returns ""
// then, or what is left when ctx ends.
func waitClusterIdle(ctx context.Context, t *testing.T, dsn string) string {
	t.Helper()
	st, err := postgres.Open(ctx, dsn, postgres.Options{MaxConns: 2})
	if err != nil {
		return fmt.Sprintf("unknown: %v", err)
	}
	defer st.Close()
	for {
		var left []string
		err := st.View(ctx, func(tx core.ReadTx) error {
			for _, status := range []core.RunStatus{core.RunQueued, core.RunRunning} {
				runs, err := tx.RunsByStatus(status)
				if err != nil {
					return err
				}
				if len(runs) > 0 {
					left = append(left, fmt.Sprintf("%d runs %s", len(runs), status))
				}
			}
			for _, status := range []core.ItemStatus{core.ItemQueued, core.ItemProcessing} {
				items, err := tx.ItemsByStatus(status)
				if err != nil {
					return err
				}
				if len(items) > 0 {
					left = append(left, fmt.Sprintf("%d inbox items %s", len(items), status))
				}
			}
			out, err := tx.PendingOutbox(0, 100)
			if len(out) > 0 {
				left = append(left, fmt.Sprintf("%d deliveries pending", len(out)))
			}
			return err
		})
		if err != nil && ctx.Err() == nil {
			return fmt.Sprintf("unknown: reading the shared store: %v", err)
		}
		if err == nil && len(left) == 0 {
			return ""
		}
		select {
		case <-ctx.Done():
			return strings.Join(left, ", ")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ledger is a fake MCP server (streamable HTTP on 127.0.0.1) with one tool,
// charge, that counts its calls per ref as they start, then answers after
// latency, so kills land in the middle of calls. The config names it without
// idempotent: its calls are not safe to repeat.
type ledger struct {
	url     string
	latency func() time.Duration
	mu      sync.Mutex
	n       map[string]int
	cut     int // calls whose client went away before the answer
}

func newLedger(t *testing.T, latency func() time.Duration) *ledger {
	l := &ledger{n: map[string]int{}, latency: latency}
	s := server.NewMCPServer("soak-ledger", "1", server.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("charge", mcp.WithDescription("Charge the account once for ref; never safe to repeat."),
		mcp.WithString("ref", mcp.Required(), mcp.Description("what the charge is for"))),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ref := req.GetString("ref", "")
			l.mu.Lock()
			l.n[ref]++
			l.mu.Unlock()
			select {
			case <-time.After(l.latency()):
			case <-ctx.Done():
				l.mu.Lock()
				l.cut++
				l.mu.Unlock()
			}
			return mcp.NewToolResultText("charged " + ref), nil
		})
	srv := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(srv.Close)
	l.url = srv.URL + "/mcp"
	return l
}

func (l *ledger) config() string {
	return fmt.Sprintf("mcp_servers:\n  - name: ledger\n    url: %s\n", l.url)
}

// counts returns how many of messages [0, n) were charged, how many calls a
// kill cut, and the refs charged more than once.
func (l *ledger) counts(n int) (charged, cut int, twice []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cut = l.cut
	for i := range n {
		ref := fmt.Sprintf("soak-%d", i)
		if l.n[ref] > 0 {
			charged++
		}
		if l.n[ref] > 1 {
			twice = append(twice, fmt.Sprintf("%s (%d times)", ref, l.n[ref]))
		}
	}
	return charged, cut, twice
}

// pusher delivers events as a platform with at-least-once delivery does: it
// pushes each until a process acknowledges it as handled, pushing it again
// after redeliverAfter without such an ack. Its goroutines are owned by the test and
// joined by waitAcked or the cleanup.
type pusher struct {
	wg          sync.WaitGroup
	quit        chan struct{}
	unacked     atomic.Int32
	redelivered atomic.Int32
}

// redeliverAfter is how long a pusher waits for an ack before pushing again.
const redeliverAfter = 5 * time.Second

func newPusher(t *testing.T) *pusher {
	p := &pusher{quit: make(chan struct{})}
	t.Cleanup(func() { close(p.quit); p.wg.Wait() })
	return p
}

// deliver pushes with push until acked reports the ack of what it pushed.
func (p *pusher) deliver(push func(ctx context.Context, attempt int) (string, error), acked func(ctx context.Context, id string) error) {
	p.unacked.Add(1)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for attempt := 0; ; attempt++ {
			ctx, cancel := context.WithTimeout(context.Background(), redeliverAfter)
			go func() { // ends the wait when the test ends
				select {
				case <-p.quit:
					cancel()
				case <-ctx.Done():
				}
			}()
			id, err := push(ctx, attempt)
			if err == nil {
				err = acked(ctx, id)
			}
			if err == nil {
				cancel()
				p.unacked.Add(-1)
				return
			}
			<-ctx.Done() // no connection or no ack: wait out the period, as the platform does
			cancel()
			select {
			case <-p.quit:
				return
			default:
			}
			p.redelivered.Add(1)
		}
	}()
}

// waitAcked waits until every event pushed was acknowledged or ctx ends and
// returns how many were not.
func (p *pusher) waitAcked(ctx context.Context) int {
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }() // ends when the pushers do, which the cleanup bounds
	select {
	case <-done:
	case <-ctx.Done():
	}
	return int(p.unacked.Load())
}

// slackChat is the fake Slack in Socket Mode: message n is a DM in a channel
// of its own (D<n>).
type slackChat struct {
	*pusher
	fake *slacktest.Server
}

const (
	soakSlackApp  = "xapp-soak"
	soakSlackBot  = "xoxb-soak"
	soakSlackUser = "U0SOAK001"
)

func newSlackChat(t *testing.T) *slackChat {
	fake := slacktest.New(slacktest.Options{BotToken: soakSlackBot, AppToken: soakSlackApp})
	t.Cleanup(fake.Close)
	fake.AddUser(slacktest.User{ID: soakSlackUser, Name: "soak", RealName: "Soak Person"})
	return &slackChat{pusher: newPusher(t), fake: fake}
}

func (c *slackChat) config() string {
	return fmt.Sprintf(`slack:
  - name: soak
    bot: chief
    app_token: %s
    bot_token: %s
    api_url: %s
    dm_policy: open
    streaming: "off"
`, soakSlackApp, soakSlackBot, c.fake.APIURL())
}

func slackSoakChannel(n int) string { return fmt.Sprintf("D%08d", n) }

func (c *slackChat) send(n int) {
	ts := fmt.Sprintf("1767225800.%06d", n)
	text := fmt.Sprintf("please note soak-%d", n)
	payload, _ := json.Marshal(map[string]any{
		"token": "soak", "team_id": slacktest.DefaultTeam, "api_app_id": slacktest.DefaultAppID, "type": "event_callback",
		"event_id": fmt.Sprintf("Ev0SOAK%06d", n), "event_time": 1767225800,
		"event": map[string]any{"type": "message", "user": soakSlackUser, "ts": ts, "event_ts": ts, "text": text,
			"team": slacktest.DefaultTeam, "channel": slackSoakChannel(n), "channel_type": "im",
			"client_msg_id": fmt.Sprintf("soak-%08d", n)},
	})
	c.deliver(func(ctx context.Context, attempt int) (string, error) {
		env := fmt.Sprintf("soak-env-%d-%d", n, attempt)
		return env, c.fake.PushEnvelope(ctx, "events_api", env, payload, attempt)
	}, func(ctx context.Context, id string) error {
		_, err := c.fake.WaitAck(ctx, id)
		return err
	})
}

func (c *slackChat) posts() map[int][]string {
	out := map[int][]string{}
	for _, m := range c.fake.Messages() {
		var n int
		if _, err := fmt.Sscanf(m.Channel, "D%08d", &n); err == nil {
			out[n] = append(out[n], m.Text)
		}
	}
	return out
}

func (c *slackChat) history(n int) []string {
	var out []string
	for _, call := range c.fake.Calls() {
		if call.Form.Get("channel") == slackSoakChannel(n) {
			out = append(out, fmt.Sprintf("%s %s ts=%s %q", call.At.Format("15:04:05.000"), call.Method, call.Form.Get("ts"), call.Form.Get("text")))
		}
	}
	return out
}

func (c *slackChat) accepted(n int, want string) time.Time {
	for _, call := range c.fake.Calls() {
		if (call.Method == "chat.postMessage" || call.Method == "chat.update") &&
			call.Form.Get("channel") == slackSoakChannel(n) && strings.Contains(call.Form.Get("text"), want) {
			return call.At
		}
	}
	return time.Time{}
}

// feishuChat is the fake Feishu over its long connection: message n is a
// direct message in a p2p chat of its own.
type feishuChat struct {
	*pusher
	fake *feishutest.Server
}

func newFeishuChat(t *testing.T) *feishuChat {
	return &feishuChat{pusher: newPusher(t), fake: feishutest.New(t)}
}

func (c *feishuChat) config() string {
	return fmt.Sprintf(`feishu:
  - name: soak
    bot: chief
    app_id: %s
    app_secret: %s
    base_url: %s
    dm_policy: open
    streaming: "off"
`, feishutest.AppID, feishutest.AppSecret, c.fake.URL())
}

func feishuSoakMsg(n int) string  { return fmt.Sprintf("om_soak%08d", n) }
func feishuSoakChat(n int) string { return fmt.Sprintf("oc_soak%08d", n) }

func (c *feishuChat) send(n int) {
	ev := feishutest.MessageEvent{MessageID: feishuSoakMsg(n), ChatID: feishuSoakChat(n), ChatType: "p2p",
		Text: fmt.Sprintf("please note soak-%d", n)}.JSON()
	c.deliver(func(ctx context.Context, _ int) (string, error) {
		if err := c.fake.WaitConnections(ctx, 1); err != nil {
			return "", err
		}
		return c.fake.PushEvent(ctx, ev, 1)
	}, func(ctx context.Context, id string) error {
		ack, err := c.fake.WaitAck(ctx, id)
		if err == nil && ack.Code != 200 {
			<-ctx.Done() // code 500 asks for a redelivery: Feishu sends it again later
			return fmt.Errorf("acked with code %d", ack.Code)
		}
		return err
	})
}

// soakIndex returns n of a Feishu message of the soak: a reply to message n,
// or a message created in its chat.
func (c *feishuChat) soakIndex(m feishutest.Message) (int, bool) {
	var n int
	if _, err := fmt.Sscanf(m.ReplyTo, "om_soak%08d", &n); err == nil && m.Kind == "reply" {
		return n, true
	}
	if _, err := fmt.Sscanf(m.ReceiveID, "oc_soak%08d", &n); err == nil && m.Kind == "create" {
		return n, true
	}
	return 0, false
}

func (c *feishuChat) posts() map[int][]string {
	out := map[int][]string{}
	for _, m := range c.fake.Messages() {
		if n, ok := c.soakIndex(m); ok {
			out[n] = append(out[n], m.Content)
		}
	}
	return out
}

func (c *feishuChat) history(n int) []string {
	var out []string
	for _, call := range c.fake.Calls() {
		if strings.Contains(call.Path, feishuSoakMsg(n)) || strings.Contains(string(call.Body), feishuSoakChat(n)) {
			out = append(out, fmt.Sprintf("%s %s %s %s", call.At.Format("15:04:05.000"), call.Method, call.Path, call.Body))
		}
	}
	return out
}

func (c *feishuChat) accepted(n int, want string) time.Time {
	for _, call := range c.fake.Calls() {
		body := string(call.Body)
		if !strings.HasPrefix(call.Path, "/open-apis/im/v1/messages") || !strings.Contains(body, want) {
			continue
		}
		if strings.Contains(call.Path, feishuSoakMsg(n)) || strings.Contains(body, feishuSoakChat(n)) {
			return call.At
		}
	}
	return time.Time{}
}
