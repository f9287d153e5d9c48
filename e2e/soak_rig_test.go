package e2e

// The kill-soak rig (DESIGN.md §8, "no work lost to a restart"): the real
// openbot binary runs `serve` as a child process against the project's fake
// Telegram Bot API (telegramtest) and fake model (openaitest), both served by
// this test process on 127.0.0.1, and is sent SIGKILL at random moments and
// restarted on the same bbolt file. soak_test.go drives it.
//
// Every soak message goes to its own private chat (its own thread), so each
// answer is attributable to one message: messages of one thread that queue
// behind a run are coalesced into one answer by design (seed §4), which would
// blur a per-message count. The model answers each message in two steps, a
// workspace_write tool call and then a reply text naming the message, each
// after a latency, so kills land before, between and after the steps.
//
// The config uses sandbox: none, which is acceptable here because the soak
// bot has no shell tool: nothing runs a command.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"openbot/adapters/telegram/telegramtest"
	"openbot/agents/openaitest"
)

const (
	soakToken   = "700000:SOAK"
	soakBotID   = 700000
	soakUser0   = 300000000 // chat (= user) id of message 0; message i uses soakUser0+i
	soakStopFor = 20 * time.Second
)

var soakMarkerRe = regexp.MustCompile(`soak-(\d+)`)

// soakAnswer is the full reply text for message n; a streamed partial or a
// notice never contains it.
func soakAnswer(n int) string { return fmt.Sprintf("Answer for soak-%d: noted and done.", n) }

// soakRig owns the fakes, the binary and the running child.
type soakRig struct {
	t       testing.TB
	dir     string
	bin     string
	cfg     string
	tg      *telegramtest.Server
	llm     *openaitest.Server
	latency func() time.Duration // of each model call
	conf    soakConfig
	// chats are the platforms messages arrive on: message n on chats[n%len];
	// Telegram (tg) alone unless a test adds more (addChat).
	chats []soakChat

	mu      sync.Mutex
	child   *child
	hold    chan struct{} // non-nil: second model calls wait on it
	held    atomic.Int32  // second model calls that arrived while holding
	heldOne chan struct{} // signalled after each held call
	starts  int
	kills   []time.Time // when each SIGKILL was sent
	nextMsg int64
}

// soakConfig is what the rig's config file says.
type soakConfig struct {
	maxRuns   int  // limits.max_concurrent_runs and the bot's max_parallel_threads
	streaming bool // the Telegram account's streaming
	// tools are more of the bot's tools, beside workspace_write; calls gives the
	// calls of them the model makes with its workspace_write call for message n.
	tools []string
	calls func(n string) []openaitest.ToolCall
	// extra is YAML appended to the config: more accounts, mcp_servers.
	extra string
}

// soakChat is one platform the soak's messages arrive on, each message in a
// conversation of its own.
type soakChat interface {
	// send delivers message n, "please note soak-<n>", as a person does.
	send(n int)
	// posts returns the texts of the bot's messages now, in send order, by
	// the message whose conversation holds them.
	posts() map[int][]string
	// accepted returns when the platform first accepted a bot message
	// (a post or an edit) whose text holds want in message n's
	// conversation; zero when none did.
	accepted(n int, want string) time.Time
	// history lists the bot's calls to the platform about message n's
	// conversation, oldest first, for a failure's report.
	history(n int) []string
}

