package core_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/core"
)

// lockedBuffer collects log output written from the engine's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// hookFetcher is a fileAdapter that calls before with the Ref of each fetch
// ahead of serving it.
type hookFetcher struct {
	*fileAdapter
	before func(ref string)
}

func (h *hookFetcher) FetchFile(ctx context.Context, a core.Attachment) (io.ReadCloser, error) {
	h.before(a.Ref)
	return h.fileAdapter.FetchFile(ctx, a)
}

// pendingFileMessage is the newest message of st whose attachments are still
// pending: the one being downloaded.
func pendingFileMessage(st core.Store) (core.Message, bool) {
	var found core.Message
	var ok bool
	_ = st.View(context.Background(), func(tx core.ReadTx) error {
		ms, err := tx.MessagesSince(0, 1000)
		for _, m := range ms {
			for _, a := range m.Attachments {
				if a.Pending() {
					found, ok = m, true
				}
			}
		}
		return err
	})
	return found, ok
}

// TestInboundFileRefusesPlantedLinks: a sandboxed command may plant symbolic
// links in the thread's workspace (the thread directory itself when the
// workspace is shared, inbox, inbox/<message>, or the file's own name) to make
// openbot write outside it. Each is refused: nothing outside is created or
// changed, the attachment is noted as not saved, and a WARN line names the
// message and thread.
func TestInboundFileRefusesPlantedLinks(t *testing.T) {
	cases := []struct {
		name string
		// plantDir runs when core asks for the thread's directory, plantFetch
		// while the first file is downloading; ws is that directory.
		plantDir, plantFetch func(t *testing.T, ws, outside string, m core.Message)
		firstSaved           bool
	}{
		{name: "thread dir", plantDir: func(t *testing.T, ws, outside string, m core.Message) {
			mustSymlink(t, outside, ws)
		}},
		{name: "inbox", plantDir: func(t *testing.T, ws, outside string, m core.Message) {
			mustMkdir(t, ws)
			mustSymlink(t, outside, filepath.Join(ws, "inbox"))
		}},
		{name: "message dir", plantDir: func(t *testing.T, ws, outside string, m core.Message) {
			mustMkdir(t, filepath.Join(ws, "inbox"))
			mustSymlink(t, outside, filepath.Join(ws, "inbox", itoa(m.ID)))
		}},
		{name: "file", firstSaved: true, plantFetch: func(t *testing.T, ws, outside string, m core.Message) {
			mustSymlink(t, filepath.Join(outside, "victim"), filepath.Join(ws, "inbox", itoa(m.ID), "victim"))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			ws, outside := filepath.Join(base, "ws", "t"), filepath.Join(base, "outside")
			mustMkdir(t, outside)
			if err := os.WriteFile(filepath.Join(outside, "victim"), []byte("precious"), 0o600); err != nil {
				t.Fatal(err)
			}
			h := newHarness(t, core.Limits{})
			logs := &lockedBuffer{}
			plant := func(f func(*testing.T, string, string, core.Message)) func() {
				var once sync.Once
				return func() {
					once.Do(func() {
						if f == nil {
							return
						}
						m, ok := pendingFileMessage(h.store)
						if !ok {
							t.Error("no message is downloading")
							return
						}
						f(t, ws, outside, m)
					})
				}
			}
			atDir, atFetch := plant(c.plantDir), plant(c.plantFetch)
			h.opts = func(o *core.Options) {
				o.Logger = slog.New(slog.NewTextHandler(logs, nil))
				o.Files = core.FileLimits{Backoff: time.Millisecond, Dir: func(core.ThreadID) string { atDir(); return ws }}
			}
			fa := &fileAdapter{recAdapter: h.ad, files: map[string]string{"a": "first body", "b": "attacker wins"}}
			h.start2(&hookFetcher{fileAdapter: fa, before: func(ref string) {
				if ref == "a" {
					atFetch()
				}
			}})
			res := h.say("", func(in *core.Inbound) {
				in.Attachments = []core.Attachment{{Name: "first.txt", Kind: "document", Ref: "a"},
					{Name: "victim", Kind: "document", Ref: "b"}}
			})
			h.idle()
			checkOutside(t, outside)
			jobs := h.agent.jobsFor("chief_of_staff")
			if len(jobs) != 1 {
				t.Fatalf("runs = %d, want 1", len(jobs))
			}
			text := jobs[0].Triggers[0].Text
			refused := "not saved: the inbox path in the workspace is a link or already exists"
			if !strings.Contains(text, "victim (document, size unknown) "+refused) {
				t.Errorf("trigger does not note victim as refused:\n%s", text)
			}
			if got := strings.Contains(text, "first.txt (document, 10 B) saved at inbox/"); got != c.firstSaved {
				t.Errorf("first.txt saved = %v, want %v:\n%s", got, c.firstSaved, text)
			}
			warn := "level=WARN msg=\"attachment not saved: the inbox path in the workspace is a link or already exists\" message=" +
				itoa(res.Message) + " thread=" + itoa(core.MessageID(res.Thread)) + " name=victim"
			if !strings.Contains(logs.String(), warn) {
				t.Errorf("log lacks %q:\n%s", warn, logs.String())
			}
		})
	}
}

