package core_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/core"
)

// fileAdapter is a recAdapter that serves attachments by Ref and records uploads;
// failUpload makes the first upload attempt fail with a retryable error.
type fileAdapter struct {
	*recAdapter
	files      map[string]string
	fetchFails map[string]int // Ref -> attempts that fail first
	mu         sync.Mutex
	uploads    []core.FileDelivery
	tries      int
	failUpload bool
	// hold, when set, blocks fetches of Ref "slow" until it is closed.
	hold chan struct{}
}

func (f *fileAdapter) FetchFile(ctx context.Context, a core.Attachment) (io.ReadCloser, error) {
	if a.Ref == "slow" && f.hold != nil {
		select {
		case <-f.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fetchFails[a.Ref] > 0 {
		f.fetchFails[a.Ref]--
		return nil, errors.New("temporary failure")
	}
	body, ok := f.files[a.Ref]
	if !ok {
		return nil, errors.New("not found")
	}
	return io.NopCloser(strings.NewReader(body)), nil
}

func (f *fileAdapter) UploadFile(ctx context.Context, d core.FileDelivery) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tries++
	if f.failUpload && f.tries == 1 {
		return "", errors.New("upload: 503")
	}
	f.uploads = append(f.uploads, d)
	return "up1", nil
}

func TestInboundFilesSavedNotedAndRunStarts(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, core.Limits{})
	h.opts = func(o *core.Options) {
		o.Files = core.FileLimits{Dir: func(id core.ThreadID) string { return filepath.Join(dir, "t") }, MaxFileBytes: 100, Backoff: time.Millisecond}
	}
	fa := &fileAdapter{recAdapter: h.ad, files: map[string]string{
		"r1": "PNGDATA", "r2": "log line", "r3": strings.Repeat("x", 500),
	}, fetchFails: map[string]int{"r2": 1}}
	h.start2(fa)
	res := h.say("", func(in *core.Inbound) {
		in.Attachments = []core.Attachment{
			{Name: "shot.png", Type: "image/png", Kind: "image", Size: 7, Ref: "r1"},
			{Name: "../../etc/passwd", Type: "text/plain", Kind: "document", Ref: "r2"},
			{Name: "big.zip", Type: "application/zip", Kind: "document", Size: 5000, Ref: "r3"},
			{Name: "sneaky.bin", Kind: "document", Ref: "r3"}, // size undeclared, too large when read
			{Name: "gone.txt", Kind: "document", Ref: "missing"},
		}
	})
	h.idle()
	jobs := h.agent.jobsFor("chief_of_staff")
	if len(jobs) != 1 {
		t.Fatalf("a file-only message must start one run; got %d", len(jobs))
	}
	text := jobs[0].Triggers[0].Text
	for _, want := range []string{
		"shot.png (image/png, 7 B) saved at inbox/",
		"____etc_passwd",
		"big.zip (application/zip, 4.9 KB) not saved: too large",
		"sneaky.bin", "gone.txt",
		"download failed",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("trigger text lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text, "not saved: too large") != 2 {
		t.Errorf("want two too-large lines:\n%s", text)
	}
	// The person is told too, in one short notice naming each file not saved.
	var notices []string
	for _, d := range fa.deliveries() {
		if d.Kind == core.KindNotice && strings.HasPrefix(d.Text, "Not saved: ") {
			notices = append(notices, d.Text)
		}
	}
	if len(notices) != 1 || !strings.Contains(notices[0], "big.zip (too large (limit 100 B per file))") ||
		!strings.Contains(notices[0], "sneaky.bin") || !strings.Contains(notices[0], "gone.txt (download failed") ||
		strings.Contains(notices[0], "shot.png") {
		t.Errorf("want one notice naming the three files not saved, got %q", notices)
	}
	b, err := os.ReadFile(filepath.Join(dir, "t", "inbox", itoa(res.Message), "shot.png"))
	if err != nil || string(b) != "PNGDATA" {
		t.Fatalf("saved image: %q %v", b, err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "t", "inbox", itoa(res.Message)))
	if len(entries) != 2 {
		t.Errorf("want exactly the two saved files in the inbox, got %v", entries)
	}
	if _, err := os.Stat(filepath.Join(dir, "etc")); err == nil {
		t.Error("a name with .. escaped the inbox")
	}
}

func itoa(id core.MessageID) string { return strconv.FormatUint(uint64(id), 10) }

func TestSendFilePostsOnceAfterRetryableFailure(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "report.txt")
	if err := os.WriteFile(file, []byte("report"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, core.Limits{})
	fa := &fileAdapter{recAdapter: h.ad, failUpload: true}
	h.agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
		fp, ok := job.Env.(core.FilePoster)
		if !ok {
			return "", errors.New("env is not a FilePoster")
		}
		_, err := fp.PostFile(ctx, file, "the report")
		return "sent", err
	}
	// A second binding makes the file go out (the origin conversation is not echoed
	// for human messages; a bot's message goes everywhere).
	h.start2(fa)
	h.say("send me the report")
	h.idle() // the entry is pending through its retry, so idle means delivered
	fa.mu.Lock()
	defer fa.mu.Unlock()
	if len(fa.uploads) != 1 || fa.tries != 2 {
		t.Fatalf("want one upload after one failed try; uploads %d tries %d", len(fa.uploads), fa.tries)
	}
	u := fa.uploads[0]
	if u.File.Path != file || u.File.Caption != "the report" || u.File.Name != "report.txt" || u.ReplyTo == "" {
		t.Errorf("upload = %+v", u)
	}
}