// newSoakRig builds the openbot binary, starts the fakes and writes the config;
// the child is started by start.
func newSoakRig(t testing.TB, c soakConfig, latency func() time.Duration) *soakRig {
	t.Helper()
	if testing.Short() {
		t.Skip("the kill soak builds and runs the openbot binary")
	}
	dir := t.TempDir()
	x := &soakRig{t: t, dir: dir, bin: buildOpenbot(t), latency: latency, conf: c, nextMsg: 1, heldOne: make(chan struct{}, 1)}
	x.tg = telegramtest.NewServer(telegramtest.Bot{Token: soakToken, ID: soakBotID, Username: "openbot_soak_bot", Name: "Soak"})
	t.Cleanup(x.tg.Close)
	x.chats = []soakChat{tgChat{x}}
	x.llm = openaitest.New(t)
	x.llm.Handle(x.model)
	t.Cleanup(x.killChild) // registered after the fakes: runs before they close
	stream := "off"
	if c.streaming {
		stream = "on"
	}
	cfg := fmt.Sprintf(`http:
  listen: 127.0.0.1:0
store:
  path: %s
workspace: %s
sandbox: none
limits:
  max_concurrent_runs: %d
  run_timeout: 2m
llm:
  default:
    base_url: %s
    api_key: soak-key
    model: soak-model
    request_timeout: 1m
bots:
  - handle: chief
    name: Chief
    instructions: Write a note with workspace_write, then answer.
    tools: [%s]
    max_parallel_threads: %d
telegram:
  - name: chief
    bot: chief
    token: %s
    api_endpoint: %s
    dm_policy: open
    streaming: %s
%s`, filepath.Join(dir, "data", "openbot.db"), filepath.Join(dir, "ws"), c.maxRuns, x.llm.URL(),
		strings.Join(append([]string{"workspace_write"}, c.tools...), ", "), c.maxRuns, soakToken, x.tg.URL(), stream, c.extra)
	x.cfg = filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(x.cfg, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return x
}

// model is the fake model: a workspace_write call first, then (after the tool
// result) the message's answer; each after the rig's latency, or, for the
// answer while holding, not until the hold is released or the client is gone.
func (x *soakRig) model(req openaitest.Request) openaitest.Reply {
	n := "?"
	for _, m := range req.Body.Messages {
		if m.Role == "user" {
			if s := soakMarkerRe.FindStringSubmatch(m.Content); s != nil {
				n = s[1]
			}
		}
	}
	msgs := req.Body.Messages
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != "tool" {
		args := fmt.Sprintf(`{"path":"soak-%s.txt","content":"note %s"}`, n, n)
		calls := []openaitest.ToolCall{openaitest.Call("workspace_write", args)}
		if x.conf.calls != nil {
			calls = append(calls, x.conf.calls(n)...)
		}
		return openaitest.Reply{ToolCalls: calls, Wait: x.after()}
	}
	text := fmt.Sprintf("Answer for soak-%s: noted and done.", n)
	x.mu.Lock()
	hold := x.hold
	x.mu.Unlock()
	if hold != nil {
		x.held.Add(1)
		select {
		case x.heldOne <- struct{}{}:
		default: // a signal is pending already; the waiter rereads held
		}
		return openaitest.Reply{Text: text, Wait: hold}
	}
	return openaitest.Reply{Text: text, Wait: x.after()}
}

func (x *soakRig) after() <-chan struct{} {
	ch := make(chan struct{})
	time.AfterFunc(x.latency(), func() { close(ch) })
	return ch
}

// holdAnswers makes every later answer call wait until releaseAnswers.
func (x *soakRig) holdAnswers() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.hold = make(chan struct{})
	x.held.Store(0)
}

func (x *soakRig) releaseAnswers() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.hold != nil {
		close(x.hold)
		x.hold = nil
	}
}

// start runs `openbot serve` on the rig's config; its output is appended to
// serve.log in the rig's directory.
func (x *soakRig) start() {
	x.t.Helper()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.child != nil {
		x.t.Fatal("soak: start with a child running")
	}
	log := filepath.Join(x.dir, "serve.log")
	x.starts++
	mark := fmt.Sprintf("---- start %d at %s\n", x.starts, time.Now().Format(time.RFC3339Nano))
	if err := appendFile(log, mark); err != nil {
		x.t.Fatal(err)
	}
	x.child = startServe(x.t, x.bin, x.cfg, "warn", log)
}

// appendFile appends s to the file at path, creating it.
func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// kill sends SIGKILL to the child and waits for it to be gone.
func (x *soakRig) kill() { x.signal(syscall.SIGKILL) }

// stop asks the child to shut down (SIGTERM) and waits, SIGKILL after soakStopFor.
func (x *soakRig) stop() { x.signal(syscall.SIGTERM) }

