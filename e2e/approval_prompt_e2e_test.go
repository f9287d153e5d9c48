package e2e

// End-to-end tests of what an approval prompt shows, on every platform with
// buttons: the real engine and agent loop with the built-in shell tool behind an
// approval, the model asking to run a 10,000-character command that decodes a
// base64 payload and pipes it to sh, and the fake platforms, which refuse
// messages beyond the real limits. Each prompt must show the command whole, as
// the command itself, warn that it runs hidden content, and say the call's
// timeout.

import (
	"encoding/base64"
	"encoding/json"
	"html"
	"regexp"
	"strings"
	"testing"

	"openbot/adapters/feishu/feishutest"
	"openbot/agents/openaitest"
	"openbot/core"
)

// encodedCommand is a shell command of about 10,000 characters that decodes a
// base64 payload and pipes it to sh.
var encodedCommand = func() string {
	payload := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("echo hidden step; ", 500)))
	return "echo " + payload[:9950] + " | base64 -d | sh"
}()

// encodedModel asks to run encodedCommand with a timeout of 120 seconds, and
// reports whatever the tool answers.
func encodedModel(r openaitest.Request) openaitest.Reply {
	ms := r.Body.Messages
	if last := ms[len(ms)-1]; last.Role == "tool" {
		return openaitest.Text("done: " + last.Content)
	}
	args, _ := json.Marshal(map[string]any{"command": encodedCommand, "timeout_seconds": 120})
	return openaitest.Calls(openaitest.Call("shell", string(args)))
}

// checkPrompt checks the text people were shown: shown is the command as it
// appears there, all is everything posted.
func checkPrompt(t *testing.T, shown, all string) {
	t.Helper()
	if shown != encodedCommand {
		t.Errorf("the prompt shows %d characters of the command as a command; want all %d", len(shown), len(encodedCommand))
	}
	if !strings.Contains(all, "This command decodes hidden content (base64) and runs it") {
		t.Error("the prompt does not warn that the command runs hidden content")
	}
	if !strings.Contains(all, "Timeout: 120 s.") {
		t.Error("the prompt does not say the call's timeout")
	}
}

func TestSlackApprovalPromptShowsEncodedCommand(t *testing.T) {
	r := startApproval(t, nil, []core.ActorID{slackActor(slackAlice)}, func(r *approvalRig) { r.model.Handle(encodedModel) })
	r.say(t, slackAlice, slackRoot, "", "@engineer please install it")
	r.idle()
	var shown, all strings.Builder
	code := regexp.MustCompile("(?s)```\n(.*?)\n```")
	for _, c := range r.fake.CallsTo("chat.postMessage") {
		var blocks []struct {
			BlockID string `json:"block_id"`
			Text    *struct {
				Text string `json:"text"`
			} `json:"text"`
		}
		_ = json.Unmarshal([]byte(c.Form.Get("blocks")), &blocks)
		for _, b := range blocks {
			if b.Text == nil {
				continue
			}
			all.WriteString(b.Text.Text + "\n")
			if strings.HasPrefix(b.BlockID, "openbot_question_args") {
				for _, m := range code.FindAllStringSubmatch(b.Text.Text, -1) {
					shown.WriteString(strings.NewReplacer("\u200b", "", "&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(m[1]))
				}
			}
		}
	}
	checkPrompt(t, shown.String(), all.String())
}

func TestTelegramApprovalPromptShowsEncodedCommand(t *testing.T) {
	r := startTelegramApproval(t, false, func(r *tgApprovalRig) { r.llm.Handle(encodedModel) })
	r.push(tgMention(201, tgApprovalGroup, "please install it"))
	r.idle()
	r.question()
	var shown, all strings.Builder
	pre := regexp.MustCompile(`(?s)<pre>(.*?)</pre>`)
	for _, text := range r.sentTexts(tgApprovalGroup) {
		all.WriteString(html.UnescapeString(text) + "\n")
		for _, m := range pre.FindAllStringSubmatch(text, -1) {
			shown.WriteString(html.UnescapeString(m[1]))
		}
	}
	checkPrompt(t, shown.String(), all.String())
}

func TestFeishuApprovalPromptShowsEncodedCommand(t *testing.T) {
	r := newFeishuRig(t)
	r.llm.Handle(encodedModel)
	r.mention()
	r.card()
	r.idle()
	var shown, all strings.Builder
	code := regexp.MustCompile("(?s)```sh\n(.*?)\n```")
	for _, m := range r.fake.Messages() {
		text := feishutest.CardText(m.Content)
		all.WriteString(text + "\n")
		for _, c := range code.FindAllStringSubmatch(text, -1) {
			shown.WriteString(strings.ReplaceAll(c[1], "\u200b", ""))
		}
	}
	checkPrompt(t, shown.String(), all.String())
}
