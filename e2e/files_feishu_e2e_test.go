package e2e

import (
	"net/http"
	"strings"
	"testing"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
)

// startFeishuFiles runs a fileRig, adjusted by opts, with a Feishu app for
// chief_of_staff in webhook mode; it returns the fake and a function
// delivering events.
func startFeishuFiles(t *testing.T, opts ...func(*fileRig)) (*fileRig, *feishutest.Server, func(feishutest.MessageEvent)) {
	t.Helper()
	r := newFileRig(t)
	for _, o := range opts {
		o(r)
	}
	fake := feishutest.New(t)
	fo := feishuOptions(fake, r.proc, "chief_of_staff", feishu.ModeWebhook)
	fo.HTTPClient, fo.Cursors = r.hc, nil
	startFeishuApp(t, r.proc, fo)
	send := func(ev feishutest.MessageEvent) {
		t.Helper()
		if err := feishuPost(r.hook.URL+"/feishu/acme/events", ev.JSON()); err != nil {
			t.Fatal(err)
		}
	}
	return r, fake, send
}

// TestFeishuImageAndFileMessagesSaveFilesAndRun: an image message and a file
// message in a p2p chat (each a message of its own on Feishu) are downloaded
// from the message resource API into the thread's inbox and start runs; an
// oversized file is noted and not saved.
func TestFeishuImageAndFileMessagesSaveFilesAndRun(t *testing.T) {
	r, fake, send := startFeishuFiles(t)
	fake.AddResource("om_img1", "img_v3_abc", "PNGDATA")
	fake.AddResource("om_file1", "file_v3_log", "log body")
	fake.AddResource("om_file2", "file_v3_big", strings.Repeat("z", 4096))
	send(feishutest.MessageEvent{MessageID: "om_img1", ChatID: feishutest.P2PChat, ChatType: "p2p", MsgType: "image",
		Content: `{"image_key":"img_v3_abc"}`})
	send(feishutest.MessageEvent{MessageID: "om_file1", ChatID: feishutest.P2PChat, ChatType: "p2p", MsgType: "file",
		Content: `{"file_key":"file_v3_log","file_name":"app.log"}`})
	send(feishutest.MessageEvent{MessageID: "om_file2", ChatID: feishutest.P2PChat, ChatType: "p2p", MsgType: "file",
		Content: `{"file_key":"file_v3_big","file_name":"dump.bin"}`})
	r.idle()
	all := strings.Join(r.agent.runs(), "\n")
	for _, want := range []string{"image-img_v3_abc.png (image/png, 7 B) saved at inbox/", "app.log (document, 8 B) saved at inbox/",
		"dump.bin (document, size unknown) not saved: too large"} {
		if !strings.Contains(all, want) {
			t.Errorf("runs lack %q:\n%s", want, all)
		}
	}
	for _, m := range fake.Messages() {
		if strings.Contains(m.Text(), "not supported") {
			t.Errorf("a file message got the unsupported notice: %q", m.Text())
		}
	}
}

// TestFeishuSendFileOnceAfterRetryableFailure: send_file uploads with
// im/v1/files and replies with a file message exactly once, although the
// first upload fails with a server error.
func TestFeishuSendFileOnceAfterRetryableFailure(t *testing.T) {
	r, fake, send := startFeishuFiles(t)
	fake.FailNext(feishutest.Failure{PathPrefix: "/open-apis/im/v1/files", Status: http.StatusInternalServerError, Code: 1, Msg: "system busy"})
	send(feishutest.MessageEvent{MessageID: "om_ask1", ChatID: feishutest.P2PChat, ChatType: "p2p", Text: "please send the report"})
	if _, err := fake.WaitCalls(r.ctx(), "/open-apis/im/v1/files", 2); err != nil {
		t.Fatal(err)
	}
	r.idle()
	var files, captions int
	for _, m := range fake.Messages() {
		switch {
		case m.MsgType == "file":
			files++
			key := strings.TrimSuffix(strings.TrimPrefix(m.Content, `{"file_key":"`), `"}`)
			up, ok := fake.Uploaded(key)
			if !ok || up.Name != "report.txt" || up.Content != "the report body" || up.Type != "stream" || m.ReplyTo != "om_ask1" {
				t.Errorf("file message %+v, upload %+v", m, up)
			}
		case m.Text() == "here it is":
			captions++
		}
	}
	if files != 1 || captions != 1 {
		t.Fatalf("file messages %d, captions %d; want one each", files, captions)
	}
}
