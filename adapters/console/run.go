package console

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/oklog/ulid/v2"

	"openbot/core"
)

// maxLine is the longest line Run accepts (1 MiB); a longer line is refused with a
// notice and reading goes on.
const maxLine = 1 << 20

// threadsShown is how many threads /threads lists at most.
const threadsShown = 50

const help = `commands:
  /new              the next message starts a new thread
  /stop             stop the bots' work in this thread (approvers, or who asked for it)
  /compact          summarise the older part of this thread for its bot now
  /threads          list console threads (* marks the current one)
  /switch N         send following messages to thread N
  /approve [N]      approve question N (default: the only approval waiting in this thread)
  /reject [N]       reject question N (same default)
  /answer [N] TEXT  answer question N (a choice's number or text, or free text;
                    default: the only question waiting in this thread)
  /questions        list the questions waiting for your answer
  /usage            tokens and cost of this thread and its bot, with budgets left
  /quit, /exit      leave
  /help             this text
Messages go to the thread's default bot; write @handle to address another bot.
Start a message with "//" to send a line that begins with "/".`

type line struct {
	text    string
	tooLong bool
	eof     bool
	err     error
}

// readLine reads one line without its end of line; a line longer than maxLine is
// read to its end and discarded (tooLong). io.EOF comes with the last partial line.
func readLine(r *bufio.Reader) (text string, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(buf)+len(chunk) > maxLine {
			tooLong = true
			buf = buf[:0]
		} else {
			buf = append(buf, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if tooLong {
			return "", true, err
		}
		return strings.TrimRight(string(buf), "\r\n"), false, err
	}
}

// Run reads In line by line until EOF, /quit or ctx is done, and returns nil in each
// case; it returns an error only when reading fails. A plain line is ingested as a
// message from "console:you"; lines starting with "/" are commands (see /help).
//
// Reading happens in a goroutine owned by Run. A read from a terminal cannot be
// interrupted, so when ctx ends first Run returns at once and that goroutine exits
// when the reader next returns (at the latest when the process ends).
func (a *Adapter) Run(ctx context.Context) error {
	lines := make(chan line)
	done := make(chan struct{})
	defer close(done)
	go func() {
		r := bufio.NewReaderSize(a.in, 64*1024)
		for {
			text, tooLong, err := readLine(r)
			if err == nil || (err == io.EOF && text != "") {
				l := line{text: text}
				if tooLong {
					l = line{tooLong: true}
				}
				select {
				case lines <- l:
				case <-done:
					return
				}
			}
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				select {
				case lines <- line{eof: true, err: err}:
				case <-done:
				}
				return
			}
		}
	}()

	if a.interactive {
		greeting := "openbot console: type a message (@handle addresses a bot), /help for commands"
		if a.logPath != "" {
			greeting += "; the log is in " + a.logPath
		}
		a.notice("%s", greeting)
	}
	a.resumeThread(ctx)
	if a.interactive {
		if id := a.currentThread(); id != 0 {
			a.notice("messages go to thread #%d, the last one here (/new starts another, /threads lists them)", id)
		}
	}
	a.listQuestions(ctx, true) // questions still open from before a restart
	for n := 0; ; n++ {
		var l line
		select {
		case <-ctx.Done():
			return nil
		case l = <-lines:
		}
		if l.err != nil {
			return fmt.Errorf("read: %w", l.err)
		}
		if l.eof {
			if a.settle != nil && a.settle(ctx) == nil {
				// Scripted input ran out: say what is still open, so it is not lost.
				a.printQuestions(ctx, true, "input ended; still waiting for an answer (start openbot chat again to answer):")
			}
			return nil
		}
		if l.tooLong {
			a.notice("line not sent: longer than %d bytes", maxLine)
			continue
		}
		if n > 0 && a.settle != nil {
			if err := a.settle(ctx); err != nil {
				return nil // ctx is done
			}
		}
		if quit := a.handle(ctx, l.text); quit {
			return nil
		}
	}
}

// handle runs one input line and reports whether the user asked to quit.
func (a *Adapter) handle(ctx context.Context, text string) (quit bool) {
	text = strings.TrimSpace(text)
	if text == "" {
		return false
	}
	if !strings.HasPrefix(text, "/") || strings.HasPrefix(text, "//") {
		a.send(ctx, strings.TrimPrefix(text, "/"))
		return false
	}
	cmd, arg, _ := strings.Cut(text, " ")
	arg = strings.TrimSpace(arg)
	switch cmd {
	case "/quit", "/exit":
		return true
	case "/help":
		a.notice("%s", help)
	case "/new":
		a.mu.Lock()
		a.fresh, a.target, a.current = true, 0, 0
		a.mu.Unlock()
		a.setPendingNew(ctx, true)
		a.notice("your next message starts a new thread")
	case "/stop":
		a.stop(ctx)
	case "/compact":
		a.send(ctx, text) // the thread's bot compacts when a message is only /compact
	case "/threads":
		a.listThreads(ctx)
	case "/approve", "/reject", "/answer":
		a.answer(ctx, cmd, arg)
	case "/questions":
		a.listQuestions(ctx, false)
	case "/usage":
		a.usage(ctx)
	case "/switch":
		n, err := strconv.ParseUint(arg, 10, 64)
		if err != nil || n == 0 {
			a.notice("usage: /switch N, with N a thread id from /threads")
			return false
		}
		if !a.threadExists(ctx, core.ThreadID(n)) {
			a.notice("there is no thread #%d; /threads lists them", n)
			return false
		}
		a.mu.Lock()
		a.fresh, a.target, a.current = false, core.ThreadID(n), core.ThreadID(n)
		a.mu.Unlock()
		a.setPendingNew(ctx, false)
		a.notice("following messages go to thread #%d", n)
	default:
		a.notice("unknown command %s; /help lists the commands", cmd)
	}
	return false
}

