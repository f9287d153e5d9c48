package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"openbot/adapters/slack"
	"openbot/adapters/slack/slacktest"
)

// startSlackFiles runs a fileRig, adjusted by opts, with a whole-team Slack
// app (HTTP mode) on a fake Slack; it returns the fake and a function posting
// signed events.
func startSlackFiles(t *testing.T, opts ...func(*fileRig)) (*fileRig, *slacktest.Server, func([]byte)) {
	t.Helper()
	r := newFileRig(t)
	for _, o := range opts {
		o(r)
	}
	fake := slacktest.New(slacktest.Options{BotToken: "xoxb-e2e"})
	t.Cleanup(fake.Close)
	ad, err := slack.New(slack.Options{Name: "acme", Bot: "*", Mode: "http", BotToken: "xoxb-e2e", SigningSecret: slackSecret, DMPolicy: "open",
		APIURL: fake.APIURL(), Bots: e2eTeam, Engine: r.eng, State: slack.StoreState(r.st), HTTPClient: r.hc})
	if err != nil {
		t.Fatal(err)
	}
	r.run(ad)
	post := func(body []byte) {
		t.Helper()
		if code := slackPost(t, r.hook.URL+"/slack/acme/events", body); code != http.StatusOK {
			t.Fatalf("events POST = %d", code)
		}
	}
	return r, fake, post
}

// slackFileEvent is a DM message event (subtype file_share when files are set).
func slackFileEvent(t *testing.T, ts, text string, files []map[string]any) []byte {
	t.Helper()
	ev := map[string]any{"type": "message", "channel": "D0TEST001", "channel_type": "im", "user": "U0TEST001",
		"ts": ts, "text": text, "team": "T0TEST", "event_ts": ts}
	if len(files) > 0 {
		ev["subtype"], ev["files"], ev["upload"] = "file_share", files, false
	}
	b, err := json.Marshal(map[string]any{"token": "TESTverificationTOKEN000", "team_id": "T0TEST", "api_app_id": "A0TESTAPP",
		"type": "event_callback", "event_id": "Ev" + ts, "event_time": 1767225600, "event": ev})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSlackFileShareSavesFilesAndRuns: a file_share DM without text carrying a
// screenshot, a log and an oversized archive: the first two are downloaded
// with the bot token into the thread's inbox, the archive is noted as too
// large, and the message starts one run whose trigger lists all three.
func TestSlackFileShareSavesFilesAndRuns(t *testing.T) {
	r, fake, post := startSlackFiles(t)
	png := fake.AddFile("F1", "screen shot.png", "PNG-BYTES")
	log := fake.AddFile("F2", "app.log", "line one")
	files := []map[string]any{
		{"id": "F1", "name": "screen shot.png", "mimetype": "image/png", "filetype": "png", "size": 9, "url_private": png, "url_private_download": png},
		{"id": "F2", "name": "app.log", "mimetype": "text/plain", "filetype": "text", "size": 8, "url_private_download": log},
		{"id": "F3", "name": "dump.tar", "mimetype": "application/x-tar", "size": 900000, "url_private_download": fake.AddFile("F3", "dump.tar", "x")},
	}
	post(slackFileEvent(t, "1767225600.000100", "", files))
	r.idle()
	r.checkSaved(t, "screen shot.png", "app.log", "dump.tar")
	if n := len(fake.CallsTo("file.download")); n != 2 {
		t.Errorf("downloads = %d, want 2 (the oversized file is not fetched)", n)
	}
}

// TestSlackSendFileOnceAfterRetryableFailure: send_file uploads through the
// external flow into the DM and posts the file exactly once although the
// first completion fails with a 500.
func TestSlackSendFileOnceAfterRetryableFailure(t *testing.T) {
	r, fake, post := startSlackFiles(t)
	fake.FailNext("files.completeUploadExternal", http.StatusInternalServerError, "internal_error", 0)
	post(slackFileEvent(t, "1767225600.000200", "please send the report", nil))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := fake.WaitCalls(ctx, "files.completeUploadExternal", 2); err != nil {
		t.Fatal(err)
	}
	r.idle()
	var posted []slacktest.Message
	for _, m := range fake.Messages() {
		if m.FileName != "" {
			posted = append(posted, m)
		}
	}
	if len(posted) != 1 || posted[0].FileName != "report.txt" || posted[0].File != "the report body" ||
		!strings.Contains(posted[0].Text, "here it is") || posted[0].Channel != "D0TEST001" {
		t.Fatalf("posted files = %+v, want report.txt once in the DM", posted)
	}
}