func (x *soakRig) killChild() { x.signal(syscall.SIGKILL) }

func (x *soakRig) signal(sig syscall.Signal) {
	x.mu.Lock()
	c := x.child
	x.child = nil
	x.mu.Unlock()
	if c == nil {
		return
	}
	if sig == syscall.SIGKILL {
		x.mu.Lock()
		x.kills = append(x.kills, time.Now())
		x.mu.Unlock()
	}
	c.signal(sig)
}

// send delivers message n ("please note soak-<n>") on its platform, each in
// a conversation of its own. Safe to call from any goroutine.
func (x *soakRig) send(n int) { x.chatOf(n).send(n) }

// sendPaced sends messages 0 to n-1 at rate a second from begin, in a
// goroutine the caller owns: it stops early when quit is closed, and sent is
// closed when it returns.
func (x *soakRig) sendPaced(begin time.Time, n int, rate float64) (sent, quit chan struct{}) {
	sent, quit = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sent)
		every := time.Duration(float64(time.Second) / rate)
		for i := range n {
			select {
			case <-time.After(time.Until(begin.Add(time.Duration(i) * every))):
			case <-quit:
				return
			}
			x.send(i)
		}
	}()
	return sent, quit
}

// addChat adds a platform messages arrive on (message n goes to the
// chats[n%len(chats)]); call it before the first send.
func (x *soakRig) addChat(c soakChat) { x.chats = append(x.chats, c) }

func (x *soakRig) chatOf(n int) soakChat { return x.chats[n%len(x.chats)] }

// tgChat is the rig's Telegram: message n comes from user soakUser0+n in
// their private chat.
type tgChat struct{ x *soakRig }

func (c tgChat) send(n int) {
	x := c.x
	x.mu.Lock()
	id := x.nextMsg
	x.nextMsg++
	x.mu.Unlock()
	user := soakUser0 + n
	upd := fmt.Sprintf(`{"message":{"message_id":%d,"from":{"id":%d,"is_bot":false,"first_name":"User %d"},`+
		`"chat":{"id":%d,"type":"private","first_name":"User %d"},"date":%d,"text":"please note soak-%d"}}`,
		id, user, n, user, n, time.Now().Unix(), n)
	if _, err := x.tg.PushUpdate(soakToken, []byte(upd)); err != nil {
		x.t.Errorf("soak: push message %d: %v", n, err)
	}
}

// soakOutcome is what the chat of one message holds.
type soakOutcome struct {
	answers int // full answers (soakAnswer)
	notices int // "interrupted" or "could not finish" notices
	strays  int // any other bot message: a streamed partial or work line a kill left
}

// outcomes reads the fake's chats for messages [0, n).
func (x *soakRig) outcomes(n int) []soakOutcome {
	out := make([]soakOutcome, n)
	for _, c := range x.chats {
		for i, texts := range c.posts() {
			if i < 0 || i >= n {
				continue
			}
			for _, text := range texts {
				switch {
				case strings.Contains(text, soakAnswer(i)):
					out[i].answers++
				case strings.Contains(text, "interrupted") || strings.Contains(text, "could not finish"):
					out[i].notices++
				default:
					out[i].strays++
				}
			}
		}
	}
	return out
}

// chat returns the texts the bot has in the conversation of message i, in
// send order.
func (x *soakRig) chat(i int) []string { return x.chatOf(i).posts()[i] }

func (c tgChat) posts() map[int][]string {
	out := map[int][]string{}
	for _, m := range c.x.tg.Messages(soakToken) {
		i := int(m.Chat - soakUser0)
		out[i] = append(out[i], m.Text)
	}
	return out
}

func (c tgChat) history(n int) []string {
	var out []string
	for _, call := range c.x.tg.Calls() {
		if call.Params["chat_id"] == fmt.Sprint(soakUser0+n) {
			out = append(out, fmt.Sprintf("%s %s message_id=%s %q", call.At.Format("15:04:05.000"), call.Method, call.Params["message_id"], call.Params["text"]))
		}
	}
	return out
}