// resumeThread makes the thread this console's key is bound to the current one,
// so after a restart /threads marks it and /approve finds its questions; a
// /new stored before the restart makes the next message start a new thread
// instead. A failure leaves no current thread; the next message finds it anyway.
func (a *Adapter) resumeThread(ctx context.Context) {
	if a.pendingNew(ctx) {
		a.mu.Lock()
		if a.current == 0 && a.target == 0 {
			a.fresh = true
		}
		a.mu.Unlock()
		return
	}
	id, err := a.engine.ThreadByKey(ctx, a.ThreadKey())
	if err != nil {
		a.log.Warn("console: current thread", "err", err)
		return
	}
	a.mu.Lock()
	if a.current == 0 && !a.fresh && a.target == 0 {
		a.current = id
	}
	a.mu.Unlock()
}

// currentThread is the thread the next message goes to, 0 when it starts one.
func (a *Adapter) currentThread() core.ThreadID {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fresh {
		return 0
	}
	return a.current
}

// send ingests one message. Failures are shown in the terminal, not returned: the
// person can simply type again.
func (a *Adapter) send(ctx context.Context, text string) {
	id := ulid.Make().String()
	a.mu.Lock()
	in := core.Inbound{
		Account:      a.account,
		Platform:     Platform,
		DedupKey:     "console:" + id,
		ThreadKey:    a.ThreadKey(),
		Conversation: Conversation,
		PlatformID:   id,
		SenderID:     Human,
		SenderName:   "you",
		Text:         text,
		StartThread:  true,
		NewThread:    a.fresh,
		Thread:       a.target,
		Received:     a.now(),
	}
	a.mu.Unlock()

	res, err := a.engine.Ingest(ctx, in)
	if err != nil {
		if errors.Is(err, context.Canceled) || ctx.Err() != nil {
			return
		}
		a.log.Warn("console ingest failed", "err", err)
		a.notice("message not sent: %v", err)
		return
	}
	a.mu.Lock()
	a.fresh = false
	a.current = res.Thread
	a.mu.Unlock()
	if in.NewThread {
		a.setPendingNew(ctx, false)
	}
	if res.Dropped {
		a.notice("message not routed to any bot")
	}
}

// listThreads prints the threads bound to console conversations, newest first.
func (a *Adapter) listThreads(ctx context.Context) {
	ts, err := a.engine.Threads(ctx, threadsShown)
	if err != nil {
		a.notice("cannot list threads: %v", err)
		return
	}
	a.mu.Lock()
	current := a.current
	a.mu.Unlock()
	var b strings.Builder
	n := 0
	for _, t := range ts {
		if !a.bound(t) {
			continue
		}
		n++
		mark := " "
		if t.ID == current {
			mark = "*"
		}
		title, _, _ := strings.Cut(strings.TrimSpace(t.Title), "\n")
		if title == "" {
			title = "(untitled)"
		}
		fmt.Fprintf(&b, "\n %s #%d  %s", mark, t.ID, title)
	}
	if n == 0 {
		a.notice("no threads yet; type a message to start one")
		return
	}
	a.notice("threads:%s", b.String())
}

// threadExists reports whether the engine knows thread id (errors count as yes, so
// the message itself reports them).
func (a *Adapter) threadExists(ctx context.Context, id core.ThreadID) bool {
	ts, err := a.engine.Threads(ctx, 0)
	if err != nil {
		return true
	}
	for _, t := range ts {
		if t.ID == id {
			return true
		}
	}
	return false
}

// bound reports whether a thread mirrors to this console account.
func (a *Adapter) bound(t core.Thread) bool {
	for _, b := range t.Bindings {
		if b.Platform != Platform {
			continue
		}
		for _, acc := range b.Accounts {
			if acc == a.account {
				return true
			}
		}
	}
	return false
}

// pendingNewName is the cursor that keeps a bare /new of this console.
func (a *Adapter) pendingNewName() string { return "console/" + a.name + "/new" }

// pendingNew reports whether a /new stored before a restart waits for the next
// message. A read failure is logged and counts as no.
func (a *Adapter) pendingNew(ctx context.Context) bool {
	if a.cursors == nil {
		return false
	}
	on, err := core.Flag(ctx, a.cursors, a.pendingNewName())
	if err != nil {
		a.log.Warn("console: read pending /new", "err", err)
	}
	return on
}

// setPendingNew stores (on) or clears the pending /new. A failure is shown: the
// /new still holds until this chat ends, only a restart would forget it.
func (a *Adapter) setPendingNew(ctx context.Context, on bool) {
	if a.cursors == nil {
		return
	}
	if err := core.SetFlag(ctx, a.cursors, a.pendingNewName(), on); err != nil && ctx.Err() == nil {
		a.log.Warn("console: store pending /new", "err", err)
		if on {
			a.notice("could not store /new (%v): it holds until this chat ends", err)
		}
	}
}
