package core

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"openbot/internal/waitctx"
)

// FileLimits configure inbound files (Options.Files). Zero values take defaults.
type FileLimits struct {
	// Dir returns the directory of a thread's workspace; inbound files go to
	// Dir(thread)/inbox/<message>/<name>. Nil: inbound files are noted, not saved.
	// Its parent is trusted; it and everything in it is not (ErrWorkspaceLink:
	// a link there, or an inbox/<message> or file that already exists, is
	// refused and the file noted as not saved).
	Dir func(ThreadID) string
	// MaxFileBytes caps one file (default 20 MiB); MaxMessageBytes caps the
	// files of one message together (default 50 MiB).
	MaxFileBytes    int64
	MaxMessageBytes int64
	// Workers is how many downloads run at once (default 2); Queue bounds the
	// messages waiting (default 256): a full queue leaves a message waiting for the
	// scheduler's next look, never blocking ingest.
	Workers int
	Queue   int
	// Tries is how many attempts a download gets (default 3), each bounded by
	// Timeout (default 2 minutes).
	Tries   int
	Timeout time.Duration
	// Backoff is the wait before the second attempt (default 1s), doubling after.
	Backoff time.Duration
	// Transcribe, when set, turns a saved voice note or audio file (its name
	// and contents, read from the workspace) into text appended to the message;
	// it is bounded by Timeout and its failure only leaves the transcript out.
	Transcribe func(ctx context.Context, name string, audio io.Reader) (string, error)
}

func (l FileLimits) withDefaults() FileLimits {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = 20 << 20
	}
	if l.MaxMessageBytes <= 0 {
		l.MaxMessageBytes = 50 << 20
	}
	if l.Workers <= 0 {
		l.Workers = 2
	}
	if l.Queue <= 0 {
		l.Queue = 256
	}
	if l.Tries <= 0 {
		l.Tries = 3
	}
	if l.Backoff <= 0 {
		l.Backoff = time.Second
	}
	if l.Timeout <= 0 {
		l.Timeout = 2 * time.Minute
	}
	return l
}

// fileQueue downloads the attachments of ingested messages after the durable
// ingest (the platform is acknowledged first): a bounded queue of message ids,
// a fixed set of workers owned by Engine.Run, retries with backoff. A message with
// pending attachments is not picked for a run until they settle; everything else
// flows past it.
type fileQueue struct {
	e      *Engine
	lim    FileLimits
	ch     chan MessageID
	mu     sync.Mutex
	queued map[MessageID]bool
}

func newFileQueue(e *Engine, lim FileLimits) *fileQueue {
	lim = lim.withDefaults()
	return &fileQueue{e: e, lim: lim, ch: make(chan MessageID, lim.Queue), queued: map[MessageID]bool{}}
}

// enqueue offers message id for download without blocking; a message already
// queued or in flight is not queued twice.
func (q *fileQueue) enqueue(id MessageID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queued[id] {
		return
	}
	select {
	case q.ch <- id:
		q.queued[id] = true
	default: // full: the scheduler offers it again on its next look
	}
}

// busy reports whether downloads are queued or in flight.
func (q *fileQueue) busy() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queued) > 0
}

// run starts the workers and returns when ctx is done and they have stopped.
func (q *fileQueue) run(ctx context.Context) {
	var wg sync.WaitGroup
	for range q.lim.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case id := <-q.ch:
					q.download(ctx, id)
					q.mu.Lock()
					delete(q.queued, id)
					q.mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
}

// pendingTx reports whether item it is a message whose attachments are not
// settled yet, and offers such a message to the download queue (which also
// resumes downloads interrupted by a restart).
func (q *fileQueue) pendingTx(tx ReadTx, it InboxItem) bool {
	if it.Kind != ItemMessage {
		return false
	}
	m, err := tx.Message(it.Message)
	if err != nil || !hasPending(m) {
		return false
	}
	q.enqueue(m.ID)
	return true
}

func hasPending(m Message) bool {
	for _, a := range m.Attachments {
		if a.Pending() {
			return true
		}
	}
	return false
}

// errTooLarge marks a body that exceeded its cap while being read.
var errTooLarge = errors.New("too large")

// refusedNote is the Error of an attachment whose save was refused because an
// entry on its way in the workspace was a link or already existed.
const refusedNote = "the inbox path in the workspace is a link or already exists"