// checkOutside asserts that dir holds only the file victim, unchanged.
func checkOutside(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "victim" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("outside the workspace: %v, want only victim", names)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "victim")); err != nil || string(b) != "precious" {
		t.Errorf("victim = %q %v, want it unchanged", b, err)
	}
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Error(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	mustMkdir(t, filepath.Dir(link))
	if err := os.Symlink(target, link); err != nil {
		t.Error(err)
	}
}

// TestDownloadStoppedMidwayResumesAfterRestart: a download pass cut short by
// shutdown leaves no inbox/<message> behind (it made it, and would refuse it as
// already existing), so after the restart the message's files are all saved.
func TestDownloadStoppedMidwayResumesAfterRestart(t *testing.T) {
	ws := t.TempDir()
	h := newHarness(t, core.Limits{})
	h.opts = func(o *core.Options) {
		o.Files = core.FileLimits{Backoff: time.Millisecond, Dir: func(core.ThreadID) string { return ws }}
	}
	fetching := make(chan struct{})
	fa := &fileAdapter{recAdapter: h.ad, files: map[string]string{"a": "first body", "slow": "second body"}, hold: make(chan struct{})}
	h.start2(&hookFetcher{fileAdapter: fa, before: func(ref string) {
		if ref == "slow" {
			close(fetching) // first.txt is saved; this fetch is held until the stop
		}
	}})
	res := h.say("", func(in *core.Inbound) {
		in.Attachments = []core.Attachment{{Name: "first.txt", Kind: "document", Ref: "a"},
			{Name: "second.txt", Kind: "document", Ref: "slow"}}
	})
	<-fetching
	if _, err := os.Stat(filepath.Join(ws, "inbox", itoa(res.Message), "first.txt")); err != nil {
		t.Fatalf("first.txt is not saved while the second file downloads: %v", err)
	}
	h.stop()
	if _, err := os.Lstat(filepath.Join(ws, "inbox", itoa(res.Message))); err == nil {
		t.Error("the stopped pass left inbox/<message> behind")
	}
	h.start2(&fileAdapter{recAdapter: h.ad, files: fa.files})
	h.idle()
	var text string
	for _, m := range h.messages(res.Thread) {
		if m.ID == res.Message {
			text = m.Text
		}
	}
	for _, want := range []string{"first.txt (document, 10 B) saved at inbox/", "second.txt (document, 11 B) saved at inbox/"} {
		if !strings.Contains(text, want) {
			t.Errorf("after the restart the message lacks %q:\n%s", want, text)
		}
	}
}