func (c tgChat) accepted(n int, want string) time.Time {
	for _, call := range c.x.tg.Calls("sendMessage", "editMessageText") {
		if call.Params["chat_id"] == fmt.Sprint(soakUser0+n) && strings.Contains(call.Params["text"], want) {
			return call.At
		}
	}
	return time.Time{}
}

// waitSettled waits until every message [0, n) has an answer or a notice, or
// ctx is done; it reports whether all settled.
func (x *soakRig) waitSettled(ctx context.Context, n int) bool {
	for {
		done := true
		for _, o := range x.outcomes(n) {
			if o.answers == 0 && o.notices == 0 {
				done = false
				break
			}
		}
		if done {
			return true
		}
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, _ = x.tg.WaitCalls(wctx, "sendMessage", len(x.tg.Calls("sendMessage"))+1)
		cancel()
		if ctx.Err() != nil {
			return false
		}
	}
}

// dupWindow bounds the design's window for a duplicate (DESIGN.md §8: the
// platform accepted a post and the kill came before the store recorded it):
// a loopback call and one bbolt commit, with a wide margin for a loaded machine.
const dupWindow = 500 * time.Millisecond

// inWindow reports whether the first copy of message i's answer that the
// platform accepted (a post, or an edit of a streamed message) was followed by
// a SIGKILL within dupWindow, the one case the design allows a second copy.
func (x *soakRig) inWindow(i int) bool {
	first := x.chatOf(i).accepted(i, soakAnswer(i))
	if first.IsZero() {
		return false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, k := range x.kills {
		if !k.Before(first) && k.Sub(first) <= dupWindow {
			return true
		}
	}
	return false
}

// soakTally is the per-message count of a soak.
type soakTally struct {
	Sent, Answered, NoticeOnly, Lost, Duplicated, Strays int
	// NoticeToo counts answered messages whose chat also got a notice.
	NoticeToo int
	// InWindow counts the duplicated messages inWindow explains.
	InWindow int
}

// tally counts per message; x classifies the duplicates.
func (x *soakRig) tally(outs []soakOutcome) soakTally {
	s := soakTally{Sent: len(outs)}
	for i, o := range outs {
		switch {
		case o.answers > 1:
			s.Duplicated++
			if x.inWindow(i) {
				s.InWindow++
			}
		case o.answers == 1:
			s.Answered++
			if o.notices > 0 {
				s.NoticeToo++
			}
		case o.notices > 0:
			s.NoticeOnly++
		default:
			s.Lost++
		}
		s.Strays += o.strays
	}
	return s
}

func (s soakTally) String() string {
	pct := func(k int) float64 { return 100 * float64(k) / float64(max(1, s.Sent)) }
	return fmt.Sprintf("sent %d: answered %d (%.1f%%; %d of them after a notice), notice only %d (%.1f%%), lost %d, duplicated %d (%d of them in the kill-after-post window); stray partial messages %d",
		s.Sent, s.Answered, pct(s.Answered), s.NoticeToo, s.NoticeOnly, pct(s.NoticeOnly), s.Lost, s.Duplicated, s.InWindow, s.Strays)
}

// logTail returns the last bytes of the children's output, for failures.
func (x *soakRig) logTail() string {
	data, _ := os.ReadFile(filepath.Join(x.dir, "serve.log"))
	if len(data) > 6000 {
		data = data[len(data)-6000:]
	}
	return string(data)
}

// grepLog counts the occurrences of s in the children's output.
func (x *soakRig) grepLog(s string) int {
	f, err := os.Open(filepath.Join(x.dir, "serve.log"))
	if err != nil {
		return 0
	}
	defer f.Close()
	data, _ := io.ReadAll(f)
	return bytes.Count(data, []byte(s))
}

// logLines returns up to limit lines of the children's output containing s.
func (x *soakRig) logLines(s string, limit int) []string {
	data, _ := os.ReadFile(filepath.Join(x.dir, "serve.log"))
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, s) && len(out) < limit {
			out = append(out, l)
		}
	}
	return out
}
