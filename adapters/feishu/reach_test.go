package feishu_test

import (
	"strings"
	"testing"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
)

// TestApprovalCardShowsReach: an approval card says what the tool can reach.
func TestApprovalCardShowsReach(t *testing.T) {
	q := approvalQ()
	q.Reach = "runs in the sandbox with network off"
	if text := feishutest.CardText(feishu.QuestionCard(q, "Engineer", false)); !strings.Contains(text, "**Reach:** runs in the sandbox with network off") {
		t.Errorf("card text %q lacks the reach", text)
	}
	q.Reach = ""
	if text := feishutest.CardText(feishu.QuestionCard(q, "Engineer", false)); strings.Contains(text, "Reach") {
		t.Errorf("card without reach shows %q", text)
	}
}
