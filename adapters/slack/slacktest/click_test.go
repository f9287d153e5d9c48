package slacktest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/url"
	"testing"
	"time"

	"github.com/slack-go/slack"
)

// TestClickPayloadParsesInSlackGo: the block_actions payload a Click builds reads
// back through slack-go as the button press it describes, and InteractiveRequest's
// signature passes slack-go's own verifier.
func TestClickPayloadParsesInSlackGo(t *testing.T) {
	c := Click{User: "U0TEST001", UserName: "alice", Channel: "C0TEST001", MessageTS: "1767300000.000002",
		ThreadTS: "1767225600.000100", ActionID: "openbot_q_0", Value: "abcdefghijkl:0", Label: "Approve"}
	var cb slack.InteractionCallback
	if err := json.Unmarshal(c.Payload(), &cb); err != nil {
		t.Fatal(err)
	}
	if cb.Type != slack.InteractionTypeBlockActions || cb.Team.ID != DefaultTeam || cb.User.ID != "U0TEST001" ||
		cb.Container.ChannelID != "C0TEST001" || cb.Container.ThreadTs != "1767225600.000100" ||
		len(cb.ActionCallback.BlockActions) != 1 || cb.ActionCallback.BlockActions[0].Value != "abcdefghijkl:0" ||
		cb.ActionCallback.BlockActions[0].ActionID != "openbot_q_0" {
		t.Fatalf("parsed click %+v", cb)
	}

	now := time.Now()
	req, err := InteractiveRequest(t.Context(), "http://127.0.0.1/slack/acme/interactive", "s3cret", c.Payload(), now)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(req.Body)
	v, err := slack.NewSecretsVerifier(req.Header, "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = v.Write(body)
	if err := v.Ensure(); err != nil {
		t.Fatalf("slack-go refuses the signature: %v", err)
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || !bytes.Equal([]byte(form.Get("payload")), c.Payload()) {
		t.Fatalf("form payload %q, %v", form.Get("payload"), err)
	}
}

func TestEphemeralAndUpdateRecorded(t *testing.T) {
	s := New(Options{BotToken: "xoxb-1"})
	defer s.Close()
	api := slack.New("xoxb-1", slack.OptionAPIURL(s.APIURL()))
	ts, err := api.PostEphemeralContext(t.Context(), "C1", "U1", slack.MsgOptionText("only you", false), slack.MsgOptionTS("1.1"))
	if err != nil || ts == "" {
		t.Fatalf("postEphemeral = %q, %v", ts, err)
	}
	if _, _, _, err := api.UpdateMessageContext(t.Context(), "C1", "2.2", slack.MsgOptionText("new", false)); err != nil {
		t.Fatal(err)
	}
	e := s.CallsTo("chat.postEphemeral")
	if len(e) != 1 || e[0].Form.Get("user") != "U1" || e[0].Form.Get("channel") != "C1" || e[0].Form.Get("thread_ts") != "1.1" {
		t.Errorf("ephemeral calls %+v", e)
	}
	if u := s.CallsTo("chat.update"); len(u) != 1 || u[0].Form.Get("ts") != "2.2" {
		t.Errorf("update calls %+v", u)
	}
}