// download settles every pending attachment of message id, stores the result
// with the message's attachment lines, and wakes the bots.
func (q *fileQueue) download(ctx context.Context, id MessageID) {
	var m Message
	if err := q.e.store.View(ctx, func(tx ReadTx) error {
		var err error
		m, err = tx.Message(id)
		return err
	}); err != nil || !hasPending(m) {
		return
	}
	var used int64
	for _, a := range m.Attachments {
		if a.Path != "" {
			used += a.Size
		}
	}
	ff, ferr := q.fetcher(m)
	var dir *inboxDir // made for the first file fetched
	var dirErr error
	stored := false
	defer func() {
		if dir != nil {
			dir.close(stored)
		}
	}()
	out := append([]Attachment(nil), m.Attachments...)
	var unsaved []string // "name (why)" of each file this pass could not save
	defer func() {
		if len(unsaved) > 0 {
			q.e.log.Info("attachments not saved", "message", m.ID, "thread", m.Thread, "files", strings.Join(unsaved, "; "))
		}
	}()
	for i := range out {
		a := &out[i]
		if !a.Pending() {
			continue
		}
		left := min(q.lim.MaxFileBytes, q.lim.MaxMessageBytes-used)
		switch {
		case a.Size > q.lim.MaxFileBytes:
			a.Error = fmt.Sprintf("too large (limit %s per file)", HumanSize(q.lim.MaxFileBytes))
			continue
		case a.Size > left:
			a.Error = fmt.Sprintf("too large (limit %s per message)", HumanSize(q.lim.MaxMessageBytes))
			continue
		}
		a.Name = SafeFileName(a.Name, "file") // made safe at ingest already; a file name, never a path
		src, serr := ff, ferr
		if a.Data != nil && q.lim.Dir != nil {
			src, serr = inlineFile{}, nil // came with the message: nothing to download
		}
		if serr == nil && dir == nil && dirErr == nil {
			dir, dirErr = q.openInbox(m)
		}
		err := cmp.Or(serr, dirErr)
		var n int64
		if err == nil {
			n, err = q.fetch(ctx, src, dir.root, *a, left)
		}
		if ctx.Err() != nil {
			return // stays pending; offered again after the restart
		}
		switch {
		case errors.Is(err, errTooLarge):
			a.Error = fmt.Sprintf("too large (limit %s)", HumanSize(left))
		case errors.Is(err, ErrWorkspaceLink):
			a.Error = refusedNote
			q.e.log.Warn("attachment not saved: "+refusedNote, "message", m.ID, "thread", m.Thread, "name", a.Name, "err", err)
		case err != nil:
			a.Error = "download failed: " + Redact(err.Error())
			q.e.log.Warn("attachment download failed", "message", m.ID, "name", a.Name, "err", Redact(err.Error()))
		default:
			a.Path, a.Size, a.Ref, a.Data = path.Join("inbox", dir.name, a.Name), n, "", nil
			used += n
			a.Transcript = q.transcribe(ctx, m, dir.root, *a)
		}
	}
	for i, a := range out {
		if a.Error != "" {
			out[i].Data = nil // not saved: the content goes no further
		}
		if m.Attachments[i].Pending() && a.Error != "" {
			unsaved = append(unsaved, fmt.Sprintf("%s (%s)", a.Name, ForPeople(a.Error)))
		}
	}
	var woken []string
	err := q.e.store.Update(ctx, func(tx Tx) error {
		cur, err := tx.Message(id)
		if err != nil {
			return err
		}
		cur.Attachments = out
		cur.Text = withAttachmentLines(cur.Text, out)
		if _, err = tx.PutMessage(cur); err != nil || len(unsaved) == 0 {
			return err
		}
		// The person learns it too, not only the model: one short notice.
		th, err := tx.Thread(cur.Thread)
		if err != nil {
			return err
		}
		pp, err := q.e.router.postTx(tx, &th, postSpec{msg: systemNotice(0, "Not saved: "+strings.Join(unsaved, "; ")+".")})
		woken = pp.woken
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			q.e.log.Error("store attachments", "message", id, "err", err)
		}
		return
	}
	stored = true
	q.e.nudge(woken)
	for _, b := range q.e.cfg().order {
		q.e.sched.wake(b.Handle)
	}
	q.e.lanes.kick()
}