func TestSafeFileName(t *testing.T) {
	long := strings.Repeat("a", 300) + ".pdf"
	cases := map[string]string{
		"report.pdf":        "report.pdf",
		"../../etc/passwd":  "____etc_passwd",
		"a/b\\c":            "a_b_c",
		"..":                "file",
		".hidden":           "hidden",
		"bad\x00na\nme\x7f": "bad_na_me_",
		"":                  "file",
		"名前.png":            "名前.png",
		"ok\u202egnp.exe":   "ok_gnp.exe",
	}
	for in, want := range cases {
		if got := core.SafeFileName(in, ""); got != want {
			t.Errorf("SafeFileName(%q) = %q, want %q", in, got, want)
		}
	}
	got := core.SafeFileName(long, "")
	if len(got) > 120 || !strings.HasSuffix(got, ".pdf") {
		t.Errorf("long name: %q (%d bytes)", got, len(got))
	}
	got = core.SafeFileName(strings.Repeat("é", 200), "")
	if len(got) > 120 || !strings.HasPrefix(got, "é") || strings.ContainsRune(got, '\uFFFD') {
		t.Errorf("long multibyte name cut badly: %q", got)
	}
}

func TestVoiceNoteTranscriptJoinsTheMessage(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, core.Limits{})
	var got []string
	var mu sync.Mutex
	h.opts = func(o *core.Options) {
		o.Files = core.FileLimits{Dir: func(core.ThreadID) string { return dir }, Backoff: time.Millisecond,
			Transcribe: func(ctx context.Context, name string, audio io.Reader) (string, error) {
				mu.Lock()
				got = append(got, name)
				mu.Unlock()
				b, err := io.ReadAll(audio)
				return "you said " + string(b), err
			}}
	}
	h.start2(&fileAdapter{recAdapter: h.ad, files: map[string]string{"v": "hello", "d": "doc"}})
	h.say("", func(in *core.Inbound) {
		in.Attachments = []core.Attachment{{Name: "voice.ogg", Type: "audio/ogg", Kind: "voice", Ref: "v"},
			{Name: "notes.txt", Kind: "document", Ref: "d"}}
	})
	h.idle()
	jobs := h.agent.jobsFor("chief_of_staff")
	if len(jobs) != 1 {
		t.Fatalf("runs = %d", len(jobs))
	}
	text := jobs[0].Triggers[0].Text
	if !strings.Contains(text, "[transcript of voice.ogg]: you said hello") {
		t.Errorf("trigger lacks the transcript:\n%s", text)
	}
	if len(got) != 1 || got[0] != "voice.ogg" {
		t.Errorf("transcribed %v, want only the voice note", got)
	}
}

// TestSendFileWithoutUploaderPostsThePath: an adapter without FileUploader (the
// terminal) gets the file as a text naming its path and caption.
func TestSendFileWithoutUploaderPostsThePath(t *testing.T) {
	file := filepath.Join(t.TempDir(), "patch.diff")
	if err := os.WriteFile(file, []byte("diff"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, core.Limits{})
	h.agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
		_, err := job.Env.(core.FilePoster).PostFile(ctx, file, "the fix")
		return "done", err
	}
	h.start()
	h.say("make a patch")
	h.idle()
	var found bool
	for _, d := range h.ad.deliveries() {
		if strings.Contains(d.Text, "the fix") && strings.Contains(d.Text, "patch.diff") && strings.Contains(d.Text, file) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no delivery names the file's path:\n%s", strings.Join(h.ad.texts(), "\n"))
	}
}

// TestSlowDownloadBlocksNoOtherMessage: while a file of one message is still
// downloading, a text message in another thread runs; the file message runs
// once its download finished.
func TestSlowDownloadBlocksNoOtherMessage(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, core.Limits{})
	h.opts = func(o *core.Options) {
		o.Files = core.FileLimits{Dir: func(core.ThreadID) string { return dir }, Backoff: time.Millisecond}
	}
	fa := &fileAdapter{recAdapter: h.ad, files: map[string]string{"slow": "big log"}, hold: make(chan struct{})}
	ran := make(chan struct{}, 2)
	h.agent.reply["chief_of_staff"] = func(context.Context, *core.Job) (string, error) {
		ran <- struct{}{}
		return "ok from chief_of_staff", nil
	}
	h.start2(fa)
	h.say("look at this", func(in *core.Inbound) {
		in.Attachments = []core.Attachment{{Name: "big.log", Kind: "document", Ref: "slow"}}
	})
	h.say("unrelated question", func(in *core.Inbound) { in.ThreadKey, in.Conversation = "console:other", "other" })
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a run while the download is held")
	}
	jobs := h.agent.jobsFor("chief_of_staff") // the file message cannot run while its download is held
	if len(jobs) != 1 || jobs[0].Triggers[0].Text != "unrelated question" {
		t.Fatalf("while the download is held, want one run for the other thread; got %d", len(jobs))
	}
	close(fa.hold)
	h.idle()
	jobs = h.agent.jobsFor("chief_of_staff")
	if len(jobs) != 2 || !strings.Contains(jobs[1].Triggers[0].Text, "big.log (document, 7 B) saved at inbox/") {
		t.Fatalf("after the download: %d runs", len(jobs))
	}
}
