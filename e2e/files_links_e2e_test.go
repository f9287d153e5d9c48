package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/adapters/feishu/feishutest"
	"openbot/core"
)

// downloadHook is an http.RoundTripper that runs f once, before the first
// request whose path contains match is sent.
type downloadHook struct {
	match string
	once  sync.Once
	f     func()
}

func (h *downloadHook) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.Contains(req.URL.Path, h.match) {
		h.once.Do(h.f)
	}
	return http.DefaultTransport.RoundTrip(req)
}

// linkPlatform starts one platform's adapter on its fake with the rig options
// and delivers a person's message carrying two files, saved as names (the
// second is the target of the planted links); download is a path fragment of
// that platform's file downloads.
type linkPlatform struct {
	name     string
	download string
	names    [2]string
	send     func(t *testing.T, opts ...func(*fileRig)) *fileRig
}

var linkPlatforms = []linkPlatform{
	{name: "telegram", download: "/file/bot", names: [2]string{"photo-501.jpg", "victim"},
		send: func(t *testing.T, opts ...func(*fileRig)) *fileRig {
			r, fake := startTelegramFiles(t, opts...)
			fake.AddFile("p1", "first body")
			fake.AddFile("d1", "attacker wins")
			upd := `{"update_id":1,"message":{"message_id":501,"from":{"id":100000001,"is_bot":false,"first_name":"Alice"},
"chat":{"id":100000001,"type":"private"},"date":1767225660,
"photo":[{"file_id":"p1","file_unique_id":"p","width":90,"height":90,"file_size":10}],
"document":{"file_id":"d1","file_unique_id":"d","file_name":"victim","mime_type":"text/plain","file_size":13}}}`
			if _, err := fake.PushUpdate("tok-cos", []byte(upd)); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := fake.WaitConfirmed(ctx, "tok-cos", 2); err != nil {
				t.Fatal(err)
			}
			return r
		}},
	{name: "slack", download: "/files-pri/", names: [2]string{"first.txt", "victim"},
		send: func(t *testing.T, opts ...func(*fileRig)) *fileRig {
			r, fake, post := startSlackFiles(t, opts...)
			first := fake.AddFile("F1", "first.txt", "first body")
			victim := fake.AddFile("F2", "victim", "attacker wins")
			post(slackFileEvent(t, "1767225600.000300", "", []map[string]any{
				{"id": "F1", "name": "first.txt", "mimetype": "text/plain", "size": 10, "url_private_download": first},
				{"id": "F2", "name": "victim", "mimetype": "text/plain", "size": 13, "url_private_download": victim},
			}))
			return r
		}},
	{name: "feishu", download: "/resources/", names: [2]string{"image-img_a.png", "image-img_b.png"},
		send: func(t *testing.T, opts ...func(*fileRig)) *fileRig {
			r, fake, send := startFeishuFiles(t, opts...)
			fake.AddResource("om_post1", "img_a", "first body")
			fake.AddResource("om_post1", "img_b", "attacker wins")
			send(feishutest.MessageEvent{MessageID: "om_post1", ChatID: feishutest.P2PChat, ChatType: "p2p", MsgType: "post",
				Content: `{"title":"","content":[[{"tag":"text","text":"see"},{"tag":"img","image_key":"img_a"},{"tag":"img","image_key":"img_b"}]]}`})
			return r
		}},
}

// TestInboundFilesRefusePlantedLinks drives each platform's fake through its
// real adapter while a sandboxed command (played by the test) has planted a
// symbolic link in the thread's workspace: inbox, inbox/<message>, or the
// second file's own name (planted while the first downloads). Nothing outside
// the workspace is created or changed, the second file is noted as not saved,
// and a WARN line names the message and the thread.
func TestInboundFilesRefusePlantedLinks(t *testing.T) {
	cases := []struct {
		name       string
		firstSaved bool
		// plant runs at the engine's first look at the thread's directory
		// (atDir) or before the first file's download request (at download).
		atDir bool
		plant func(t *testing.T, thread, outside string, m core.Message, names [2]string)
	}{
		{name: "inbox", atDir: true, plant: func(t *testing.T, thread, outside string, m core.Message, _ [2]string) {
			symlink(t, outside, filepath.Join(thread, "inbox"))
		}},
		{name: "message dir", atDir: true, plant: func(t *testing.T, thread, outside string, m core.Message, _ [2]string) {
			symlink(t, outside, filepath.Join(thread, "inbox", strconv.FormatUint(uint64(m.ID), 10)))
		}},
		{name: "file", firstSaved: true, plant: func(t *testing.T, thread, outside string, m core.Message, names [2]string) {
			symlink(t, filepath.Join(outside, "victim"), filepath.Join(thread, "inbox", strconv.FormatUint(uint64(m.ID), 10), names[1]))
		}},
	}
	for _, p := range linkPlatforms {
		for _, c := range cases {
			t.Run(p.name+"/"+c.name, func(t *testing.T) {
				outside := t.TempDir()
				if err := os.WriteFile(filepath.Join(outside, "victim"), []byte("precious"), 0o600); err != nil {
					t.Fatal(err)
				}
				var (
					rig     *fileRig
					ready   = make(chan struct{}) // rig is set
					once    sync.Once
					planted core.Message
				)
				plant := func() {
					once.Do(func() {
						<-ready
						m, ok := downloading(rig)
						if !ok {
							t.Error("no message is downloading")
							return
						}
						planted = m
						c.plant(t, rig.threadPath(m.Thread), outside, m, p.names)
					})
				}
				r := p.send(t, func(r *fileRig) {
					rig = r
					if c.atDir {
						r.beforeDir = func(core.ThreadID) { plant() }
					} else {
						r.hc = &http.Client{Transport: &downloadHook{match: p.download, f: plant}}
					}
					close(ready)
				})
				r.idle()
				checkUntouched(t, outside)
				runs := strings.Join(r.agent.runs(), "\n")
				first, second := attachmentLine(runs, p.names[0]), attachmentLine(runs, p.names[1])
				if !strings.HasSuffix(second, "not saved: the inbox path in the workspace is a link or already exists]") {
					t.Errorf("%s is not noted as refused:\n%s", p.names[1], runs)
				}
				if got := strings.Contains(first, " saved at inbox/"); got != c.firstSaved {
					t.Errorf("%s saved = %v, want %v:\n%s", p.names[0], got, c.firstSaved, runs)
				}
				warn := "level=WARN msg=\"attachment not saved: the inbox path in the workspace is a link or already exists\" message=" +
					strconv.FormatUint(uint64(planted.ID), 10) + " thread=" + strconv.FormatUint(uint64(planted.Thread), 10) + " name=" + p.names[1]
				if !strings.Contains(r.logs.String(), warn) {
					t.Errorf("log lacks %q:\n%s", warn, r.logs.String())
				}
			})
		}
	}
}

// attachmentLine is the line of text that notes the attachment name, or "".
func attachmentLine(text, name string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "[attachment: "+name+" (") {
			return l
		}
	}
	return ""
}

// downloading is the newest message of r's store whose files are still
// pending: the one being downloaded.
func downloading(r *fileRig) (core.Message, bool) {
	var found core.Message
	var ok bool
	_ = r.st.View(context.Background(), func(tx core.ReadTx) error {
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

// checkUntouched asserts that dir holds only the file victim, unchanged.
func checkUntouched(t *testing.T, dir string) {
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

// symlink makes link point at target, creating link's directory.
func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o750); err != nil {
		t.Error(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Error(err)
	}
}