// inlineFile "fetches" an attachment that carries its content (Attachment.Data).
type inlineFile struct{}

func (inlineFile) FetchFile(_ context.Context, a Attachment) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(a.Data)), nil
}

// fetcher returns the FileFetcher that downloads m's attachments.
func (q *fileQueue) fetcher(m Message) (FileFetcher, error) {
	if q.lim.Dir == nil {
		return nil, errors.New("no workspace is configured")
	}
	if m.Origin == nil {
		return nil, errors.New("message has no platform origin")
	}
	ad, ok := q.e.adapter(m.Origin.Account)
	if !ok {
		return nil, fmt.Errorf("no adapter for account %q", m.Origin.Account)
	}
	ff, ok := ad.(FileFetcher)
	if !ok {
		return nil, errors.New("this platform's files cannot be downloaded")
	}
	return ff, nil
}

// inboxDir is inbox/<message> in a thread's workspace, made by one download
// pass: root is it, inbox its parent, name the message id.
type inboxDir struct {
	inbox, root *os.Root
	name        string
}

// openInbox makes and opens inbox/<message> for m: the thread's directory and
// inbox are made when missing, the message's directory must be new. Any of
// them being a symbolic link, or the message's directory existing already, is
// ErrWorkspaceLink.
func (q *fileQueue) openInbox(m Message) (*inboxDir, error) {
	ws, err := openWorkspace(q.lim.Dir(m.Thread), dirMake)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	inbox, err := subdir(ws, "inbox", dirMake)
	if err != nil {
		return nil, err
	}
	name := strconv.FormatUint(uint64(m.ID), 10)
	root, err := subdir(inbox, name, dirFresh)
	if err != nil {
		inbox.Close()
		return nil, err
	}
	return &inboxDir{inbox: inbox, root: root, name: name}, nil
}

// close closes d; unless keep (the pass stored its results), it first removes
// the directory, so the pass offered again after a restart makes it anew.
func (d *inboxDir) close(keep bool) {
	d.root.Close()
	if !keep {
		d.inbox.RemoveAll(d.name)
	}
	d.inbox.Close()
}

// fetch downloads attachment a through ff into dir, at most limit bytes, with
// retries; it returns the bytes written.
func (q *fileQueue) fetch(ctx context.Context, ff FileFetcher, dir *os.Root, a Attachment, limit int64) (int64, error) {
	wait := q.lim.Backoff
	var err error
	for try := 1; try <= q.lim.Tries; try++ {
		var n int64
		n, err = q.fetchOnce(ctx, ff, a, dir, limit)
		if err == nil || errors.Is(err, errTooLarge) || errors.Is(err, ErrWorkspaceLink) || ctx.Err() != nil {
			return n, err
		}
		var de DeliveryError
		if errors.As(err, &de) && de.Permanent() {
			return 0, err
		}
		if errors.As(err, &de) && de.RetryAfter() > 0 {
			wait = de.RetryAfter()
		}
		if try < q.lim.Tries {
			if waitctx.Sleep(ctx, wait) != nil {
				return 0, ctx.Err()
			}
			wait *= 2
		}
	}
	return 0, err
}

func (q *fileQueue) fetchOnce(ctx context.Context, ff FileFetcher, a Attachment, dir *os.Root, limit int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, q.lim.Timeout)
	defer cancel()
	body, err := ff.FetchFile(ctx, a)
	if err != nil {
		return 0, err
	}
	defer body.Close()
	return saveFile(dir, a.Name, body, limit)
}

// transcribe returns the transcript of a voice note or audio file just saved
// into dir, or "" when transcription is off, does not apply, or failed
// (logged). The file is read through dir (OpenSaved), never by path.
func (q *fileQueue) transcribe(ctx context.Context, m Message, dir *os.Root, a Attachment) string {
	if q.lim.Transcribe == nil || (a.Kind != "voice" && a.Kind != "audio") {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, q.lim.Timeout)
	defer cancel()
	f, _, err := OpenSaved(dir, a.Name)
	var text string
	if err == nil {
		text, err = q.lim.Transcribe(ctx, a.Name, f)
		f.Close()
	}
	if err != nil {
		q.e.log.Warn("transcription failed", "message", m.ID, "name", a.Name, "err", Redact(err.Error()))
		return ""
	}
	return strings.TrimSpace(text)
}
