package e2e

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"openbot/adapters/telegram"
	"openbot/adapters/telegram/telegramtest"
	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/core"
)

// pngBytes is a 1x1 PNG.
const pngBytes = "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99=\x1d\x00\x00\x00\x00IEND\xaeB`\x82"

// runVisionDM sends a Telegram DM with a captioned photo to the real agent
// (vision on or off for chief_of_staff) and returns the model request.
func runVisionDM(t *testing.T, vision bool) openaitest.Request {
	t.Helper()
	srv := openaitest.New(t)
	srv.Handle(func(openaitest.Request) openaitest.Reply { return openaitest.Text("seen") })
	dir := t.TempDir()
	filesDir := func(id core.ThreadID) string { return filepath.Join(dir, "thread-"+strconv.FormatUint(uint64(id), 10)) }
	ag, err := agents.New(agents.Options{
		Providers: map[string]agents.Provider{"default": {BaseURL: srv.URL(), APIKey: "k", Model: "m"}},
		Registry:  agents.NewRegistry(), FilesDir: filesDir,
	})
	if err != nil {
		t.Fatal(err)
	}
	team := append([]core.BotProfile(nil), e2eTeam...)
	team[0].Vision = vision
	fake := telegramtest.NewServer(telegramtest.Bot{Token: "tok-cos", ID: 900, Username: "chief_of_staff_bot"})
	t.Cleanup(fake.Close)
	fake.AddFile("ph", pngBytes)
	r := startTelegramWith(t, fake, "", core.Options{Agent: ag, Bots: team, Files: core.FileLimits{Dir: filesDir, Backoff: time.Millisecond}},
		nil, telegram.Options{Name: "cos", Bot: "chief_of_staff", Token: "tok-cos"})

	upd := `{"update_id":1,"message":{"message_id":501,"from":{"id":100000001,"is_bot":false,"first_name":"Alice"},
"chat":{"id":100000001,"type":"private"},"date":1767225660,"caption":"what is wrong here?",
"photo":[{"file_id":"ph","file_unique_id":"p","width":1,"height":1,"file_size":` + strconv.Itoa(len(pngBytes)) + `}]}}`
	if _, err := fake.PushUpdate("tok-cos", []byte(upd)); err != nil {
		t.Fatal(err)
	}
	r.idle()
	if _, err := fake.WaitCalls(r.ctx(), "sendMessage", 1); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("model requests = %d, want 1", len(reqs))
	}
	return reqs[0]
}

// lastUserParts returns the text and the image URLs of the request's last user message.
func lastUserParts(t *testing.T, r openaitest.Request) (text string, images []string) {
	t.Helper()
	msgs := r.Messages()
	last := msgs[len(msgs)-1]
	if last["role"] != "user" {
		t.Fatalf("last message role %v", last["role"])
	}
	switch c := last["content"].(type) {
	case string:
		return c, nil
	case []any:
		for _, p := range c {
			part, _ := p.(map[string]any)
			switch part["type"] {
			case "text":
				text += part["text"].(string)
			case "image_url":
				u, _ := part["image_url"].(map[string]any)
				images = append(images, u["url"].(string))
			}
		}
		return text, images
	}
	b, _ := json.Marshal(last)
	t.Fatalf("unexpected content %s", b)
	return "", nil
}

// TestTelegramPhotoReachesVisionModel: with vision on, the model request's last
// user message carries the caption, the attachment line and the photo as a
// PNG data URL; with vision off it carries the line only.
func TestTelegramPhotoReachesVisionModel(t *testing.T) {
	for _, vision := range []bool{true, false} {
		t.Run("vision="+strconv.FormatBool(vision), func(t *testing.T) {
			text, images := lastUserParts(t, runVisionDM(t, vision))
			if !strings.Contains(text, "what is wrong here?") || !strings.Contains(text, "photo-501.jpg") || !strings.Contains(text, "saved at inbox/") {
				t.Errorf("user text lacks the caption or the attachment line:\n%s", text)
			}
			switch {
			case vision && (len(images) != 1 || !strings.HasPrefix(images[0], "data:image/png;base64,")):
				t.Errorf("vision on: images = %.60q", images)
			case !vision && len(images) != 0:
				t.Errorf("vision off: images sent: %d", len(images))
			}
		})
	}
}
