package telegram

import (
	"strings"
	"testing"
)

// TestApprovalShowsReach: an approval message says what the tool can reach.
func TestApprovalShowsReach(t *testing.T) {
	e := newEnv(t)
	a := e.adapter(t, e.options())
	q := approval()
	q.Reach = "runs in the sandbox with network <off>"
	got := a.QuestionHTML(qDelivery("-1001000000002:topic:42", q), false)
	if !strings.Contains(got, "<b>shell</b> command:\n<pre>echo x &gt;&gt; ran.txt</pre>\n<i>Reach: runs in the sandbox with network &lt;off&gt;</i>") {
		t.Errorf("message lacks the reach:\n%s", got)
	}
	if got := a.QuestionHTML(qDelivery("-1001000000002:topic:42", approval()), false); strings.Contains(got, "Reach") {
		t.Errorf("message without reach shows it:\n%s", got)
	}
}
